package loop

import (
	"fmt"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// Random slock clients lock, unlock, wait and disconnect (FIN or RST) at random, with
// millisecond timeouts and expiries; the store's invariants hold throughout, every reply
// is one the protocol allows, and once every lock has expired nothing is held or waiting.
func TestSlockHammerRandomClientsAndDisconnects(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Listeners = append(c.Listeners, Listener{Proto: ProtoSlock, Addr: "127.0.0.1:0"})
	})
	probe := dialSlock(t, ts.slockAddr)
	probe.ping() // publishes the loop for onLoop
	const workers, ops = 8, 200
	keys := [][16]byte{key16("ha"), key16("hb"), key16("hc")}
	var failed atomic.Bool
	stopChecks := ts.checkWhileRunning(t, "lock", ts.st.locks.Check, &failed)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 11))
			c := dialSlock(t, ts.slockAddr)
			held := map[[16]byte][16]byte{} // key -> LockId this connection took
			for i := 0; i < ops && !failed.Load(); i++ {
				k := keys[rng.Intn(len(keys))]
				switch p := rng.Intn(100); {
				case p < 5:
					if rng.Intn(2) == 0 {
						_ = c.c.(*net.TCPConn).SetLinger(0)
					}
					c.close()
					c = dialSlock(t, ts.slockAddr)
					held = map[[16]byte][16]byte{} // the locks live on until they expire
				case p < 60:
					if _, ok := held[k]; ok {
						continue
					}
					id := c.id()
					count := uint16(0)
					if rng.Intn(3) == 0 {
						count = 2 // up to three holders
					}
					f := lockFrame(slock.TypeLock, 0, 0, k, id, ms(uint16(rng.Intn(60))), ms(uint16(200+rng.Intn(600))), count, 0, nil)
					r := c.start(f, fmt.Sprintf("worker %d lock", w)).reply()
					switch r.Result {
					case slock.ResultOK:
						held[k] = id
					case slock.ResultTimeout:
					default:
						t.Errorf("worker %d: lock -> %d (%s)", w, r.Result, r.Result)
						failed.Store(true)
					}
				default:
					id, ok := held[k]
					if !ok {
						id = c.id() // an unlock of something never locked
					}
					f := lockFrame(slock.TypeUnlock, 0, 0, k, id, 0, 0, 0, 0, nil)
					r := c.start(f, fmt.Sprintf("worker %d unlock", w)).reply()
					delete(held, k)
					switch r.Result {
					case slock.ResultOK:
						if !ok {
							t.Errorf("worker %d: unlocked a lock it never took", w)
							failed.Store(true)
						}
					case slock.ResultUnlockError, slock.ResultUnownError:
						// Never held, or it expired meanwhile.
					case slock.ResultUnknownDB:
						if ok { // only before any lock has created database 0
							t.Errorf("worker %d: unlock of a held lock -> UNKNOWN_DB", w)
							failed.Store(true)
						}
					default:
						t.Errorf("worker %d: unlock -> %d (%s)", w, r.Result, r.Result)
						failed.Store(true)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	stopChecks()
	if t.Failed() {
		return
	}
	// Every hold expires within 800 ms (+ a tick); waits end within 60 ms.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := probe.state(0)
		if st.LockedCount == 0 && st.WaitCount == 0 && st.KeyCount == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every lock expired: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	ts.onLoop(t, func() { err = ts.st.locks.Check() })
	if err != nil {
		t.Fatal(err)
	}
}

package loop

import (
	"fmt"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Random PoolCounter clients lock, wait, release and disconnect (FIN or RST) at random; the
// store's invariants hold throughout, every reply is one the protocol allows at that
// point, and once everyone has gone nothing is held, waiting or left in the table.
func TestPoolHammerRandomClientsAndDisconnects(t *testing.T) {
	ts, addr := startPool(t, nil)
	probe := dialPool(t, addr) // publishes the loop for onLoop
	probe.expect("STATS hashtable_entries", "hashtable_entries: 0")
	const workers, ops = 10, 150
	keys := []string{"a", "b", "c"}
	var failed atomic.Bool
	stopChecks := ts.checkWhileRunning(t, "pool", ts.st.pools.Check, &failed)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 7))
			lc := dialPool(t, addr)
			entries := 0 // held or answered-and-held entries of this connection
			for i := 0; i < ops && !failed.Load(); i++ {
				switch p := rng.Intn(100); {
				case p < 6:
					if rng.Intn(2) == 0 {
						_ = lc.c.(*net.TCPConn).SetLinger(0)
					}
					_ = lc.c.Close()
					lc = dialPool(t, addr)
					entries = 0
				case p < 55:
					cmd := "ACQ4ME"
					if rng.Intn(2) == 0 {
						cmd = "ACQ4ANY"
					}
					// Timeouts of 0 or 1 s: a wait ends by hand-over, DONE or TIMEOUT.
					lc.send(fmt.Sprintf("%s %s %d %d %d\n", cmd, keys[rng.Intn(len(keys))], 1+rng.Intn(2), 2+rng.Intn(6), rng.Intn(2)))
					got, err := lc.tryLine(5 * time.Second)
					if err != nil {
						t.Errorf("worker %d: no reply to %s: %v", w, cmd, err)
						failed.Store(true)
						return
					}
					switch got {
					case "LOCKED":
						entries++
					case "DONE", "TIMEOUT", "QUEUE_FULL":
					case "LOCK_HELD":
						if entries < 4 {
							t.Errorf("worker %d: LOCK_HELD with %d entries", w, entries)
							failed.Store(true)
						}
					default:
						t.Errorf("worker %d: %s -> %q", w, cmd, got)
						failed.Store(true)
					}
				default:
					lc.send("RELEASE\n")
					got := lc.line()
					want := "NOT_LOCKED"
					if entries > 0 {
						want = "RELEASED"
						entries--
					}
					if got != want {
						t.Errorf("worker %d: RELEASE with %d entries -> %q", w, entries, got)
						failed.Store(true)
					}
				}
			}
			_ = lc.c.Close()
		}(w)
	}
	wg.Wait()
	stopChecks()
	if t.Failed() {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, p, w := probe.stat("hashtable_entries"), probe.stat("processing_workers"), probe.stat("waiting_workers")
		if h == 0 && p == 0 && w == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every client left: hashtable_entries %d, processing %d, waiting %d", h, p, w)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var err error
	ts.onLoop(t, func() { err = ts.st.pools.Check() })
	if err != nil {
		t.Fatal(err)
	}
	if a, r := probe.stat("total_acquired"), probe.stat("processed_count"); a != r {
		t.Fatalf("total_acquired %d but processed_count %d: a held lock was never accounted as ended", a, r)
	}
}

package loop

import (
	"math/rand"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

// Many clients acquire and release at random and disconnect at random (FIN or RST); at the
// end every counter's consumption equals what the live clients hold, and the store's own
// invariant holds throughout.
func TestHammerRandomClientsAndDisconnects(t *testing.T) {
	for _, proto := range []Proto{ProtoCounter, ProtoSemaphore} {
		t.Run(proto.String(), func(t *testing.T) { hammer(t, proto) })
	}
}

func hammer(t *testing.T, proto Proto) {
	ts := startServer(t, nil)
	addr := ts.counterAddr
	if proto == ProtoSemaphore {
		addr = ts.semaphoreAddr
	}
	const (
		workers = 12
		ops     = 600
		limit   = 8 // counter maximum / semaphore initial value
	)
	names := []string{"a", "b", "c", "d"}
	type final struct{ held map[string]uint32 }
	results := make([]final, workers)
	var wg sync.WaitGroup
	var failed atomic.Bool
	probe := dial(t, addr) // also publishes the event loop for onLoop
	expectStatus(t, probe.simple(counter.OpNoop), counter.StatusOK)
	check := ts.st.counters.Check
	if proto == ProtoSemaphore {
		check = ts.st.semaphores.Check
	}
	// A checker runs the store's invariant on the loop while the clients work.
	stopChecks := ts.checkWhileRunning(t, proto.String(), check, &failed)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			cl := dial(t, addr)
			held := map[string]uint32{}
			for i := 0; i < ops && !failed.Load(); i++ {
				name := names[rng.Intn(len(names))]
				switch p := rng.Intn(100); {
				case p < 5: // disconnect, by FIN or RST, and come back with nothing
					if rng.Intn(2) == 0 {
						_ = cl.c.(*net.TCPConn).SetLinger(0)
					}
					_ = cl.c.Close()
					cl = dial(t, addr)
					held = map[string]uint32{}
				case p < 50:
					r := uint32(rng.Intn(3) + 1)
					f := cl.acquire(name, r, limit)
					switch f.Status {
					case counter.StatusOK:
						held[name] += r
					case counter.StatusNotAvailable:
					default:
						t.Errorf("acquire: status %#x", f.Status)
						failed.Store(true)
					}
				case p < 90:
					r := uint32(rng.Intn(4))
					f := cl.release(name, r)
					mine, ok := held[name]
					switch {
					case ok && r <= mine:
						if f.Status != counter.StatusOK {
							t.Errorf("release %d of my %d: status %#x", r, mine, f.Status)
							failed.Store(true)
						}
						if held[name] -= r; held[name] == 0 {
							delete(held, name)
						}
					case f.Status != counter.StatusNotAcquired && f.Status != counter.StatusNotFound:
						t.Errorf("release %d of my %d (held=%v): status %#x", r, mine, ok, f.Status)
						failed.Store(true)
					}
				default:
					cl.get(name)
				}
			}
			results[w] = final{held: held}
		}(w)
	}
	wg.Wait()
	stopChecks()
	if t.Failed() {
		return
	}
	// The clients still connected hold exactly what the server says is taken. Closed
	// connections are released by the time curr_connections counts only live ones.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, m := probe.stats()
		if m["curr_connections"] == strconv.Itoa(workers+1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("curr_connections = %s, want %d", m["curr_connections"], workers+1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, name := range names {
		var sum uint32
		for _, r := range results {
			sum += r.held[name]
		}
		f := probe.get(name)
		var taken uint32
		switch {
		case f.Status == counter.StatusNotFound:
		case proto == ProtoCounter:
			taken = u32(f.Body)
		default:
			taken = limit - u32(f.Body)
		}
		if taken != sum {
			t.Errorf("%s: server says %d taken, live clients hold %d", name, taken, sum)
		}
	}
	ts.checkInvariants(t)
}

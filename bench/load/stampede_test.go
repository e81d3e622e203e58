package load

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The sink answers LOCKED to every ACQ4ME: clients on one key hold it together, which the
// stampede must count as over-grants.
func TestStampedeCountsOverGrants(t *testing.T) {
	_, addr := startSink(t, "pool")
	res, err := RunStampede(context.Background(), StampedeConfig{Addr: addr, Clients: 8, Keys: 1,
		Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Outcomes[StampedeOverGrants] == 0 || len(res.Errors) != 0 {
		t.Fatalf("against a sink granting everything: %d grants, %d over-grants, errors %v (%s)",
			res.Ops, res.Outcomes[StampedeOverGrants], res.Errors, res.FirstError)
	}
}

// poolServer is a small PoolCounter server that keeps the rules (ACQ4ME and RELEASE only,
// no timeouts): at most workers holders a key, maxqueue entries, FIFO hand-over.
func poolServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		held  int
		queue []chan struct{}
	}
	var mu sync.Mutex
	keys := map[string]*key{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	t.Cleanup(func() { l.Close(); close(stop); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				var mine *key
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					f := strings.Fields(line)
					switch f[0] {
					case "ACQ4ME":
						workers, _ := strconv.Atoi(f[2])
						maxqueue, _ := strconv.Atoi(f[3])
						mu.Lock()
						k := keys[f[1]]
						if k == nil {
							k = &key{}
							keys[f[1]] = k
						}
						if k.held+len(k.queue) >= maxqueue {
							mu.Unlock()
							c.Write([]byte("QUEUE_FULL\n"))
							continue
						}
						if k.held < workers {
							k.held++
							mu.Unlock()
						} else {
							ch := make(chan struct{})
							k.queue = append(k.queue, ch)
							mu.Unlock()
							select {
							case <-ch: // the releaser handed its slot over
							case <-stop:
								return
							}
						}
						mine = k
						c.Write([]byte("LOCKED\n"))
					case "RELEASE":
						mu.Lock()
						if len(mine.queue) > 0 {
							close(mine.queue[0])
							mine.queue = mine.queue[1:]
						} else {
							mine.held--
						}
						mu.Unlock()
						c.Write([]byte("RELEASED\n"))
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func TestStampedeAgainstAServerThatKeepsTheRules(t *testing.T) {
	addr := poolServer(t)
	res, err := RunStampede(context.Background(), StampedeConfig{Addr: addr, Clients: 40, Keys: 2, MaxQueue: 10,
		Hold: time.Millisecond, Pause: time.Millisecond, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(res.Errors) != 0:
		t.Fatalf("errors %v: %s", res.Errors, res.FirstError)
	case res.Ops == 0 || res.Outcomes[StampedeGrants] != res.Ops:
		t.Fatalf("%d grants, outcomes %v", res.Ops, res.Outcomes)
	case res.Outcomes[StampedeOverGrants] != 0:
		t.Fatalf("%d over-grants from a server that keeps 2 holders a key", res.Outcomes[StampedeOverGrants])
	case res.Outcomes[StampedeQueueFull] == 0:
		t.Fatalf("no QUEUE_FULL with 20 clients a key and maxqueue 10: %v", res.Outcomes)
	case res.Latency.Count != res.Ops || res.Workload != Stampede || res.Max != 2:
		t.Fatalf("latency of %d waits for %d grants; workload %q, max %d", res.Latency.Count, res.Ops, res.Workload, res.Max)
	}
	// 2 keys x 2 workers / 1 ms is the bound.
	if rate := float64(res.Ops) / res.Seconds; rate > 4000 {
		t.Fatalf("%.0f grants/s, over the bound of 4,000/s", rate)
	}
}

package e2e

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A leader under writes that never pause still compacts its raft log: it holds new writes
// back for a round until everything it changed is committed, snapshots, and goes on. Every
// acknowledged INCR is there afterwards, also on a follower restarted from its snapshot.
func TestClusterLeaderSnapshotsUnderLoad(t *testing.T) {
	c := newCluster(t, 3, "--snapshot-entries", "50")
	c.bound(90 * time.Second)
	lead := c.waitLeader(10*time.Second, nil)
	snapIndex := func(slot int) uint64 {
		f, err := c.info(slot)
		if err != nil {
			t.Fatalf("INFO cluster of slot %d: %v", slot, err)
		}
		n, _ := strconv.ParseUint(f["snapshot_index"], 10, 64)
		return n
	}

	// 16 connections to the leader, each with 64 INCRs in flight: it always has proposals
	// awaiting their commit and changes waiting behind them.
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	batch := []byte(strings.Repeat("*2\r\n$4\r\nINCR\r\n$4\r\nload\r\n", 64))
	for range 16 {
		nc, err := net.DialTimeout("tcp", c.net.clientAddr(lead), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r := &rconn{c: nc, br: bufio.NewReader(nc)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := nc.Write(batch); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				for range 64 {
					if got, err := r.read(); err != nil || !strings.HasPrefix(got, ":") {
						t.Errorf("INCR: %q %v", got, err)
						return
					}
					acked.Add(1)
				}
			}
		}()
	}
	start := snapIndex(lead)
	var now uint64
	ok := waitUntil(time.Now().Add(30*time.Second), 50*time.Millisecond, func() bool {
		now = snapIndex(lead)
		return now >= start+500
	})
	close(stop)
	wg.Wait()
	t.Logf("%d INCRs; the leader's snapshot index went from %d to %d", acked.Load(), start, now)
	if !ok {
		t.Fatalf("the leader took no snapshot past index %d under steady writes", now)
	}
	want := int64(acked.Load())
	if got := c.value(lead, "load", 10*time.Second); got != want {
		t.Fatalf("GET load = %d after %d acknowledged INCRs", got, want)
	}
	f := c.others(lead)[0]
	c.restart(f)
	c.waitServing(f, 15*time.Second)
	c.waitLocal(f, "load", want, 20*time.Second)
}

// A client of a follower that pipelines far more commands than the follower forwards at once
// (loop/cluster_fwd.go's maxForwarded) gets every answer, in order: the rest wait in its
// input and go as the leader answers.
func TestClusterFollowerPipelineBackpressure(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(60 * time.Second)
	f := c.others(c.waitLeader(10*time.Second, nil))[0]
	nc, err := net.DialTimeout("tcp", c.net.clientAddr(f), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 5000
	_ = nc.SetDeadline(time.Now().Add(40 * time.Second))
	go func() {
		_, _ = nc.Write([]byte(strings.Repeat("*2\r\n$4\r\nINCR\r\n$4\r\npipe\r\n", n)))
	}()
	br := bufio.NewReader(nc)
	for i := 1; i <= n; i++ {
		got, err := readReplyText(br)
		if err != nil || got != ":"+strconv.Itoa(i) {
			t.Fatalf("reply %d of %d: %q %v", i, n, got, err)
		}
	}
}

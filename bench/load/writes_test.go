package load

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// respServer answers every command array with answer(command name, its count so far) and
// counts the INCRs it saw and the keys they named.
type respServer struct {
	addr  string
	incrs atomic.Uint64
	keys  chan string
}

func newRESPServer(t *testing.T, answer func(cmd string, args []string) string) *respServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &respServer{addr: l.Addr().String(), keys: make(chan string, 1<<16)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				var dec resp.Decoder
				var buf []byte
				var args [][]byte
				for {
					tmp := make([]byte, 4096)
					n, err := r.Read(tmp)
					if n == 0 && err != nil {
						return
					}
					buf = append(buf, tmp[:n]...)
					var out []byte
					for {
						a, m, err := dec.Parse(buf, args[:0])
						if err != nil {
							return
						}
						if m == 0 {
							break
						}
						args = a
						strs := make([]string, len(a))
						for i, x := range a {
							strs[i] = string(x)
						}
						cmd := strings.ToUpper(strs[0])
						if cmd == "INCR" {
							s.incrs.Add(1)
							select {
							case s.keys <- strs[1]:
							default:
							}
						}
						out = append(out, answer(cmd, strs[1:])...)
						buf = buf[m:]
					}
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// INCRs go out in rounds of Pipeline on keys among Keys with the prefix, and every round
// ends with WAIT when replicas are asked for.
func TestWritesSendsRounds(t *testing.T) {
	var waits atomic.Uint64
	s := newRESPServer(t, func(cmd string, args []string) string {
		if cmd == "WAIT" {
			if len(args) != 2 || args[0] != "2" || args[1] != "7" {
				return "-ERR bad WAIT arguments\r\n"
			}
			waits.Add(1)
			return ":2\r\n"
		}
		return ":1\r\n"
	})
	res, err := RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 3, Pipeline: 5, Keys: 4,
		Prefix: "k:", Duration: 300 * time.Millisecond, WaitReplicas: 2, WaitTimeout: 7 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds == 0 || res.Writes != 5*res.Rounds || len(res.Errors) != 0 || res.Wait != "WAIT 2 7" {
		t.Fatalf("result %+v", res)
	}
	// Rounds still in flight when the run ended reach the server after RunWrites returns:
	// let it finish them before counting.
	settled := func() bool { got := s.incrs.Load(); return got%5 == 0 && waits.Load() == got/5 }
	for deadline := time.Now().Add(2 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.incrs.Load(); got%5 != 0 || got < res.Writes || waits.Load() != got/5 {
		t.Errorf("server saw %d INCRs and %d WAITs; result %+v", got, waits.Load(), res)
	}
	seen := map[string]bool{}
	for len(s.keys) > 0 {
		seen[<-s.keys] = true
	}
	for k := range seen {
		if k != "k:0" && k != "k:1" && k != "k:2" && k != "k:3" {
			t.Errorf("INCR on key %q, want k:0 .. k:3", k)
		}
	}
	if len(seen) != 4 {
		t.Errorf("keys used: %v, want all 4", seen)
	}
}

// Error replies are not writes and are counted by their first word; a WAIT that falls
// short makes its round's INCRs no writes.
func TestWritesCountsErrors(t *testing.T) {
	var n atomic.Uint64
	s := newRESPServer(t, func(cmd string, args []string) string {
		if cmd == "WAIT" {
			return ":0\r\n"
		}
		if n.Add(1)%2 == 0 {
			return "-CLUSTERDOWN no quorum\r\n"
		}
		return ":1\r\n"
	})
	res, err := RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 1, Pipeline: 4,
		Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds == 0 || res.Writes != 2*res.Rounds || res.Errors["CLUSTERDOWN"] < 2*res.Rounds ||
		!strings.Contains(res.FirstError, "-CLUSTERDOWN no quorum") {
		t.Errorf("result %+v", res)
	}
	res, err = RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 1, Pipeline: 4,
		Duration: 200 * time.Millisecond, WaitReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds == 0 || res.Writes != 0 || res.Errors["wait_short"] < res.Rounds {
		t.Errorf("result with a short WAIT %+v", res)
	}
}

// CONSISTENCY goes first on each connection; a refusal fails the run before any load.
func TestWritesConsistency(t *testing.T) {
	var levels atomic.Uint64
	s := newRESPServer(t, func(cmd string, args []string) string {
		if cmd == "CONSISTENCY" {
			if len(args) == 1 && args[0] == "ONE" {
				levels.Add(1)
				return "+OK\r\n"
			}
			return "-ERR unknown level\r\n"
		}
		return ":1\r\n"
	})
	res, err := RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 2, Pipeline: 2,
		Duration: 100 * time.Millisecond, Consistency: "ONE"})
	if err != nil || res.Writes == 0 || levels.Load() != 2 || res.Consistency != "ONE" {
		t.Fatalf("err %v, %d CONSISTENCY ONE, result %+v", err, levels.Load(), res)
	}
	_, err = RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 2, Pipeline: 2,
		Duration: 100 * time.Millisecond, Consistency: "TWO"})
	if err == nil || !strings.Contains(err.Error(), "unknown level") {
		t.Fatalf("CONSISTENCY TWO: err %v", err)
	}
}

// A server that goes away ends the window early with the connections counted as lost.
func TestWritesLostConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				c.Read(make([]byte, 1024))
				c.Close()
			}()
		}
	}()
	t0 := time.Now()
	res, err := RunWrites(context.Background(), WritesConfig{Addr: l.Addr().String(), Conns: 2, Pipeline: 2,
		Duration: 10 * time.Second, Warmup: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.ConnsLost != 2 || res.Errors["io"] != 2 || res.Writes != 0 || time.Since(t0) > 5*time.Second {
		t.Errorf("after %s: result %+v", time.Since(t0), res)
	}
}

// With Locks a round is Pipeline LOCK+UNLOCK pairs, each on a key of its own connection
// and with the same LockId in both; a pair is a write.
func TestWritesLockPairs(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]string{} // key: LockId
	var bad []string
	s := newRESPServer(t, func(cmd string, args []string) string {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case cmd == "LOCK" && len(args) == 7 && args[1] == "TIMEOUT" && args[2] == "0" && args[3] == "EXPRIED" &&
			args[4] == "30" && args[5] == "LOCK_ID" && len(args[6]) == 32:
			if id, ok := ids[args[0]]; ok && id != args[6] {
				bad = append(bad, "key "+args[0]+" locked with two LockIds")
			}
			ids[args[0]] = args[6]
			return string(rediscmd.AppendTextLockReply(nil, &slock.LockReply{Lcount: 1, Lrcount: 1}))
		case cmd == "UNLOCK" && len(args) == 3 && args[1] == "LOCK_ID":
			if ids[args[0]] != args[2] {
				bad = append(bad, "UNLOCK "+args[0]+" with LockId "+args[2]+", not its LOCK's")
			}
			return string(rediscmd.AppendTextLockReply(nil, &slock.LockReply{}))
		}
		bad = append(bad, cmd+" "+strings.Join(args, " "))
		return "-ERR unexpected\r\n"
	})
	res, err := RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 3, Pipeline: 4, Prefix: "k:",
		Duration: time.Second, Locks: true}) // long enough for rounds on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	if !res.LockPairs || res.Rounds == 0 || res.Writes != 4*res.Rounds || len(res.Errors) != 0 {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("the server saw %q", bad)
	}
	if len(ids) != 12 {
		t.Errorf("keys locked: %v, want 3 connections x 4", ids)
	}
	for k := range ids {
		if !strings.HasPrefix(k, "k:") {
			t.Errorf("key %q lacks the prefix", k)
		}
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if !strings.Contains(out.String(), "rounds of 4 x LOCK+UNLOCK") || !strings.Contains(out.String(), "pairs/s") {
		t.Errorf("summary:\n%s", out.String())
	}
}

// A LOCK refused (TIMEOUT) or answered with an error makes no write, and is counted by
// the result's name or the error's first word; a reply that is no lock reply breaks the
// connection's run.
func TestWritesLockPairsErrors(t *testing.T) {
	var n atomic.Uint64
	s := newRESPServer(t, func(cmd string, args []string) string {
		if cmd == "UNLOCK" {
			return string(rediscmd.AppendTextLockReply(nil, &slock.LockReply{}))
		}
		switch n.Add(1) % 4 {
		case 1:
			return string(rediscmd.AppendTextLockReply(nil, &slock.LockReply{Result: slock.ResultTimeout}))
		case 2:
			return "-CLUSTERDOWN no quorum\r\n"
		}
		return string(rediscmd.AppendTextLockReply(nil, &slock.LockReply{Lcount: 1}))
	})
	res, err := RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 1, Pipeline: 4,
		Duration: 200 * time.Millisecond, Locks: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds == 0 || res.Writes != 2*res.Rounds || res.Errors["TIMEOUT"] < res.Rounds || res.Errors["CLUSTERDOWN"] < res.Rounds {
		t.Errorf("result %+v", res)
	}
	s = newRESPServer(t, func(string, []string) string { return ":1\r\n" })
	res, err = RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 1, Pipeline: 2,
		Duration: 10 * time.Second, Locks: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes != 0 || res.Errors["protocol"] != 1 || !strings.Contains(res.FirstError, "no LOCK/UNLOCK reply") {
		t.Errorf("integer replies to LOCK: %+v", res)
	}
}

// With AwaitGrant a round's UNLOCKs go once its LOCKs are answered: one connection's
// server sees Pipeline LOCKs, then the Pipeline UNLOCKs of the same keys, round after
// round, and a pair is a write.
func TestWritesLockPairsAwaitGrant(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s := newRESPServer(t, func(cmd string, args []string) string {
		mu.Lock()
		seen = append(seen, cmd+" "+args[0])
		mu.Unlock()
		if cmd == "WAIT" {
			return ":1\r\n"
		}
		return string(rediscmd.AppendTextLockReply(nil, &slock.LockReply{}))
	})
	res, err := RunWrites(context.Background(), WritesConfig{Addr: s.addr, Conns: 1, Pipeline: 3, Prefix: "k:",
		Duration: 200 * time.Millisecond, Locks: true, AwaitGrant: true, WaitReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.AwaitGrant || res.Rounds == 0 || res.Writes != 3*res.Rounds || len(res.Errors) != 0 {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	round := "LOCK k:0:0,LOCK k:0:1,LOCK k:0:2,UNLOCK k:0:0,UNLOCK k:0:1,UNLOCK k:0:2,WAIT 1"
	for i := 0; i+7 <= len(seen); i += 7 {
		if got := strings.Join(seen[i:i+7], ","); got != round {
			t.Fatalf("round at command %d: %s\nwant %s", i, got, round)
		}
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if !strings.Contains(out.String(), "rounds of 3 x LOCK, then 3 x UNLOCK + WAIT 1 0") {
		t.Errorf("summary:\n%s", out.String())
	}
}

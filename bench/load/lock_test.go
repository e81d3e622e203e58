package load

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/pool"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// Tests of the lock protocols' dialects: pool, slock and slock-text.

func TestPoolAppend(t *testing.T) {
	p := poolProto{}
	for _, c := range []struct {
		r    Req
		want string
	}{
		{Req{Kind: Acquire, Key: []byte("tb:c1"), Max: 1, Timeout: 100}, "ACQ4ME tb:c1 1 4294967295 1\n"},
		{Req{Kind: Acquire, Key: []byte("k"), Max: 3, Queue: 50, Timeout: 1000}, "ACQ4ME k 3 50 1\n"},
		{Req{Kind: Wait, Key: []byte("k"), Max: 1, Queue: 9, Timeout: 1001}, "ACQ4ME k 1 9 2\n"},
		{Req{Kind: Acquire, Key: []byte("k"), Max: 1}, "ACQ4ME k 1 4294967295 0\n"},
		{Req{Kind: Release, Key: []byte("k")}, "RELEASE\n"},
		{Req{Kind: Noop}, "STATS UPTIME\n"},
	} {
		if got := string(p.Append(nil, &c.r)); got != c.want {
			t.Errorf("%v timeout %dms: %q, want %q", c.r.Kind, c.r.Timeout, got, c.want)
		}
	}
	// What is sent is what the server's decoder reads.
	var req pool.Request
	var dec pool.Decoder
	line := p.Append(nil, &Req{Kind: Acquire, Key: []byte("a%20b"), Max: 7, Queue: 8, Timeout: 2500})
	if n, err := dec.Parse(line, &req); n != len(line) || err != nil || req.Cmd != pool.CmdAcq4Me ||
		string(req.Key) != "a%20b" || req.Workers != 7 || req.MaxQueue != 8 || req.Timeout != 3 {
		t.Errorf("decoded %q as %+v (n %d, %v)", line, req, n, err)
	}
}

func TestPoolRepliesAtEverySplit(t *testing.T) {
	sent := []Req{{Kind: Acquire}, {Kind: Release}, {Kind: Acquire}, {Kind: Wait}, {Kind: Release},
		{Kind: Acquire}, {Kind: Noop}, {Kind: Acquire}, {Kind: Acquire}, {Kind: Noop}, {Kind: Acquire}}
	stream := "LOCKED\nRELEASED\nQUEUE_FULL\nTIMEOUT\nNOT_LOCKED\nERROR BAD_SYNTAX\n" +
		"uptime: 0 days, 0h 0m 12s\nERROR WAIT_FOR_RESPONSE\nLOCK_HELD\nERROR WRONG_STAT\nLOCKED\r\n"
	want := []Outcome{OK, OK, Busy, TimedOut, NotHeld, Invalid, OK, Failed, Failed, Invalid, OK}
	for step := 1; step <= len(stream); step++ {
		got := parseAll(t, poolProto{}, []byte(stream), sent, step)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d replies, want %d", step, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d: reply %d (%v) is %v, want %v", step, i, sent[i].Kind, got[i], want[i])
			}
		}
	}
}

func TestPoolRejectsMismatchedReplies(t *testing.T) {
	for _, c := range []struct {
		line string
		kind Kind
		want string
	}{
		{"RELEASED\n", Acquire, `"RELEASED" to acquire`},
		{"LOCKED\n", Release, `"LOCKED" to release`},
		{"DONE\n", Acquire, `"DONE" to acquire`},
		{"LOCKED\n", Noop, "to STATS UPTIME"},
		{"HELLO\n", Acquire, "not a PoolCounter reply"},
		{strings.Repeat("x", 2000), Acquire, "longer than 1024"},
	} {
		_, _, err := poolProto{}.Parse([]byte(c.line), &Req{Kind: c.kind})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.10q to %v: %v, want an error saying %s", c.line, c.kind, err, c.want)
		}
	}
	if n, _, err := (poolProto{}).Parse([]byte(strings.Repeat("x", 1000)), &Req{Kind: Acquire}); n != 0 || err != nil {
		t.Errorf("a partial line of 1000 bytes: n %d, %v; want to wait for more", n, err)
	}
}

// inFlight is an InFlight made by hand.
type inFlight struct {
	reqs     []Req
	answered []bool
}

func newInFlight(reqs ...Req) *inFlight { return &inFlight{reqs, make([]bool, len(reqs))} }

func (f *inFlight) Len() int              { return len(f.reqs) }
func (f *inFlight) At(i int) (*Req, bool) { return &f.reqs[i], f.answered[i] }
func (f *inFlight) answer(i int)          { f.answered[i] = true }

func TestPoolMatchesTheProbeBeforeAWaitingAcquire(t *testing.T) {
	in := newInFlight(Req{Kind: Acquire, Opaque: 1}, Req{Kind: Noop, Opaque: 2})
	// The acquire waits: the server answers STATS first.
	i, n, o, err := poolProto{}.Match([]byte("uptime: 0 days, 0h 0m 3s\nLOCKED\n"), in)
	if i != 1 || n != 25 || o != OK || err != nil {
		t.Fatalf("probe reply matched to %d (n %d, %v, %v), want 1", i, n, o, err)
	}
	in.answer(1)
	i, n, o, err = poolProto{}.Match([]byte("LOCKED\n"), in)
	if i != 0 || n != 7 || o != OK || err != nil {
		t.Fatalf("late LOCKED matched to %d (n %d, %v, %v), want 0", i, n, o, err)
	}
	// In order, each reply answers the oldest of its sort.
	in = newInFlight(Req{Kind: Acquire}, Req{Kind: Release}, Req{Kind: Acquire}, Req{Kind: Release})
	for k, line := range []string{"LOCKED\n", "RELEASED\n", "TIMEOUT\n", "NOT_LOCKED\n"} {
		i, _, _, err := poolProto{}.Match([]byte(line), in)
		if i != k || err != nil {
			t.Fatalf("reply %d %q matched to %d, %v", k, line, i, err)
		}
		in.answer(i)
	}
	if _, _, _, err := (poolProto{}).Match([]byte("uptime: 0 days, 0h 0m 3s\n"), in); err == nil {
		t.Error("a STATS reply with no STATS in flight was matched")
	}
}

func TestSlockTimes(t *testing.T) {
	for _, c := range []struct {
		ms      uint32
		v, flag uint16
	}{
		{0, 0, 0}, {100, 100, slockMillis}, {1000, 1, 0}, {1500, 1500, slockMillis}, {65535, 65535, slockMillis},
		{65536, 66, 0}, {70_000, 70, 0}, {65535 * 1000, 65535, 0}, {4_000_000_000, 65535, 0},
	} {
		if v, flag := slockTime(c.ms); v != c.v || flag != c.flag {
			t.Errorf("slockTime(%d) = %d, %#x; want %d, %#x", c.ms, v, flag, c.v, c.flag)
		}
	}
	if v, flag := slockExpiry(0); v != 10 || flag != 0 {
		t.Errorf("default expiry %d, %#x; want 10 s", v, flag)
	}
	if v, flag := slockExpiry(HoldWhileConnected); v != keepLiveSecs || flag != slockKeepLive {
		t.Errorf("expiry while connected %d, %#x; want %d with KEEPLIVED", v, flag, keepLiveSecs)
	}
	for max, want := range map[uint32]uint16{0: 0, 1: 0, 2: 1, 65536: 0xffff, 1 << 31: 0xffff} {
		if got := slockCount(max); got != want {
			t.Errorf("slockCount(%d) = %d, want %d", max, got, want)
		}
	}
}

func TestSlockAppendIsWhatTheServerReads(t *testing.T) {
	p := newSlockBinary()
	var dec slock.Decoder
	var lock, unlock slock.Frame
	b := p.Append(nil, &Req{Kind: Acquire, Key: []byte("tb:k1"), Max: 3, Timeout: 250, Expiry: 2000, Op: 7, Opaque: 11})
	if n, err := dec.Parse(b, &lock); n != 64 || err != nil {
		t.Fatalf("lock frame: n %d, %v", n, err)
	}
	b = p.Append(nil, &Req{Kind: Release, Key: []byte("tb:k1"), Op: 7, Opaque: 12})
	if n, err := dec.Parse(b, &unlock); n != 64 || err != nil {
		t.Fatalf("unlock frame: n %d, %v", n, err)
	}
	if lock.Type != slock.TypeLock || lock.Key != slock.TextID([]byte("tb:k1")) || lock.Count != 2 || lock.Rcount != 0 ||
		lock.Timeout != 250 || lock.TimeoutFlag != slockMillis || lock.Expried != 2 || lock.ExpriedFlag != 0 {
		t.Errorf("lock frame %+v", lock)
	}
	if unlock.Type != slock.TypeUnlock || unlock.LockID != lock.LockID || unlock.Key != lock.Key || unlock.RequestID == lock.RequestID {
		t.Errorf("unlock frame %+v\nfor lock %+v", unlock, lock)
	}
	other := newSlockBinary().Append(nil, &Req{Kind: Acquire, Key: []byte("tb:k1"), Max: 1, Op: 7, Opaque: 11})
	if bytes.Equal(other[21:37], lock.LockID[:]) {
		t.Error("two connections made the same LockId for their op 7")
	}
	if b := p.Append(nil, &Req{Kind: Noop, Opaque: 3}); len(b) != 64 || b[2] != byte(slock.TypePing) {
		t.Errorf("no-op encoded as % x", b)
	}
}

// slockReply is the server's reply to req sent by p with the given result.
func slockReply(p *slockBinary, r Req, res slock.Result) []byte {
	if r.Kind == Noop {
		return slock.AppendSimple(nil, slock.TypePing, p.ids.id(r.Opaque, 'R'), res)
	}
	t := slock.TypeLock
	if r.Kind == Release {
		t = slock.TypeUnlock
	}
	return slock.AppendLockReply(nil, &slock.LockReply{Type: t, RequestID: p.ids.id(r.Opaque, 'R'), Result: res,
		LockID: p.ids.id(r.Op, 'L'), Key: slock.TextID(r.Key)})
}

func TestSlockRepliesAtEverySplit(t *testing.T) {
	p := newSlockBinary()
	sent := []Req{{Kind: Acquire, Key: []byte("a"), Op: 1, Opaque: 1}, {Kind: Release, Key: []byte("a"), Op: 1, Opaque: 2},
		{Kind: Noop, Opaque: 3}, {Kind: Wait, Key: []byte("b"), Op: 2, Opaque: 4}, {Kind: Release, Key: []byte("c"), Op: 3, Opaque: 5},
		{Kind: Acquire, Key: []byte("d"), Op: 4, Opaque: 6}}
	results := []slock.Result{slock.ResultOK, slock.ResultOK, slock.ResultOK, slock.ResultTimeout, slock.ResultUnlockError,
		slock.ResultLockedError}
	want := []Outcome{OK, OK, OK, TimedOut, NotHeld, Busy}
	var stream []byte
	for i, r := range sent {
		stream = append(stream, slockReply(p, r, results[i])...)
	}
	// A value record after a reply frame is part of it.
	rec := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("v"))
	withData := slock.AppendLockReply(nil, &slock.LockReply{Type: slock.TypeLock, RequestID: p.ids.id(7, 'R'),
		LockID: p.ids.id(5, 'L'), Value: rec})
	stream = append(stream, withData...)
	sent = append(sent, Req{Kind: Acquire, Op: 5, Opaque: 7})
	want = append(want, OK)
	for step := 1; step <= len(stream); step += 3 {
		got := parseAll(t, p, stream, sent, step)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d replies, want %d", step, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d: reply %d is %v, want %v", step, i, got[i], want[i])
			}
		}
	}
}

func TestSlockRejectsMismatchedReplies(t *testing.T) {
	p := newSlockBinary()
	acq := Req{Kind: Acquire, Key: []byte("k"), Op: 4, Opaque: 9}
	for name, c := range map[string]struct {
		reply []byte
		want  string
	}{
		"order":  {slockReply(p, Req{Kind: Acquire, Op: 4, Opaque: 8}, 0), "out of order"},
		"type":   {slockReply(p, Req{Kind: Release, Op: 4, Opaque: 9}, 0), "type UNLOCK"},
		"lockid": {slockReply(p, Req{Kind: Acquire, Op: 5, Opaque: 9}, 0), "LockId"},
		"magic":  {append([]byte{0x57}, slockReply(p, acq, 0)[1:]...), "magic"},
	} {
		_, _, err := p.Parse(c.reply, &acq)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestSlockMatchesRepliesByRequestID(t *testing.T) {
	p := newSlockBinary()
	in := newInFlight(Req{Kind: Acquire, Op: 1, Opaque: 5}, Req{Kind: Noop, Op: 1, Opaque: 6},
		Req{Kind: Acquire, Op: 2, Opaque: 7}, Req{Kind: Noop, Op: 2, Opaque: 8})
	for _, want := range []int{3, 1, 2, 0} {
		i, n, o, err := p.Match(slockReply(p, in.reqs[want], slock.ResultOK), in)
		if i != want || n != 64 || o != OK || err != nil {
			t.Fatalf("reply to request %d matched to %d (n %d, %v, %v)", want, i, n, o, err)
		}
		in.answer(i)
	}
	// Answered already: only a pushed EXPRIED may name it again.
	if i, n, o, err := p.Match(slockReply(p, in.reqs[0], slock.ResultExpried), in); i != -1 || n != 64 || o != Expired || err != nil {
		t.Errorf("pushed EXPRIED: %d, %d, %v, %v; want -1 and Expired", i, n, o, err)
	}
	if _, _, _, err := p.Match(slockReply(p, in.reqs[0], slock.ResultOK), in); err == nil {
		t.Error("a second reply to an answered request was matched")
	}
	if _, _, _, err := p.Match(slockReply(newSlockBinary(), in.reqs[0], slock.ResultOK), in); err == nil ||
		!strings.Contains(err.Error(), "never sent") {
		t.Errorf("a reply with another connection's RequestId: %v", err)
	}
}

// TestSlockOutOfOrderOnAWorker feeds a worker on shared keys its replies in an order the
// server may send them: each Lock waits, so the pings behind the locks come back first.
func TestSlockOutOfOrderOnAWorker(t *testing.T) {
	w := testWorker(t, Config{Proto: "slock", Conns: 1, Pipeline: 4, Keys: 8})
	if !w.rn.grant || !w.rn.probe || w.rn.perOp != 3 {
		t.Fatalf("slock on shared keys: grant %v probe %v perOp %d; want the release once granted, a probe", w.rn.grant, w.rn.probe, w.rn.perOp)
	}
	p := w.proto.(*slockBinary)
	w.fillClosed(0)
	if w.inflight != 4 || w.size != 8 {
		t.Fatalf("%d ops, %d requests in flight; want 4 locks, each with its ping", w.inflight, w.size)
	}
	sent := make([]Req, w.size)
	for i := range sent {
		sent[i] = w.ring[(w.head+i)&w.mask].req
	}
	w.wbuf = w.wbuf[:0]
	feed := func(now int64, rs ...[]byte) {
		t.Helper()
		for _, r := range rs {
			w.w += copy(w.rbuf[w.w:], r)
		}
		if err := w.consume(now); err != nil {
			t.Fatal(err)
		}
	}
	// All four pings first: all four locks wait. Then the last lock is granted, the
	// second times out.
	feed(ms, slockReply(p, sent[7], 0), slockReply(p, sent[5], 0), slockReply(p, sent[3], 0), slockReply(p, sent[1], 0))
	feed(2*ms, slockReply(p, sent[6], slock.ResultOK), slockReply(p, sent[2], slock.ResultTimeout))
	if w.t.waited != 4 {
		t.Errorf("waited %d, want 4", w.t.waited)
	}
	if w.t.ops != 1 || w.inflight != 3 {
		t.Errorf("after a timeout and a grant: %d ops done, %d in flight; want 1 (the timeout), 3", w.t.ops, w.inflight)
	}
	// The granted lock's unlock went out, with its LockId and key.
	var f slock.Frame
	var dec slock.Decoder
	if n, err := dec.Parse(w.wbuf, &f); n != len(w.wbuf) || err != nil || f.Type != slock.TypeUnlock ||
		f.LockID != p.ids.id(sent[6].Op, 'L') || f.Key != slock.TextID(sent[6].Key) {
		t.Fatalf("after the grant, sent % x (%+v, %v); want the unlock of op %d", w.wbuf, f, err, sent[6].Op)
	}
	unlock := w.ring[(w.head+w.size-1)&w.mask].req
	w.wbuf = w.wbuf[:0]
	// The ring holds the oldest unanswered lock at its head.
	if w.ring[w.head].req.Opaque != sent[0].Opaque || w.size != 9 {
		t.Errorf("ring head is request %d with %d slots; want %d with 9", w.ring[w.head].req.Opaque, w.size, sent[0].Opaque)
	}
	feed(3*ms, slockReply(p, unlock, 0), slockReply(p, sent[0], slock.ResultTimeout), slockReply(p, sent[4], slock.ResultTimeout))
	if w.t.ops != 4 || w.inflight != 0 || w.size != 0 || len(w.wbuf) != 0 {
		t.Errorf("at the end: %d ops, %d in flight, %d slots, %d bytes to send; want 4, 0, 0, 0", w.t.ops, w.inflight, w.size, len(w.wbuf))
	}
	if w.t.outcomes[TimedOut] != 3 || w.t.outcomes[OK] != 6 || w.t.reqs != 9 {
		t.Errorf("outcomes %v over %d replies", w.t.outcomes, w.t.reqs)
	}
	// Latency runs from the op's start to its last reply: the granted op's unlock at 3ms.
	w.rn.rec.flush(&w.t)
	if s := Summarize(w.rn.rec.total); s.Count != 4 || !near(s.Max, 3000, 0.002) {
		t.Errorf("latency %+v, want 4 ops, the longest 3ms", s)
	}
}

// TestPoolProbeOnAWorker: a PoolCounter acquire on a shared key with its probe, answered
// in both orders; a refused acquire ends its op with the probe's reply.
func TestPoolProbeOnAWorker(t *testing.T) {
	w := testWorker(t, Config{Proto: "pool", Conns: 1, Pipeline: 1, Keys: 2})
	step := func(now int64, want string, reply string) {
		t.Helper()
		if string(w.wbuf) != want {
			t.Fatalf("sent %q, want %q", w.wbuf, want)
		}
		w.wbuf = w.wbuf[:0]
		w.w += copy(w.rbuf[w.w:], reply)
		if err := w.consume(now); err != nil {
			t.Fatal(err)
		}
	}
	w.fillClosed(0)
	key := string(w.ring[w.head].req.Key)
	acq := "ACQ4ME " + key + " 1 4294967295 1\nSTATS UPTIME\n"
	step(ms, acq, "LOCKED\nuptime: 0 days, 0h 0m 1s\n") // granted at once
	step(2*ms, "RELEASE\n", "RELEASED\n")
	if w.t.ops != 1 || w.t.waited != 0 || w.inflight != 0 {
		t.Fatalf("granted at once: %d ops, %d waited, %d in flight", w.t.ops, w.t.waited, w.inflight)
	}
	w.fillClosed(3 * ms)
	key = string(w.ring[w.head].req.Key)
	acq = "ACQ4ME " + key + " 1 4294967295 1\nSTATS UPTIME\n"
	step(4*ms, acq, "uptime: 0 days, 0h 0m 1s\n") // it waits
	if w.t.waited != 1 || len(w.wbuf) != 0 {
		t.Fatalf("waiting: %d waited, sent %q", w.t.waited, w.wbuf)
	}
	step(5*ms, "", "LOCKED\n")
	step(6*ms, "RELEASE\n", "RELEASED\n")
	w.fillClosed(7 * ms)
	step(8*ms, "ACQ4ME "+string(w.ring[w.head].req.Key)+" 1 4294967295 1\nSTATS UPTIME\n", "QUEUE_FULL\n")
	if w.t.ops != 2 || w.inflight != 1 {
		t.Fatalf("refused, probe unanswered: %d ops, %d in flight; want 2, 1", w.t.ops, w.inflight)
	}
	step(9*ms, "", "uptime: 0 days, 0h 0m 1s\n")
	if w.t.ops != 3 || w.inflight != 0 || w.size != 0 || w.t.outcomes[Busy] != 1 {
		t.Errorf("after the probe: %d ops, %d in flight, %d slots, outcomes %v", w.t.ops, w.inflight, w.size, w.t.outcomes)
	}
}

func TestSlockTextAppend(t *testing.T) {
	p := newSlockText()
	id := string(slock.AppendHexID(nil, p.ids.id(5, 'L')))
	for _, c := range []struct {
		r    Req
		want []string
	}{
		{Req{Kind: Acquire, Key: []byte("tb:c1"), Max: 1, Timeout: 100, Op: 5},
			[]string{"LOCK", "tb:c1", "LOCK_ID", id, "TIMEOUT", "67108964", "EXPRIED", "10"}},
		{Req{Kind: Wait, Key: []byte("k"), Max: 4, Timeout: 2000, Expiry: 1500, Op: 5},
			[]string{"LOCK", "k", "LOCK_ID", id, "TIMEOUT", "2", "EXPRIED", "67110364", "COUNT", "4"}},
		{Req{Kind: Acquire, Key: []byte("k"), Max: 1, Expiry: HoldWhileConnected, Op: 5},
			[]string{"LOCK", "k", "LOCK_ID", id, "TIMEOUT", "0", "EXPRIED", "2147483653"}},
		{Req{Kind: Release, Key: []byte("k"), Op: 5}, []string{"UNLOCK", "k", "LOCK_ID", id}},
		{Req{Kind: Noop}, []string{"PING"}},
	} {
		if got, want := string(p.Append(nil, &c.r)), string(resp.AppendCommand(nil, c.want...)); got != want {
			t.Errorf("%v: %q, want %q", c.r.Kind, got, want)
		}
	}
	// The server's parser reads the LOCK as the same frame the binary dialect sends.
	var dec resp.Decoder
	args, _, err := dec.Parse(p.Append(nil, &Req{Kind: Acquire, Key: []byte("tb:k3"), Max: 2, Timeout: 300, Op: 9}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var f slock.Frame
	if _, _, err := rediscmd.ParseTextLock(args, &rediscmd.Text{Timeout: 15}, func() [16]byte { return [16]byte{1} }, &f, nil); err != nil {
		t.Fatal(err)
	}
	if f.LockID != p.ids.id(9, 'L') || f.Key != slock.TextID([]byte("tb:k3")) || f.Count != 1 || f.Timeout != 300 ||
		f.TimeoutFlag != slockMillis || f.Expried != 10 {
		t.Errorf("the server reads the LOCK as %+v", f)
	}
}

// slockTextReply is the server's text reply to r sent by p.
func slockTextReply(p *slockText, r Req, res slock.Result, value []byte) []byte {
	return rediscmd.AppendTextLockReply(nil, &slock.LockReply{Result: res, LockID: p.ids.id(r.Op, 'L'), Value: value})
}

func TestSlockTextRepliesAtEverySplit(t *testing.T) {
	p := newSlockText()
	sent := []Req{{Kind: Acquire, Op: 1}, {Kind: Release, Op: 1}, {Kind: Wait, Op: 2}, {Kind: Noop},
		{Kind: Release, Op: 3}, {Kind: Acquire, Op: 4}, {Kind: Acquire, Op: 5}}
	var stream []byte
	stream = append(stream, slockTextReply(p, sent[0], slock.ResultOK, nil)...)
	stream = append(stream, slockTextReply(p, sent[1], slock.ResultOK, nil)...)
	stream = append(stream, slockTextReply(p, sent[2], slock.ResultTimeout, nil)...)
	stream = append(stream, "+PONG\r\n"...)
	stream = append(stream, slockTextReply(p, sent[4], slock.ResultUnlockError, nil)...)
	stream = append(stream, "-ERR Command Parse Args Error\r\n"...)
	num := slock.AppendDataRecord(nil, slock.DataIncr, 0, slock.DataNumber, nil, binary.LittleEndian.AppendUint64(nil, 5))
	withData := slockTextReply(p, sent[6], slock.ResultOK, num)
	if !bytes.HasPrefix(withData, []byte("*14\r\n")) {
		t.Fatalf("a reply with a value is %q", withData)
	}
	stream = append(stream, withData...)
	want := []Outcome{OK, OK, TimedOut, OK, NotHeld, Failed, OK}
	for step := 1; step <= len(stream); step++ {
		got := parseAll(t, p, stream, sent, step)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d replies, want %d", step, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d: reply %d is %v, want %v", step, i, got[i], want[i])
			}
		}
	}
}

func TestSlockTextRejectsMismatchedReplies(t *testing.T) {
	p := newSlockText()
	acq := Req{Kind: Acquire, Op: 3}
	for name, c := range map[string]struct {
		reply string
		want  string
	}{
		"lockid": {string(slockTextReply(p, Req{Op: 4}, slock.ResultOK, nil)), "LOCK_ID"},
		"short":  {"*2\r\n$1\r\n0\r\n$2\r\nOK\r\n", "array of 2"},
		"int":    {":1\r\n", "reply \":1"},
		"pong":   {"+PONG\r\n", "reply \"+PONG"},
		"code":   {"*12\r\n$1\r\nx\r\n" + strings.Repeat("$1\r\ny\r\n", 11), "result code"},
		"elem":   {"*12\r\n:0\r\n" + strings.Repeat("$1\r\ny\r\n", 11), "element 0"},
	} {
		_, _, err := p.Parse([]byte(c.reply), &acq)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	if _, _, err := p.Parse(slockTextReply(p, Req{Op: 4}, slock.ResultOK, nil), &Req{Kind: Noop}); err == nil {
		t.Error("a LOCK reply to PING was accepted")
	}
}

// sinkRoundTrip has d's sink answer what d's client sends for reqs, fed to Answer a
// byte at a time, and returns the client's outcomes of the answers.
func sinkRoundTrip(t *testing.T, name string, reqs []Req) []Outcome {
	t.Helper()
	d, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	client, srv := d.New(), d.New().(Server)
	var in, out []byte
	for _, r := range reqs {
		in = client.Append(in, &r)
	}
	for len(in) > 0 {
		var n int
		for end := 1; end <= len(in) && n == 0; end++ {
			if out, n, err = srv.Answer(out, in[:end]); err != nil {
				t.Fatalf("%s sink: %v", name, err)
			}
		}
		if n == 0 {
			t.Fatalf("%s sink: no whole request in %q", name, in)
		}
		in = in[n:]
	}
	return parseAll(t, client, out, reqs, 7)
}

func TestSinksAnswerTheLockProtocols(t *testing.T) {
	reqs := []Req{{Kind: Acquire, Key: []byte("k"), Max: 1, Timeout: 100, Op: 1, Opaque: 1}, {Kind: Noop, Op: 1, Opaque: 2},
		{Kind: Release, Key: []byte("k"), Op: 1, Opaque: 3}, {Kind: Wait, Key: []byte("j"), Max: 2, Timeout: 1000, Op: 2, Opaque: 4}}
	for _, name := range []string{"pool", "slock", "slock-text"} {
		got := sinkRoundTrip(t, name, reqs)
		if len(got) != len(reqs) {
			t.Errorf("%s: %d answers to %d requests", name, len(got), len(reqs))
		}
		for i, o := range got {
			if o != OK {
				t.Errorf("%s: answer %d (%v) is %v", name, i, reqs[i].Kind, o)
			}
		}
	}
	d, _ := Lookup("pool")
	if out, n, err := d.New().(Server).Answer(nil, []byte("HELLO\n")); n != 6 || err != nil || string(out) != "ERROR BAD_COMMAND\n" {
		t.Errorf("pool sink answered a bad line %q, %d, %v", out, n, err)
	}
	d, _ = Lookup("slock")
	if _, n, err := d.New().(Server).Answer(nil, bytes.Repeat([]byte{1}, 64)); n != 0 || err == nil {
		t.Errorf("slock sink took a frame with a wrong magic: %d, %v", n, err)
	}
}

func TestLockConfigChecks(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Proto: "pool", Conns: 1, Pipeline: 2, Keys: 4}, "--pipeline 2 with shared keys"},
		{Config{Proto: "pool", Conns: 1, Pipeline: 4, Workload: Waits}, "WAIT_FOR_RESPONSE"},
		{Config{Proto: "slock-text", Conns: 1, Pipeline: 2, Keys: 1}, "blocks its connection"},
		{Config{Proto: "pool", Conns: 1, Rate: 100, Keys: 4}, "open loop"},
		{Config{Proto: "pool", Conns: 1, Workload: Hot}, "hot does not fit pool"},
		{Config{Proto: "slock", Conns: 1, Workload: Waits, Keys: 1000, Max: 100}, "at most 65,536"},
		{Config{Proto: "slock", Conns: 1, Expiry: -time.Second}, "--expiry"},
		{Config{Proto: "pool", Conns: 1, Workload: Mix}, "no get request"},
	} {
		c.cfg.Addr = "127.0.0.1:1"
		_, err := newRunner(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
	// Legal: pipelined pairs on own keys, pipelined slock binary waits.
	for _, cfg := range []Config{{Proto: "pool", Conns: 1, Pipeline: 16}, {Proto: "slock", Conns: 1, Pipeline: 16, Keys: 4},
		{Proto: "slock", Conns: 1, Pipeline: 16, Workload: Waits}} {
		cfg.Addr = "127.0.0.1:1"
		if _, err := newRunner(cfg); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestLockDefaults(t *testing.T) {
	for _, c := range []struct {
		cfg     Config
		max     uint32
		timeout time.Duration
		keys    int
	}{
		{Config{Proto: "pool"}, 1, time.Second, 0},
		{Config{Proto: "pool", Timeout: 1001 * time.Millisecond}, 1, 2 * time.Second, 0},
		{Config{Proto: "slock", Timeout: 1500 * time.Microsecond}, 1, 2 * time.Millisecond, 0},
		{Config{Proto: "slock", Workload: Waits, N: 1}, 1, 100 * time.Millisecond, 1},
		{Config{Proto: "counter"}, 1<<32 - 1, 100 * time.Millisecond, 0},
	} {
		cfg := c.cfg
		cfg.Defaults()
		if cfg.Max != c.max || cfg.Timeout != c.timeout || cfg.Keys != c.keys || cfg.Expiry != 10*time.Second {
			t.Errorf("%+v: max %d timeout %v keys %d expiry %v; want %d %v %d 10s", c.cfg, cfg.Max, cfg.Timeout, cfg.Keys, cfg.Expiry,
				c.max, c.timeout, c.keys)
		}
	}
}

func TestRunLockProtocolsAgainstSinks(t *testing.T) {
	for _, c := range []struct {
		cfg    Config
		perOp  uint64
		grants bool
	}{
		{Config{Proto: "pool", Conns: 4, Pipeline: 8}, 2, false},
		{Config{Proto: "pool", Conns: 4, Pipeline: 1, Keys: 4}, 3, true},
		{Config{Proto: "pool", Conns: 2, Pipeline: 1, AwaitGrant: true}, 2, true},
		{Config{Proto: "slock", Conns: 4, Pipeline: 8}, 2, false},
		{Config{Proto: "slock", Conns: 4, Pipeline: 8, Keys: 8}, 3, true},
		{Config{Proto: "slock-text", Conns: 4, Pipeline: 8}, 2, false},
		{Config{Proto: "slock-text", Conns: 4, Pipeline: 1, Keys: 2}, 2, true},
	} {
		sink, addr := startSink(t, c.cfg.Proto)
		cfg := c.cfg
		cfg.Addr, cfg.Requests, cfg.Sources, cfg.Seed = addr, 1000, 4, 3
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%+v: %v", c.cfg, err)
		}
		if res.Ops != 1000 || res.Requests != c.perOp*1000 || sink.Requests() != res.Requests || res.Grant != c.grants {
			t.Errorf("%+v: ops %d, requests %d, sink answered %d, grant %v; want 1,000 ops of %d requests",
				c.cfg, res.Ops, res.Requests, sink.Requests(), res.Grant, c.perOp)
		}
		if len(res.Errors) != 0 || res.Outcomes["ok"] != res.Requests || res.Waited != 0 {
			t.Errorf("%+v: outcomes %v, errors %v, waited %d", c.cfg, res.Outcomes, res.Errors, res.Waited)
		}
	}
}

func TestRunLockProtocolsWithChurn(t *testing.T) {
	for _, proto := range []string{"pool", "slock"} {
		_, addr := startSink(t, proto)
		res, err := Run(context.Background(), Config{Addr: addr, Proto: proto, Conns: 1, Churn: 100,
			Duration: 200 * time.Millisecond, Warmup: 20 * time.Millisecond, Sources: 4})
		if err != nil {
			t.Fatal(err)
		}
		if res.Churn == nil || res.Churn.Cycles == 0 || res.Churn.Failed != 0 || len(res.Errors) != 0 {
			t.Errorf("%s churn %+v, errors %v", proto, res.Churn, res.Errors)
		}
	}
}

// poolWaitServer is a PoolCounter server for the wait workload: an acquire with a
// timeout of 0 (the holder's) is LOCKED, any other is answered TIMEOUT after 20ms, and
// RELEASE is RELEASED. It counts the RELEASEs.
func poolWaitServer(t *testing.T) (addr string, releases *atomic.Int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	releases = new(atomic.Int64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var dec pool.Decoder
				var req pool.Request
				var in []byte
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					in = append(in, buf[:n]...)
					for {
						m, err := dec.Parse(in, &req)
						if err != nil || m == 0 {
							break
						}
						var out []byte
						switch {
						case req.Cmd == pool.CmdRelease:
							releases.Add(1)
							out = pool.AppendReply(nil, pool.Released)
						case req.Timeout == 0:
							out = pool.AppendReply(nil, pool.Locked)
						default:
							time.Sleep(20 * time.Millisecond)
							out = pool.AppendReply(nil, pool.Timeout)
						}
						in = in[m:]
						if _, err := c.Write(out); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return l.Addr().String(), releases
}

func TestRunPoolWaits(t *testing.T) {
	addr, releases := poolWaitServer(t)
	res, err := Run(context.Background(), Config{Addr: addr, Proto: "pool", Workload: Waits, Conns: 3,
		Duration: 300 * time.Millisecond, Warmup: 20 * time.Millisecond, Sources: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Each connection waits 20ms a time: about 15 waits each, every one timed out.
	if res.Ops < 15 || res.Ops > 50 || res.Outcomes["timed_out"] != res.Requests || res.Requests != res.Ops || len(res.Errors) != 0 {
		t.Errorf("ops %d, requests %d, outcomes %v, errors %v", res.Ops, res.Requests, res.Outcomes, res.Errors)
	}
	if res.Latency.P50 < 20_000 || res.Keys != 1 || res.Max != 1 || res.Timeout != 1000 {
		t.Errorf("p50 %vµs on %d keys, max %d, timeout %vms; want at least 20ms on 1 key of 1 holder, 1 s", res.Latency.P50,
			res.Keys, res.Max, res.Timeout)
	}
	// The holder gave its key back at the end.
	for i := 0; i < 100 && releases.Load() == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if n := releases.Load(); n != 1 {
		t.Errorf("%d RELEASEs at the end, want the holder's 1", n)
	}
}

func TestRunWaitsRefusesAKeyItCannotTake(t *testing.T) {
	// The sink says TIMEOUT to nothing, but a pool server that is not free says it to
	// the holder: the run must not start.
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
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					c.Write([]byte("TIMEOUT\n"))
				}
			}()
		}
	}()
	_, err = Run(context.Background(), Config{Addr: l.Addr().String(), Proto: "pool", Workload: Waits, Conns: 1, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "answered timed_out") {
		t.Errorf("run with a key held elsewhere: %v", err)
	}
}

// TestRingKeepsRoomBehindAWaitingAcquire: while the oldest acquire waits, the others
// keep cycling behind it until the ring is full of answered slots; it never overwrites
// the waiting one, and drains when that one is answered.
func TestRingKeepsRoomBehindAWaitingAcquire(t *testing.T) {
	w := testWorker(t, Config{Proto: "slock", Conns: 1, Pipeline: 4, Keys: 8})
	p := w.proto.(*slockBinary)
	w.fillClosed(0)
	stuck := w.ring[w.head].req
	for round := 0; round < 200; round++ {
		// Answer the older half of the others: the rest stay in flight over the fill.
		var replies []byte
		var open []Req
		for i := 0; i < w.size; i++ {
			s := w.ring[(w.head+i)&w.mask]
			if !s.answered && s.req.Opaque != stuck.Opaque {
				open = append(open, s.req)
			}
		}
		for _, r := range open[:(len(open)+1)/2] {
			replies = append(replies, slockReply(p, r, slock.ResultOK)...)
		}
		w.wbuf = w.wbuf[:0]
		w.w += copy(w.rbuf[w.w:], replies)
		if err := w.consume(int64(round)); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if w.ring[w.head].req.Opaque != stuck.Opaque || w.size+w.owed > len(w.ring) {
			t.Fatalf("round %d: head is request %d, %d slots + %d owed in a ring of %d", round,
				w.ring[w.head].req.Opaque, w.size, w.owed, len(w.ring))
		}
		w.fillClosed(int64(round))
	}
	if w.inflight != 1 || w.t.ops < 15 {
		t.Errorf("with the ring full behind the waiting acquire: %d ops in flight, %d done; want 1 and the ring's worth", w.inflight, w.t.ops)
	}
	w.w += copy(w.rbuf[w.w:], slockReply(p, stuck, slock.ResultTimeout))
	if err := w.consume(1000); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 20 && w.size > 0; round++ {
		for i := 0; i < w.size; i++ {
			if s := w.ring[(w.head+i)&w.mask]; !s.answered {
				w.w += copy(w.rbuf[w.w:], slockReply(p, s.req, slock.ResultOK))
			}
		}
		if err := w.consume(1000); err != nil {
			t.Fatal(err)
		}
	}
	if w.size != 0 || w.owed != 0 || w.inflight != 0 {
		t.Errorf("after the wait timed out: %d slots, %d owed, %d ops in flight; want none", w.size, w.owed, w.inflight)
	}
}

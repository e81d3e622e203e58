package e2e

// The sequential model the cluster's histories are checked against with porcupine: a set
// of integer counters, INCR k (answers the new value) and GET k (answers the value;
// missing = 0), and the history recorder the cluster tests' clients share.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	opIncr    = 'i'
	opGet     = 'g'
	opPending = 'p' // an INCR of unknown outcome was called here (see pendingForm)
)

// counterIn is one call: INCR or GET of a key.
type counterIn struct {
	op  byte
	key string
}

// counterOut is its answer. unknown: an INCR whose outcome is not known (an error, a
// dropped connection, a timeout); it may have happened, or may happen later.
type counterOut struct {
	value   int64
	unknown bool
}

// counterState is one counter: its value and the increments of unknown outcome called so
// far that have not taken effect (yet).
type counterState struct{ value, pending int64 }

// counterModel: partitioned by key, the state of a partition is one counter.
//
// An INCR of unknown outcome can be in the history as porcupine has it, an operation that
// never returns (Return = never), or in pendingForm; the model takes both.
var counterModel = porcupine.Model{
	Partition: partitionBy(func(in any) string { return in.(counterIn).key }),
	Init:      func() any { return counterState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(counterState), input.(counterIn), output.(counterOut)
		// took: how many pending increments must have taken effect for the answer.
		took := func(want int64) (bool, any) {
			d := out.value - want
			if d < 0 || d > st.pending {
				return false, st
			}
			return true, counterState{out.value, st.pending - d}
		}
		switch {
		case in.op == opPending:
			return true, counterState{st.value, st.pending + 1}
		case in.op == opIncr && out.unknown:
			return true, counterState{st.value + 1, st.pending}
		case in.op == opIncr:
			return took(st.value + 1)
		case in.op == opGet && !out.unknown:
			return took(st.value)
		}
		return false, st
	},
	Hash: func(state any) uint64 {
		st := state.(counterState)
		return uint64(st.value)*0x9e3779b97f4a7c15 ^ uint64(st.pending)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(counterIn), output.(counterOut)
		switch {
		case in.op == opPending:
			return fmt.Sprintf("INCR %s -> unknown (from here on it may take effect)", in.key)
		case out.unknown:
			return fmt.Sprintf("INCR %s -> unknown", in.key)
		case in.op == opIncr:
			return fmt.Sprintf("INCR %s -> %d", in.key, out.value)
		}
		return fmt.Sprintf("GET %s -> %d", in.key, out.value)
	},
	DescribeState: func(state any) string {
		st := state.(counterState)
		if st.pending == 0 {
			return fmt.Sprint(st.value)
		}
		return fmt.Sprintf("%d (+ up to %d unknown INCRs)", st.value, st.pending)
	},
}

// partitionBy is a Partition function: a history split by the key of each operation's
// input, the keys in order.
func partitionBy(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := key(op.Input)
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	}
}

// pendingForm rewrites every INCR of unknown outcome (never returning) as an instant
// opPending at its call: from then on, the model may let it take effect before any later
// operation, or never. Increments commute, so which of the pending INCRs took effect
// does not matter, only how many: the rewrite is equivalent (TestCounterModelForms checks
// it), and it spares porcupine the search over every subset of them, exponential in their
// number, that an operation never returning costs it.
func pendingForm(ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		if in := op.Input.(counterIn); in.op == opIncr && op.Return == never {
			op.Input, op.Return = counterIn{opPending, in.key}, op.Call
		}
		out[i] = op
	}
	return out
}

// never is the return time of an operation whose outcome is unknown: porcupine's way to
// say it never returned, so it may take effect at any point after its call, or not at all.
const never = math.MaxInt64

// history records the operations of concurrent clients, with call and return times on
// one monotonic clock.
type history struct {
	mu      sync.Mutex
	start   time.Time
	ops     []porcupine.Operation
	clients int
}

func newHistory() *history { return &history{start: time.Now()} }

// now is the time since the history began (monotonic).
func (h *history) now() int64 { return int64(time.Since(h.start)) }

// client is a new client ID. A client that lost track of an operation takes a new ID
// (as Jepsen does), so that every client's operations stay sequential.
func (h *history) client() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients++
	return h.clients - 1
}

// add records a completed operation.
func (h *history) add(client int, in counterIn, call, ret int64, out counterOut, meta string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret, Metadata: meta})
}

// addOp records an operation of any model.
func (h *history) addOp(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// snapshot is a copy of the operations so far.
func (h *history) snapshot() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// histClient runs INCR and GET through one node and records them. An INCR that got no
// clear answer is recorded as never returning, with an unknown output; a GET without an
// answer is not recorded (it changed nothing).
type histClient struct {
	h  *history
	k  *cclient
	id int
}

// do runs one operation with timeout and tells whether it was answered (acked INCR,
// value read); ackedIncr is true only for an INCR answered with its new value.
func (c *histClient) do(op byte, key string, timeout time.Duration) (reply string, answered bool, err error) {
	in := counterIn{op: op, key: key}
	args := []string{"GET", key}
	if op == opIncr {
		args = []string{"INCR", key}
	}
	call := c.h.now()
	reply, err = c.k.do(timeout, args...)
	ret := c.h.now()
	if err != nil && isNotSent(err) {
		return reply, false, err // never sent: no operation
	}
	v, ok := intReply(reply)
	if err == nil && ok {
		c.h.add(c.id, in, call, ret, counterOut{value: v}, "")
		return reply, true, nil
	}
	if op == opIncr {
		why := reply
		if err != nil {
			why = err.Error()
		}
		c.h.add(c.id, in, call, never, counterOut{unknown: true}, why)
		c.id = c.h.client()
	}
	return reply, false, err
}

func isNotSent(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), errNotSent.Error())
}

// checkLinearizable checks ops (in pendingForm) against the counter model within timeout. On a violation
// it writes porcupine's visualization to a file that outlives the test and returns its
// path.
func checkLinearizable(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, string, error) {
	res, info := porcupine.CheckOperationsVerbose(counterModel, pendingForm(ops), timeout)
	if res != porcupine.Illegal {
		return res, "", nil
	}
	f, err := os.CreateTemp("", "tallyd-linearizability-*.html")
	if err != nil {
		return res, "", err
	}
	path := f.Name()
	f.Close()
	return res, path, porcupine.VisualizePath(counterModel, info, path)
}

// requireLinearizable fails the test if ops are not linearizable, naming the
// visualization; a check that times out is logged as inconclusive.
func requireLinearizable(t *testing.T, ops []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	unknown := 0
	for _, op := range ops {
		if op.Output.(counterOut).unknown {
			unknown++
		}
	}
	begin := time.Now()
	res, path, err := checkLinearizable(ops, timeout)
	t.Logf("linearizability of %d operations (%d INCRs of unknown outcome): %s in %v", len(ops), unknown, res, time.Since(begin).Round(time.Millisecond))
	requireVerdict(t, res, path, err, timeout)
}

// requireVerdict fails the test on a porcupine check found Illegal, naming its
// visualization (at path, unless err says why not); Unknown is logged as inconclusive.
func requireVerdict(t *testing.T, res porcupine.CheckResult, path string, err error, timeout time.Duration) {
	t.Helper()
	switch {
	case res == porcupine.Illegal && err != nil:
		t.Fatalf("the history is not linearizable (and its visualization could not be written: %v)", err)
	case res == porcupine.Illegal:
		t.Fatalf("the history is not linearizable; porcupine's visualization: %s", path)
	case res == porcupine.Unknown:
		t.Logf("the linearizability check did not finish within %v: inconclusive", timeout)
	}
}

// modelCase checks a history written by hand: check must find it linearizable (ok) or
// Illegal, with a visualization that shows the history (it contains shows).
func modelCase(t *testing.T, check func([]porcupine.Operation, time.Duration) (porcupine.CheckResult, string, error), ops []porcupine.Operation, ok bool, shows string) {
	t.Helper()
	res, path, err := check(ops, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if path != "" {
		defer os.Remove(path)
	}
	want := porcupine.Ok
	if !ok {
		want = porcupine.Illegal
	}
	if res != want {
		t.Fatalf("check: %s, want %s", res, want)
	}
	if !ok {
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), "<html") || !strings.Contains(string(b), shows) {
			t.Fatalf("visualization %q: %v, %d bytes without the history", path, err, len(b))
		}
	}
}

// TestCounterModel checks the model and the checker on histories written by hand.
func TestCounterModel(t *testing.T) {
	incr := func(client int, key string, call, ret, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: counterIn{opIncr, key}, Call: call, Output: counterOut{value: v}, Return: ret}
	}
	lost := func(client int, key string, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: counterIn{opIncr, key}, Call: call, Output: counterOut{unknown: true}, Return: never}
	}
	get := func(client int, key string, call, ret, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: counterIn{opGet, key}, Call: call, Output: counterOut{value: v}, Return: ret}
	}
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"sequential", []porcupine.Operation{
			get(0, "a", 0, 1, 0), incr(0, "a", 2, 3, 1), incr(0, "a", 4, 5, 2), get(0, "a", 6, 7, 2),
		}, true},
		{"concurrent INCRs in either order, reads between", []porcupine.Operation{
			incr(0, "a", 0, 10, 2), incr(1, "a", 1, 9, 1), get(2, "a", 2, 3, 0), get(2, "a", 5, 8, 1), get(2, "a", 11, 12, 2),
		}, true},
		{"keys are independent", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), incr(1, "b", 2, 3, 1), get(0, "a", 4, 5, 1), get(1, "b", 4, 5, 1), get(2, "c", 4, 5, 0),
		}, true},
		{"an unknown INCR that took effect", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), lost(1, "a", 2), get(0, "a", 10, 11, 2), incr(2, "a", 12, 13, 3),
		}, true},
		{"an unknown INCR that never took effect", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), lost(1, "a", 2), get(0, "a", 10, 11, 1), incr(2, "a", 12, 13, 2), get(0, "a", 14, 15, 2),
		}, true},
		{"an unknown INCR that took effect late", []porcupine.Operation{
			lost(1, "a", 0), get(0, "a", 10, 11, 0), get(0, "a", 20, 21, 1),
		}, true},
		{"a stale read after an acknowledged INCR", []porcupine.Operation{
			incr(0, "a", 0, 10, 1), get(1, "a", 20, 30, 0),
		}, false},
		{"a stale read on another node, the INCR acknowledged before", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), incr(0, "a", 2, 3, 2), get(1, "a", 4, 5, 2), get(2, "a", 6, 7, 1),
		}, false},
		{"a lost acknowledged INCR", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), incr(1, "a", 2, 3, 2), incr(0, "a", 4, 5, 3), get(2, "a", 6, 7, 2),
		}, false},
		{"a lost acknowledged INCR seen by the next INCR", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), incr(1, "a", 2, 3, 2), incr(2, "a", 4, 5, 2),
		}, false},
		{"a read from the future", []porcupine.Operation{
			get(0, "a", 0, 1, 1), incr(1, "a", 2, 3, 1),
		}, false},
		{"more than the unknown INCRs can explain", []porcupine.Operation{
			incr(0, "a", 0, 1, 1), lost(1, "a", 2), get(0, "a", 10, 11, 3),
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) { modelCase(t, checkLinearizable, c.ops, c.ok, "INCR a") })
	}
}

// TestCounterModelRecorder checks the recorder through a real server (a single node,
// without cluster mode): INCRs and GETs of concurrent clients, a dropped connection that
// leaves an INCR unknown, then the check.
func TestCounterModelRecorder(t *testing.T) {
	port := freePort(t)
	p := start(t, 0, "--counter-port=0", fmt.Sprintf("--slock-port=%d", port), "--appendonly=false")
	p.waitLog(t, "tallyd listening")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h := newHistory()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &histClient{h: h, k: &cclient{addr: addr}, id: h.client()}
			defer c.k.close()
			for j := range 50 {
				op := byte(opGet)
				if (i+j)%3 != 0 {
					op = opIncr
				}
				_, _, _ = c.do(op, fmt.Sprintf("k%d", j%2), 2*time.Second)
			}
		}()
	}
	wg.Wait()
	// An INCR whose connection is gone before the answer: unknown, recorded as never returning.
	c := &histClient{h: h, k: &cclient{addr: addr}, id: h.client()}
	defer c.k.close()
	if _, ok, err := c.do(opGet, "k0", time.Second); !ok {
		t.Fatalf("GET: %v", err)
	}
	c.k.c.Close() // the client's own side: the write fails
	if _, ok, _ := c.do(opIncr, "k0", time.Second); ok {
		t.Fatal("INCR over a closed connection answered")
	}
	ops := h.snapshot()
	if len(ops) != 4*50+2 {
		t.Fatalf("%d operations recorded, want %d", len(ops), 4*50+2)
	}
	last := ops[len(ops)-1]
	if !last.Output.(counterOut).unknown || last.Return != never || c.id == last.ClientId {
		t.Fatalf("the INCR of unknown outcome was recorded as %+v (the client's ID is now %d: it must change)", last, c.id)
	}
	requireLinearizable(t, ops, 10*time.Second)
	res, path, _ := checkLinearizable(append(ops, porcupine.Operation{
		ClientId: h.client(), Input: counterIn{opGet, "k0"}, Call: h.now(), Output: counterOut{value: 1_000_000}, Return: h.now() + 1,
	}), 10*time.Second)
	if path != "" {
		os.Remove(path)
	}
	if res != porcupine.Illegal {
		t.Fatalf("the recorded history with an impossible read added: %s, want Illegal", res)
	}
}

// TestCounterModelScale checks that a history of the size TestClusterLinearizable makes
// (thousands of operations on a few keys, dozens of INCRs of unknown outcome, some of
// which took effect) is checked in seconds, and that one stale read in it is found.
func TestCounterModelScale(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type sim struct {
		op      porcupine.Operation
		at      int64 // when it takes effect
		applied bool
	}
	var all []*sim
	const clients, perClient = 8, 2500
	id := clients
	for c := range clients {
		now, cid := int64(r.IntN(1000)), c
		for range perClient {
			dur := int64(200 + r.IntN(5000))
			in := counterIn{opGet, fmt.Sprintf("k%d", r.IntN(4))}
			if r.IntN(3) > 0 {
				in.op = opIncr
			}
			s := &sim{op: porcupine.Operation{ClientId: cid, Input: in, Call: now, Return: now + dur}, at: now + int64(r.Int64N(dur)), applied: true}
			if in.op == opIncr && r.IntN(400) == 0 { // lost track of: applied or not, maybe late
				s.op.Return, s.op.Output = never, counterOut{unknown: true}
				s.applied = r.IntN(2) == 0
				s.at += int64(r.IntN(20000))
				cid, id = id, id+1
			}
			all = append(all, s)
			now += dur + int64(r.IntN(300))
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at < all[j].at })
	vals := map[string]int64{}
	unknown := 0
	for _, s := range all {
		in := s.op.Input.(counterIn)
		if in.op == opIncr && s.applied {
			vals[in.key]++
		}
		if s.op.Return == never {
			unknown++
			continue
		}
		s.op.Output = counterOut{value: vals[in.key]}
	}
	ops := make([]porcupine.Operation, len(all))
	for i, s := range all {
		ops[i] = s.op
	}
	if unknown < 20 {
		t.Fatalf("only %d INCRs of unknown outcome in the simulated history", unknown)
	}
	begin := time.Now()
	res, path, err := checkLinearizable(ops, 60*time.Second)
	t.Logf("%d operations, %d of unknown outcome: %s in %v", len(ops), unknown, res, time.Since(begin))
	if res != porcupine.Ok || err != nil {
		t.Fatalf("a simulated linearizable history: %s (%v), visualization %s", res, err, path)
	}
	// One read turned stale: the last read of k0 that saw a value above 1 answers one less.
	for i := len(ops) - 1; i >= 0; i-- {
		if in := ops[i].Input.(counterIn); in.op == opGet && in.key == "k0" && ops[i].Output.(counterOut).value > 1 {
			ops[i].Output = counterOut{value: ops[i].Output.(counterOut).value - 1}
			break
		}
	}
	res, path, _ = checkLinearizable(ops, 60*time.Second)
	if path != "" {
		os.Remove(path)
	}
	if res != porcupine.Illegal {
		t.Fatalf("the history with a stale read: %s, want Illegal", res)
	}
}

// TestCounterModelForms checks pendingForm against porcupine's own way, on small random
// histories (simulated, then some answers disturbed): an INCR of unknown outcome as an
// operation that never returns. Both must give the same verdict on every history.
func TestCounterModelForms(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	verdicts := map[bool]int{}
	for n := range 400 {
		type sim struct {
			op      porcupine.Operation
			at      int64
			applied bool
		}
		var all []*sim
		for c := range 3 {
			now := int64(r.IntN(10))
			for range 2 + r.IntN(4) {
				dur := int64(1 + r.IntN(30))
				in := counterIn{opGet, "k"}
				if r.IntN(2) == 0 {
					in.op = opIncr
				}
				s := &sim{op: porcupine.Operation{ClientId: c, Input: in, Call: now, Return: now + dur}, at: now + r.Int64N(dur), applied: true}
				if in.op == opIncr && r.IntN(4) == 0 {
					s.op.Return, s.op.Output = never, counterOut{unknown: true}
					s.applied = r.IntN(2) == 0
					s.at += int64(r.IntN(40))
				}
				all = append(all, s)
				now += dur + int64(r.IntN(5))
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].at < all[j].at })
		v := int64(0)
		ops := make([]porcupine.Operation, 0, len(all))
		for _, s := range all {
			if s.op.Input.(counterIn).op == opIncr && s.applied {
				v++
			}
			if s.op.Return != never {
				s.op.Output = counterOut{value: v}
				if r.IntN(8) == 0 {
					s.op.Output = counterOut{value: v + int64(r.IntN(3)) - 1}
				}
			}
			ops = append(ops, s.op)
		}
		direct := porcupine.CheckOperations(counterModel, ops)
		pending := porcupine.CheckOperations(counterModel, pendingForm(ops))
		if direct != pending {
			for _, op := range ops {
				t.Logf("client %d [%d, %d] %s", op.ClientId, op.Call, op.Return, counterModel.DescribeOperation(op.Input, op.Output))
			}
			t.Fatalf("history %d: linearizable with INCRs never returning: %v; in pendingForm: %v", n, direct, pending)
		}
		verdicts[direct]++
	}
	if verdicts[true] < 50 || verdicts[false] < 50 {
		t.Fatalf("verdicts %v: too few of one kind to compare the forms", verdicts)
	}
	t.Logf("verdicts: %v", verdicts)
}

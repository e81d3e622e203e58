package e2e

// The sequential model of a lock that the lock histories are checked against with
// porcupine (issue 19): per key, acquire and release by owners, held with a lease (an
// expiry), each grant carrying a fencing token that only grows. It serves text LOCK k
// TIMEOUT 0 EXPRIED ms LOCK_ID owner / UNLOCK k LOCK_ID owner, and SET k v NX PX ms / DEL
// k. A DEL is Redis's (issue 22): it frees the key whoever holds it (lockIn.anyone), so it
// may end another owner's hold that began after the releasing owner's had run out.
//
// Expiry depends on time, which a sequential model does not have: each operation carries
// its call and return times (the test's monotonic clock; the nodes run on the same
// machine), and the model keeps, for the current hold, the window in which its expiry
// falls: not before the grant's call + the lease (less lockEarly), not after the grant's
// return + the lease + lockLate. An operation takes effect somewhere between its call (or
// the latest call of the operations linearized before it) and its return.

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	opAcquire = 'a'
	opRelease = 'r'

	// lockEarly: how much sooner than call + lease the server may expire a hold (clock
	// reads); lockLate: how much later than return + lease (expiry runs on the loop's
	// ticks; a new leader may count a replicated lease from when it applied it).
	lockEarly = 50 * time.Millisecond
	lockLate  = 3 * time.Second
)

// lockIn is one call: an owner acquires (ttl: its lease) or releases key.
type lockIn struct {
	op    byte
	key   string
	owner int
	call  int64 // ns on the history's clock
	ttl   int64 // ns
	// anyone: a release that frees the key whoever holds it (Redis's DEL), not only the
	// owner's hold (slock's UNLOCK with its LockId).
	anyone bool
}

// lockOut is its answer: ok (granted, or released) or not (refused, or not held); unknown
// when no answer came (its return is then never: it may take effect at any time after its
// call, or not at all). ret: when the answer came. token: the grant's fencing token (0:
// none reported).
type lockOut struct {
	ok      bool
	unknown bool
	ret     int64
	token   uint64
}

// lockState is a key: its holder (-1: none) and the window of the hold's expiry, the
// latest call linearized so far (no later operation takes effect before it), and the last
// token granted.
type lockState struct {
	holder       int
	expLo, expHi int64
	lb           int64
	tok          uint64
}

const forever = never

// lockStep is the model's step: every state the key can be in after the call with that
// answer (none: impossible).
func lockStep(st lockState, in lockIn, out lockOut) []lockState {
	lo := max(st.lb, in.call) // when it can take effect: from lo to hi
	hi := out.ret
	if lo > hi {
		return nil
	}
	next := st
	next.lb = lo
	held := st.holder >= 0
	canBeFree := !held || hi >= st.expLo // at some t <= hi the hold may have expired
	canBeHeld := held && lo < st.expHi   // at some t >= lo it may still run
	grant := func(hiExp int64) lockState {
		g := next
		start := lo
		if held {
			start = max(start, st.expLo) // not before the old hold could end
		}
		g.holder, g.expLo, g.expHi = in.owner, start+in.ttl-int64(lockEarly), hiExp
		if out.token != 0 {
			g.tok = out.token
		}
		return g
	}
	switch {
	case in.op == opAcquire && out.unknown:
		states := []lockState{next} // it never took effect
		if canBeFree {
			states = append(states, grant(forever))
		}
		return states
	case in.op == opAcquire && out.ok:
		if !canBeFree || out.token != 0 && out.token <= st.tok {
			return nil
		}
		return []lockState{grant(satAdd(hi, in.ttl+int64(lockLate)))}
	case in.op == opAcquire:
		if !canBeHeld {
			return nil
		}
		next.expLo = max(st.expLo, lo) // it was still held then
		return []lockState{next}
	case in.op == opRelease && out.unknown:
		states := []lockState{next}
		if (st.holder == in.owner || in.anyone && held) && canBeHeld {
			r := next
			r.holder = -1
			states = append(states, r)
		}
		return states
	case in.op == opRelease && out.ok:
		if !held || st.holder != in.owner && !in.anyone || !canBeHeld {
			return nil
		}
		next.holder = -1
		return []lockState{next}
	default: // a release answered "not held"
		if st.holder == in.owner || in.anyone && held {
			if !canBeFree {
				return nil
			}
			next.holder = -1 // its hold had expired
		}
		return []lockState{next}
	}
}

func satAdd(a, b int64) int64 {
	if a > forever-b {
		return forever
	}
	return a + b
}

var lockModel = (&porcupine.NondeterministicModel{
	Partition: partitionBy(func(in any) string { return in.(lockIn).key }),
	Init:      func() []any { return []any{lockState{holder: -1}} },
	Step: func(state, input, output any) []any {
		next := lockStep(state.(lockState), input.(lockIn), output.(lockOut))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Hash: func(state any) uint64 {
		s := state.(lockState)
		return uint64(s.holder+1)*0x9e3779b97f4a7c15 ^ uint64(s.expLo)*31 ^ uint64(s.expHi)*17 ^ uint64(s.lb) ^ s.tok<<7
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lockIn), output.(lockOut)
		verb := map[byte]string{opAcquire: "acquire", opRelease: "release"}[in.op]
		what := "refused"
		switch {
		case out.unknown:
			what = "unknown"
		case out.ok && in.op == opAcquire:
			what = fmt.Sprintf("granted, token %d", out.token)
		case out.ok:
			what = "released"
		case in.op == opRelease:
			what = "not held"
		}
		return fmt.Sprintf("owner %d %s %s (lease %v) -> %s", in.owner, verb, in.key, time.Duration(in.ttl), what)
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		if s.holder < 0 {
			return fmt.Sprintf("free (token %d)", s.tok)
		}
		hi := "never"
		if s.expHi != forever {
			hi = fmt.Sprintf("%.3fs", float64(s.expHi)/1e9)
		}
		return fmt.Sprintf("owner %d, expiry in [%.3fs, %s] (token %d)", s.holder, float64(s.expLo)/1e9, hi, s.tok)
	},
}).ToModel()

// checkLocks checks ops against lockModel within timeout; on a violation it writes
// porcupine's visualization to a file that outlives the test and returns its path.
func checkLocks(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, string, error) {
	res, info := porcupine.CheckOperationsVerbose(lockModel, ops, timeout)
	if res != porcupine.Illegal {
		return res, "", nil
	}
	f, err := os.CreateTemp("", "tallyd-locks-linearizability-*.html")
	if err != nil {
		return res, "", err
	}
	path := f.Name()
	f.Close()
	return res, path, porcupine.VisualizePath(lockModel, info, path)
}

// lockOverlaps checks directly that no two owners' acknowledged holds of a key overlap in
// real time. An owner surely holds from its grant's return until it calls its release, or
// its lease (counted from the grant's call, less lockEarly) runs out, whichever is first;
// the server holds it at least that long. It also checks that grants' tokens grow: a grant
// that returned before another was called has the smaller token. It returns what it found.
func lockOverlaps(ops []porcupine.Operation) []string {
	type hold struct {
		owner      int
		from, to   int64
		call       int64
		token      uint64
		grantIndex int
	}
	byKey := map[string][]hold{}
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for i, op := range sorted {
		in, out := op.Input.(lockIn), op.Output.(lockOut)
		if in.op != opAcquire || !out.ok || out.unknown {
			continue
		}
		h := hold{owner: in.owner, from: op.Return, to: in.call + in.ttl - int64(lockEarly), call: in.call, token: out.token, grantIndex: i}
		// The owner's next operation on the key (its release) ends what it may assume.
		for _, later := range sorted[i+1:] {
			li := later.Input.(lockIn)
			if li.owner == in.owner && li.key == in.key {
				h.to = min(h.to, li.call)
				break
			}
		}
		// So does another owner's DEL that freed the key and may have taken effect after
		// the grant (Redis's DEL frees whoever holds the key).
		for _, o := range sorted {
			li, lo := o.Input.(lockIn), o.Output.(lockOut)
			if li.anyone && li.op == opRelease && li.key == in.key && li.owner != in.owner && (lo.ok || lo.unknown) && o.Return > h.from {
				h.to = min(h.to, max(h.from, li.call))
			}
		}
		byKey[in.key] = append(byKey[in.key], h)
	}
	var bad []string
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hs := byKey[k]
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				a, b := hs[i], hs[j]
				if a.owner != b.owner && a.from < b.to && b.from < a.to {
					bad = append(bad, fmt.Sprintf("%s: owner %d held it %.3fs..%.3fs and owner %d %.3fs..%.3fs", k,
						a.owner, float64(a.from)/1e9, float64(a.to)/1e9, b.owner, float64(b.from)/1e9, float64(b.to)/1e9))
				}
				first, second := a, b
				if b.from < a.call {
					first, second = b, a
				}
				if first.from < second.call && first.token != 0 && second.token != 0 && second.token <= first.token {
					bad = append(bad, fmt.Sprintf("%s: owner %d's grant (returned %.3fs) has token %d, owner %d's later grant (called %.3fs) token %d: tokens must grow",
						k, first.owner, float64(first.from)/1e9, first.token, second.owner, float64(second.call)/1e9, second.token))
				}
			}
		}
	}
	return bad
}

// TestLockModel checks the model, the checker and the direct checks on histories written
// by hand (times in ms; leases of 1000 ms).
func TestLockModel(t *testing.T) {
	const ms = int64(time.Millisecond)
	const lease = 1000 * ms
	acq := func(owner int, key string, call, ret int64, granted bool, token uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: owner, Input: lockIn{opAcquire, key, owner, call * ms, lease, false}, Call: call * ms,
			Output: lockOut{ok: granted, ret: ret * ms, token: token}, Return: ret * ms}
	}
	rel := func(owner int, key string, call, ret int64, released bool) porcupine.Operation {
		return porcupine.Operation{ClientId: owner, Input: lockIn{opRelease, key, owner, call * ms, lease, false}, Call: call * ms,
			Output: lockOut{ok: released, ret: ret * ms}, Return: ret * ms}
	}
	del := func(owner int, key string, call, ret int64, released bool) porcupine.Operation {
		op := rel(owner, key, call, ret, released)
		in := op.Input.(lockIn)
		in.anyone = true
		op.Input = in
		return op
	}
	// lost: no answer; it may take effect within window ms of its call (0: at any time, as
	// the chaos test records it).
	lost := func(op porcupine.Operation, window int64) porcupine.Operation {
		op.Output = lockOut{unknown: true, ret: op.Call + window*ms}
		if window == 0 {
			op.Output = lockOut{unknown: true, ret: never}
		}
		op.Return = op.Output.(lockOut).ret
		return op
	}
	for _, c := range []struct {
		name     string
		ops      []porcupine.Operation
		ok       bool
		overlaps bool // the direct checks find something
	}{
		{"acquire, release, acquire", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), rel(0, "k", 20, 30, true), acq(1, "k", 40, 50, true, 2), rel(1, "k", 60, 70, true),
		}, true, false},
		{"refused while held, granted after the release", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), acq(1, "k", 20, 30, false, 0), rel(0, "k", 40, 50, true), acq(1, "k", 60, 70, true, 2),
		}, true, false},
		{"granted after the lease ran out", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), acq(1, "k", 1100, 1110, true, 2), rel(0, "k", 1200, 1210, false),
		}, true, false},
		{"refused a little after the lease (expiry runs late)", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), acq(1, "k", 1500, 1510, false, 0),
		}, true, false},
		{"keys are independent", []porcupine.Operation{
			acq(0, "a", 0, 10, true, 1), acq(1, "b", 0, 10, true, 1),
		}, true, false},
		{"concurrent acquires: one wins", []porcupine.Operation{
			acq(0, "k", 0, 100, true, 5), acq(1, "k", 10, 90, false, 0),
		}, true, false},
		{"an unknown acquire that took effect", []porcupine.Operation{
			lost(acq(0, "k", 0, 0, true, 0), 500), acq(1, "k", 600, 610, false, 0), acq(1, "k", 1700, 1710, true, 3),
		}, true, false},
		{"an unknown acquire that did not", []porcupine.Operation{
			lost(acq(0, "k", 0, 0, true, 0), 500), acq(1, "k", 600, 610, true, 3),
		}, true, false},
		{"an unknown release that did not take effect", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), lost(rel(0, "k", 20, 0, true), 100), acq(1, "k", 200, 210, false, 0),
		}, true, false},
		{"an unknown acquire that took effect late", []porcupine.Operation{
			lost(acq(0, "k", 0, 0, true, 0), 0), acq(1, "k", 100, 110, true, 2), rel(1, "k", 200, 210, true), acq(2, "k", 300, 310, false, 0),
		}, true, false},
		{"an unknown acquire that never took effect", []porcupine.Operation{
			lost(acq(0, "k", 0, 0, true, 0), 0), acq(1, "k", 100, 110, true, 2), rel(1, "k", 200, 210, true), acq(2, "k", 300, 310, true, 3),
		}, true, false},
		{"two owners granted at once", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), acq(1, "k", 20, 30, true, 2),
		}, false, true},
		{"granted before the lease could run out", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), acq(1, "k", 800, 810, true, 2),
		}, false, true},
		{"refused while nobody holds it", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), rel(0, "k", 20, 30, true), acq(1, "k", 40, 50, false, 0),
		}, false, false},
		{"a token that does not grow", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 5), rel(0, "k", 20, 30, true), acq(1, "k", 40, 50, true, 5),
		}, false, true},
		{"released by an owner that does not hold it", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), rel(1, "k", 20, 30, true),
		}, false, false},
		{"a release answered not held while the lease runs", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), rel(0, "k", 20, 30, false),
		}, false, false},
		{"an unknown acquire cannot explain a second grant during a lease", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), lost(acq(1, "k", 20, 0, true, 0), 500), acq(2, "k", 600, 610, true, 2),
		}, false, true},
		{"a DEL frees another owner's hold", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), del(1, "k", 20, 30, true), acq(2, "k", 40, 50, true, 2),
		}, true, false},
		{"a late DEL frees the next owner's hold", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), acq(1, "k", 1100, 1110, true, 2), del(0, "k", 1200, 1210, true), acq(2, "k", 1300, 1310, true, 3),
		}, true, false},
		{"a DEL answered not held while a lease runs", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), del(1, "k", 20, 30, false),
		}, false, false},
		{"a DEL of a free key answered freed", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), del(0, "k", 20, 30, true), del(1, "k", 40, 50, true),
		}, false, false},
		{"an unknown DEL that took effect", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), lost(del(1, "k", 20, 0, true), 100), acq(2, "k", 200, 210, true, 2),
		}, true, false},
		{"nor can one without an end", []porcupine.Operation{
			acq(0, "k", 0, 10, true, 1), lost(acq(1, "k", 20, 0, true, 0), 0), acq(2, "k", 600, 610, true, 2),
		}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			modelCase(t, checkLocks, c.ops, c.ok, "acquire k")
			if got := lockOverlaps(c.ops); (len(got) > 0) != c.overlaps {
				t.Fatalf("direct checks found %q, want something: %v", got, c.overlaps)
			}
		})
	}
}

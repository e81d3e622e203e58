package e2e

// Locks under faults (issue 19): clients acquire and release locks at QUORUM through every
// member, text LOCK/UNLOCK with their own LockIds and SET NX PX/DEL (a Redis key: the DEL
// frees it whoever holds it, as in Redis), while a nemesis kills nodes, cuts them off and slows links. The history
// is checked with porcupine against lockModel; directly, no two owners' acknowledged holds
// may overlap in real time and the fencing tokens of successive grants of a key must grow.

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	llClients = 8
	llNemesis = 20 * time.Second
	llLease   = 1500 * time.Millisecond
	llCheck   = 90 * time.Second
)

// lockStats counts what the clients saw.
type lockStats struct {
	granted, refused, released, notHeld, unknown, noToken atomic.Int64
	odd                                                   sync.Map // unexpected replies, for the log
}

// lockWorker is one client: it takes keys of one family (text LOCK, or SET NX) through one
// node, holds them a moment, and releases them (or lets the lease run out).
type lockWorker struct {
	h      *history
	k      *cclient
	owner  int
	text   bool // LOCK/UNLOCK; else SET NX/DEL
	st     *lockStats
	r      *rand.Rand
	values int
}

// outcome of one operation.
const (
	outOK = iota
	outNo
	outNotRun // never reached the cluster: nothing to record
	outUnknown
)

func (w *lockWorker) lockID() string { return "o" + strconv.Itoa(w.owner) }

// run does one operation on key and records it.
func (w *lockWorker) run(op byte, key string) (int, uint64) {
	in := lockIn{op: op, key: key, owner: w.owner, ttl: int64(llLease), anyone: !w.text}
	var args []string
	switch {
	case w.text && op == opAcquire:
		args = []string{"LOCK", key, "TIMEOUT", "0", "EXPRIED", strconv.Itoa(0x0400<<16 | int(llLease/time.Millisecond)), "LOCK_ID", w.lockID()}
	case w.text:
		args = []string{"UNLOCK", key, "LOCK_ID", w.lockID()}
	case op == opAcquire:
		w.values++
		args = []string{"SET", key, fmt.Sprintf("%d-%d", w.owner, w.values), "NX", "PX", strconv.Itoa(int(llLease / time.Millisecond))}
	default:
		args = []string{"DEL", key}
	}
	in.call = w.h.now()
	r, err := w.k.doReply(opTimeout, args...)
	ret := w.h.now()
	res, token := outUnknown, uint64(0)
	what := ""
	switch {
	case isNotSent(err):
		return outNotRun, 0
	case err != nil:
		what = err.Error()
	case r.Kind == '-' && strings.HasPrefix(string(r.Str), "CLUSTERDOWN no leader"):
		return outNotRun, 0 // answered by a follower that forwarded nothing
	case r.Kind == '-':
		what = string(r.Str)
		if !strings.HasPrefix(what, "CLUSTERDOWN") {
			w.st.odd.Store(args[0]+" "+what, true)
		}
	case w.text:
		lr, perr := parseLockReply(r)
		switch {
		case perr != nil:
			what = perr.Error()
			w.st.odd.Store(args[0]+" "+what, true)
		case lr.result == 0 && op == opAcquire:
			res, token = outOK, lr.token
			if !lr.hasToken {
				w.st.noToken.Add(1)
			}
		case lr.result == 0:
			res = outOK
		case op == opAcquire && lr.result == 8: // TIMEOUT: held by another
			res = outNo
		case op == opRelease && (lr.result == 6 || lr.result == 7): // UNLOCK_ERROR, UNOWN_ERROR
			res = outNo
		default:
			what = lr.text
			w.st.odd.Store(args[0]+" "+lr.text, true)
		}
	default:
		got := replyString(r)
		switch {
		case op == opAcquire && got == "+OK", op == opRelease && got == ":1":
			res = outOK
		case op == opAcquire && got == "$-1", op == opRelease && got == ":0":
			res = outNo
		default:
			what = got
			w.st.odd.Store(args[0]+" "+got, true)
		}
	}
	out := lockOut{ok: res == outOK, ret: ret, token: token}
	if res == outUnknown {
		// It may take effect at any time from its call on, or never: porcupine's open end.
		out = lockOut{unknown: true, ret: never}
		ret = never
	}
	w.h.addOp(porcupine.Operation{ClientId: w.owner, Input: in, Call: in.call, Output: out, Return: ret, Metadata: what})
	switch {
	case res == outUnknown:
		w.st.unknown.Add(1)
		// Its outcome unknown, this owner is done: a new one on a new connection.
		w.owner = w.h.client()
		w.k.close()
	case op == opAcquire && res == outOK:
		w.st.granted.Add(1)
	case op == opAcquire:
		w.st.refused.Add(1)
	case res == outOK:
		w.st.released.Add(1)
	default:
		w.st.notHeld.Add(1)
	}
	return res, token
}

func (w *lockWorker) loop(stop <-chan struct{}, keys []string) {
	defer w.k.close()
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for !stopped() {
		key := keys[w.r.IntN(len(keys))]
		res, _ := w.run(opAcquire, key)
		switch res {
		case outNotRun:
			time.Sleep(50 * time.Millisecond)
			continue
		case outOK:
		default:
			time.Sleep(time.Duration(20+w.r.IntN(60)) * time.Millisecond)
			continue
		}
		time.Sleep(time.Duration(w.r.IntN(150)) * time.Millisecond)
		if w.r.IntN(10) == 0 {
			// It lets the lease run out and goes on as another owner.
			w.owner = w.h.client()
			w.k.close()
			continue
		}
		for !stopped() {
			if res, _ := w.run(opRelease, key); res != outNotRun {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestClusterLocksLinearizable(t *testing.T) {
	skipFake(t)
	c, pn := newProxyCluster(t, 3)
	c.bound(llNemesis + llCheck + 60*time.Second)
	h := newHistory()
	st := &lockStats{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range llClients {
		w := &lockWorker{h: h, k: c.client(i % len(c.nodes)), owner: h.client(), text: i%2 == 0, st: st,
			r: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
		keys := []string{"nx0", "nx1"}
		if w.text {
			keys = []string{"lk0", "lk1"}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(stop, keys)
		}()
	}

	faults := c.nemesis(h, llNemesis, 11, pn)
	c.waitLeader(10*time.Second, nil)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	c.check()

	ops := h.snapshot()
	var odd []string
	st.odd.Range(func(k, _ any) bool { odd = append(odd, k.(string)); return len(odd) < 20 })
	t.Logf("%d faults; %d operations: %d grants, %d refusals, %d releases, %d releases of what was not held, %d of unknown outcome; unexpected replies: %q",
		faults, len(ops), st.granted.Load(), st.refused.Load(), st.released.Load(), st.notHeld.Load(), st.unknown.Load(), odd)
	if st.granted.Load() < 100 || st.refused.Load() < 20 {
		t.Fatalf("too little progress under the nemesis to check anything: %d grants, %d refusals; INFO cluster:\n%s", st.granted.Load(), st.refused.Load(), c.infos())
	}
	if n := st.noToken.Load(); n > 0 {
		t.Errorf("%d text LOCK grants carried no TOKEN", n)
	}
	if bad := lockOverlaps(ops); len(bad) > 0 {
		more := ""
		if len(bad) > 10 {
			more = fmt.Sprintf("\n... and %d more", len(bad)-10)
			bad = bad[:10]
		}
		t.Errorf("holds that overlap, or tokens that do not grow:\n%s%s", strings.Join(bad, "\n"), more)
	}
	begin := time.Now()
	res, path, err := checkLocks(ops, llCheck)
	t.Logf("linearizability of %d lock operations: %s in %v", len(ops), res, time.Since(begin).Round(time.Millisecond))
	requireVerdict(t, res, path, err, llCheck)
}

package loop

// The explorer's checkers (explore_test.go): the sequential model its key history is
// checked against with porcupine, and the lock checks (one holder at a time, tokens that
// only grow).

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kinds of key operations.
const (
	exGet   = 'g' // GET k: the value, or nil
	exSet   = 's' // SET k v: OK
	exIncr  = 'i' // INCR k (or the script that does it): the new value
	exDel   = 'd' // DEL k: 1 or 0
	exMulti = 'm' // MULTI; SET k v; INCR k; EXEC: v+1
	exFence = 'f' // SET k v FENCE t: OK, or refused (-FENCED) when k has seen a higher token
)

// exIn is one call on one key.
type exIn struct {
	kind  byte
	key   string
	val   int64
	token int64 // exFence
}

// exOut is its answer. unknown: a write whose outcome is not known (an error that does not
// say, a closed connection); it may have happened, and its Return is the end of time.
type exOut struct {
	unknown bool
	exists  bool  // exGet: a value
	val     int64 // exGet's value, exIncr's and exMulti's new value, exDel's count
	ok      bool  // exFence: done (false: FENCED)
}

// exState is one key: its value, and the highest token a fenced write presented.
type exState struct {
	exists bool
	val    int64
	fence  int64
}

var exModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(exIn).key
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
	},
	Init: func() any { return exState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(exState), input.(exIn), output.(exOut)
		switch in.kind {
		case exGet:
			return out.exists == st.exists && (!st.exists || out.val == st.val), st
		case exSet:
			return true, exState{exists: true, val: in.val, fence: st.fence}
		case exIncr:
			n := exState{exists: true, val: 1, fence: st.fence}
			if st.exists {
				n.val = st.val + 1
			}
			return out.unknown || out.val == n.val, n
		case exDel:
			was := int64(0)
			if st.exists {
				was = 1
			}
			return out.unknown || out.val == was, exState{}
		case exMulti:
			return out.unknown || out.val == in.val+1, exState{exists: true, val: in.val + 1, fence: st.fence}
		case exFence:
			if in.token < st.fence {
				return out.unknown || !out.ok, st
			}
			return out.unknown || out.ok, exState{exists: true, val: in.val, fence: in.token}
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(exIn), output.(exOut)
		var o string
		switch {
		case out.unknown:
			o = "?"
		case in.kind == exGet && !out.exists:
			o = "nil"
		case in.kind == exFence:
			o = fmt.Sprint(out.ok)
		default:
			o = fmt.Sprint(out.val)
		}
		return fmt.Sprintf("%c %s %d t%d -> %s", in.kind, in.key, in.val, in.token, o)
	},
}

// exGrant is a lock grant a client saw: when it asked and was answered, its token, and
// until when it surely still held the lock (when it asked to release it, saw its
// connection fail, or its lease ran out, counted from when it asked).
type exGrant struct {
	client    int
	key       string
	lockID    string
	call, ret time.Duration
	token     int64
	end       time.Duration
}

// checkGrants checks that tokens only grow (a grant answered before another was asked for
// has a lower token, whatever the keys: the counter is cluster-wide) and that no two
// clients surely held the same lock at the same time.
func checkGrants(gs []exGrant) []string {
	var bad []string
	for i := range gs {
		for j := range gs {
			a, b := gs[i], gs[j]
			if i == j {
				continue
			}
			if a.ret < b.call && a.token >= b.token {
				bad = append(bad, fmt.Sprintf("token went back: %s granted %s token %d at %v, then %s asked at %v and got %s token %d",
					a.lockID, a.key, a.token, a.ret, b.lockID, b.call, b.key, b.token))
			}
			if i < j && a.key == b.key && a.ret < b.end && b.ret < a.end {
				bad = append(bad, fmt.Sprintf("lock %s held twice: %s from %v to %v (token %d) and %s from %v to %v (token %d)",
					a.key, a.lockID, a.ret, a.end, a.token, b.lockID, b.ret, b.end, b.token))
			}
		}
	}
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("... and %d more", len(bad)-5))
	}
	return bad
}

// describeHistory renders a key history for a verbose run, in call order.
func describeHistory(h []porcupine.Operation) string {
	ops := append([]porcupine.Operation(nil), h...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		ret := "never"
		if op.Return != exNever {
			ret = fmt.Sprintf("%.6f", time.Duration(op.Return).Seconds())
		}
		fmt.Fprintf(&b, "%10.6f..%s client %d: %s\n", time.Duration(op.Call).Seconds(), ret, op.ClientId,
			exModel.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

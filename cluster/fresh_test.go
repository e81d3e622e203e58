package cluster

import (
	"slices"
	"testing"
)

// TestFreshWipedMemberCannotElect (loop's TestSimWipedMemberCannotElect, on raft alone): A
// leads and has x acknowledged by W while B is away; A goes away and W comes back wiped,
// as a new cluster's member. W must not vote B, whose log lacks x, into leading; without
// the rule it would. Once A is back, x is applied everywhere and W is caught up.
func TestFreshWipedMemberCannotElect(t *testing.T) {
	for _, rule := range []bool{true, false} {
		h := newHarness(t, 3)
		a := h.elect()
		h.until("the leader's first entry everywhere", 50, func() bool {
			for _, m := range h.members {
				if m.rn.BasicStatus().GetCommit() < 4 || m.fresh.On {
					return false
				}
			}
			return true
		})
		var rest []uint64
		for _, m := range h.members {
			if m != a {
				rest = append(rest, m.id)
			}
		}
		b, w := h.members[rest[0]-1], h.members[rest[1]-1]
		h.cut[b.id] = true
		if err := a.rn.Propose([]byte("x")); err != nil {
			t.Fatal(err)
		}
		h.until("x applied by A and W", 50, func() bool {
			return slices.Contains(a.applied, "x") && slices.Contains(w.applied, "x")
		})
		h.cut[a.id] = true
		delete(h.cut, b.id)
		w = h.wipe(w.id)
		w.fresh.On = rule
		led := false
		for range 10 * ElectionTicks {
			h.tick()
			led = led || h.leader() != nil
		}
		if !rule {
			if !led {
				t.Fatal("without the rule: B and the wiped W elect no leader (the test shows nothing)")
			}
			continue
		}
		if led {
			t.Fatalf("B (%d) and the wiped W (%d) elected a leader that lacks x", b.id, w.id)
		}
		delete(h.cut, a.id)
		h.until("x applied everywhere once A is back", 200, func() bool {
			for _, m := range h.members {
				if !slices.Contains(m.applied, "x") {
					return false
				}
			}
			return !w.fresh.On
		})
	}
}

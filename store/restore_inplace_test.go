package store

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// TestRestoreInPlaceIsRestore runs the same random history on two Locks, one restoring
// records with Restore (its in-place path where the shape allows) and the other with
// restoreSlow alone, with lock commands, expiries, disconnections and journals between:
// after every step both must hold the same state, field by field, and make the same
// replies and records.
func TestRestoreInPlaceIsRestore(t *testing.T) {
	const after = int64(50e6)
	inPlace := 0
	for seed := range uint64(12) {
		rnd := rand.New(rand.NewPCG(seed, 25))
		cfg := LocksConfig{Persist: seed%5 != 4, PersistAfter: after, IDSeed: 1}
		a, b := NewLocks(cfg), NewLocks(cfg)
		now := int64(1e18)
		var ra, rb []LockReply
		var ea, eb []Exec
		var ks KeyState
		for step := range 2000 {
			now += rnd.Int64N(20e6)
			var what string
			switch op := rnd.IntN(10); {
			case op < 5:
				randomState(rnd, &ks, now, after)
				what = fmt.Sprintf("restore %+v", ks)
				if a.restoreInPlace(&ks, now) {
					inPlace++
				} else {
					a.restoreSlow(&ks, now)
				}
				b.restoreSlow(&ks, now)
			case op < 8:
				c := randomLock(rnd)
				o := Owner(1 + rnd.IntN(3))
				what = fmt.Sprintf("do %d %+v", o, c)
				ca, cb := c, c
				ra, ea = a.Do(o, &ca, now, ra[:0], ea[:0])
				rb, eb = b.Do(o, &cb, now, rb[:0], eb[:0])
			case op < 9:
				what = "expire"
				ra, ea = a.Expire(now, ra[:0], ea[:0])
				rb, eb = b.Expire(now, rb[:0], eb[:0])
				if rnd.IntN(4) == 0 {
					o := Owner(1 + rnd.IntN(3))
					a.Disconnected(o, now)
					b.Disconnected(o, now)
				}
			default:
				what = "journal"
				a.PersistDue(now)
				b.PersistDue(now)
				ja, jb := journalText(a, now), journalText(b, now)
				if ja != jb {
					t.Fatalf("seed %d step %d: journals differ:\n%s\n%s", seed, step, ja, jb)
				}
				if rnd.IntN(2) == 0 {
					a.ForgetJournal()
					b.ForgetJournal()
				}
			}
			if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
				t.Fatalf("seed %d step %d (%s): replies differ:\n%+v\n%+v", seed, step, what, ra, rb)
			}
			if da, db := dumpLocks(a), dumpLocks(b); da != db {
				t.Fatalf("seed %d step %d (%s): states differ:\nin place:\n%s\nslow:\n%s", seed, step, what, da, db)
			}
			if err := a.Check(); err != nil {
				t.Fatalf("seed %d step %d (%s): %v", seed, step, what, err)
			}
			if err := b.Check(); err != nil {
				t.Fatalf("seed %d step %d (%s): slow: %v", seed, step, what, err)
			}
		}
	}
	if inPlace < 1000 {
		t.Fatalf("the in-place path ran %d times: the test does not reach it", inPlace)
	}
}

// randomState fills ks with a key's state of random shape: 0 to 2 holders, live or past
// their deadline, of every persistence and expiry, with or without a value.
func randomState(rnd *rand.Rand, ks *KeyState, now, after int64) {
	*ks = KeyState{DB: uint8(rnd.IntN(2)), Holders: ks.Holders[:0], Fence: uint64(rnd.IntN(3))}
	ks.Key[15] = byte(rnd.IntN(6))
	if rnd.IntN(3) > 0 {
		v := binary.LittleEndian.AppendUint64(nil, rnd.Uint64())
		ks.Value = append(binary.LittleEndian.AppendUint32(nil, uint32(2+len(v))), dataSet, dataNumber)
		ks.Value = append(ks.Value, v...)
	}
	n := []int{0, 1, 1, 1, 1, 2}[rnd.IntN(6)]
	first := rnd.IntN(4)
	for i := range n {
		h := HolderState{Levels: uint8(rnd.IntN(4)), Rcount: uint8(rnd.IntN(3)), Count: uint16(rnd.IntN(3)),
			Start: now - rnd.Int64N(2*after), Token: uint64(rnd.IntN(50)), Client: uint64(rnd.IntN(3))}
		if rnd.IntN(6) > 0 {
			h.Levels = 1
		}
		h.LockID[15] = byte((first + i) % 4) // distinct
		h.Hold = Hold{N: uint16(1 + rnd.IntN(400)), Unit: Millis, Opts: HoldOpts(rnd.IntN(32))}
		switch rnd.IntN(4) {
		case 0:
			h.Deadline = now - rnd.Int64N(after) // past
		case 1:
			h.Deadline = now + rnd.Int64N(after)
		case 2:
			h.ExpireAt = (now + rnd.Int64N(2*after) - after/2) / 1e6
		}
		h.Hold.Opts &^= HoldKept | HoldNever // as Journal writes them: a kept holder is not, one that never expires has no deadline
		if h.Deadline == 0 && h.ExpireAt == 0 {
			h.Hold.Opts |= HoldNever
		}
		ks.Holders = append(ks.Holders, h)
	}
}

// randomLock returns a random Lock or Unlock on the keys randomState names.
func randomLock(rnd *rand.Rand) LockCommand {
	c := LockCommand{Kind: KindLock, DB: uint8(rnd.IntN(2)), Count: uint16(rnd.IntN(3)), Rcount: uint8(rnd.IntN(3))}
	if rnd.IntN(3) == 0 {
		c.Kind = KindUnlock
	}
	c.Key[15] = byte(rnd.IntN(6))
	c.LockID[15] = byte(rnd.IntN(4))
	c.RequestID[0] = byte(rnd.IntN(256))
	c.Hold = Hold{N: uint16(1 + rnd.IntN(400)), Unit: Millis, Opts: HoldOpts(rnd.IntN(32))}
	c.Wait = Wait{N: uint16(rnd.IntN(2)), Unit: Millis}
	if rnd.IntN(4) == 0 {
		v := binary.LittleEndian.AppendUint64(nil, rnd.Uint64())
		c.Data = append(append(binary.LittleEndian.AppendUint32(nil, uint32(2+len(v))), dataSet, 0), v...)
		c.Opts = 0x20
	}
	return c
}

// when is when d is due, 0 if it is not scheduled (its at is then stale).
func when(d *deadline) int64 {
	if !d.scheduled() {
		return 0
	}
	return d.at
}

// journalText renders what Journal emits.
func journalText(l *Locks, now int64) string {
	var b strings.Builder
	l.Journal(now, func(ks *KeyState) { fmt.Fprintf(&b, "%+v\n", *ks) })
	return b.String()
}

// dumpLocks renders every field of l's state that a restore may set: the keys with their
// holders and waiters, the counts, and the order in which the heaps would hand items back.
func dumpLocks(l *Locks) string {
	var b strings.Builder
	item := func(it *lockItem) string {
		return fmt.Sprintf("%x/%x/w%v", it.k.key, it.cmd.LockID, it.waiting)
	}
	for _, d := range l.dbs {
		if d == nil {
			continue
		}
		fmt.Fprintf(&b, "db %d %+v vals %d\n", d.id, d.st, len(d.vals))
		names := make([][16]byte, 0, len(d.keys))
		for name := range d.keys {
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool { return string(names[i][:]) < string(names[j][:]) })
		for _, name := range names {
			k := d.keys[name]
			fmt.Fprintf(&b, " key %x has=%v value=%x levels=%d logged=%v dirty=%v fence=%d vslot=%d vbytes=%d byID=%v\n",
				k.key, k.has, k.value, k.levels, k.logged, k.dirty, k.fence, k.vslot, k.vbytes, k.byID != nil)
			for _, list := range []*itemList{&k.hold, &k.wait} {
				for it := list.head; it != nil; it = it.next {
					fmt.Fprintf(&b, "  %s cmd=%+v owner=%d arrived=%d start=%d token=%d levels=%d prio=%d flags=%v%v%v%v ko=%v data=%d/%d execs=%d/%d dl=%v/%d pdl=%v/%d\n",
						item(it), it.cmd, it.owner, it.arrived, it.start, it.token, it.levels, it.prio, it.waiting, it.hasData,
						it.dataFrame, it.waitsCounted, it.ko != nil, len(it.data), cap(it.data), len(it.execs), cap(it.execs),
						it.dl.scheduled(), when(&it.dl), it.pdl.scheduled(), when(&it.pdl))
				}
			}
		}
	}
	for _, q := range []*deadlines{l.dl, l.aging} {
		s := append([]slot(nil), q.h...)
		sort.Slice(s, func(i, j int) bool { return s[i].before(&s[j]) })
		b.WriteString("heap:")
		for _, x := range s {
			switch it := x.d.it.(type) {
			case *lockItem:
				fmt.Fprintf(&b, " %d:%s", x.at, item(it))
			case *agedItem:
				fmt.Fprintf(&b, " %d:%s", x.at, item((*lockItem)(it)))
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "nkeys=%d nitems=%d nfree=%d/%d nindexed=%d fence=%d ceil=%d changes=%d dirty=%d gone=%d logged=%d bytes=%d\n",
		l.nkeys, l.nitems, l.nfreeItems, l.nfreeKeys, l.nindexed, l.fence, l.fenceCeil, l.changes, len(l.dirty), len(l.goneKeys),
		l.loggedKeys.n, l.Bytes()-int64(cap(l.dl.h)+cap(l.aging.h))*heapSlot) // a heap's spare room depends on its history, not its state
	return b.String()
}

package store_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/store"
)

// persistView renders what a Locks would write to a compacted log: each logged key's
// persistent state, sorted.
func persistView(l *store.Locks, now int64) []string {
	var out []string
	ceils := 0
	l.BeginSnapshot()
	for !l.SnapshotNext(3, now, func(s *store.KeyState) {
		if s.Ceil != 0 {
			out = append(out, fmt.Sprintf("ceil %d", s.Ceil))
			ceils++
			return
		}
		line := fmt.Sprintf("db%d %x value=%x fence=%d", s.DB, s.Key, s.Value, s.Fence)
		for _, h := range s.Holders {
			line += fmt.Sprintf(" [%x levels=%d count=%d rcount=%d deadline=%d ef=%#x token=%d]", h.LockID, h.Levels, h.Count, h.Rcount, h.Deadline, lockwire.OfHolder(&h).ExpriedFlag, h.Token)
		}
		out = append(out, line)
	}) {
	}
	if len(out)-ceils != l.LoggedKeys() {
		panic(fmt.Sprintf("snapshot wrote %d keys of %d logged", len(out), l.LoggedKeys()))
	}
	sort.Strings(out)
	return out
}

// TestJournalReplaysToTheSameState hammers a Locks with random locks, unlocks, data
// commands and expiries, and after every step replays the journal records it emitted into
// a second Locks: both must describe the same persistent state.
func TestJournalReplaysToTheSameState(t *testing.T) {
	const after = int64(50e6)
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		cfg := store.LocksConfig{Persist: true, PersistAfter: after}
		a, b := store.NewLocks(cfg), store.NewLocks(cfg)
		now := int64(1e18)
		records := 0
		var rs []store.LockReply
		var ex []store.Exec
		for step := range 3000 {
			now += rnd.Int64N(20e6)
			var c wc
			c.DB = uint8(rnd.IntN(2))
			c.Key[15] = byte(rnd.IntN(6))
			c.LockID[15] = byte(rnd.IntN(4))
			c.Kind = 1
			if rnd.IntN(3) == 0 {
				c.Kind = 2
			}
			c.Count = uint16(rnd.IntN(3))
			if rnd.IntN(4) == 0 {
				c.Count = 0xFFFF
			}
			c.Rcount = uint8(rnd.IntN(3))
			c.Expried = uint16(1 + rnd.IntN(400))
			c.ExpriedFlag = 0x0400 // milliseconds
			switch rnd.IntN(8) {
			case 0:
				c.ExpriedFlag |= 0x0100 // persist at once
			case 1:
				c.ExpriedFlag |= 0x0200 // never
			case 2:
				c.Expried, c.ExpriedFlag = 0x7FFF, 0x4000 // never expires
			}
			if rnd.IntN(4) == 0 {
				c.Flag = 0x20 | byte(rnd.IntN(2))*0x02 // data, maybe Update
				v := make([]byte, 8)
				binary.LittleEndian.PutUint64(v, uint64(step))
				cmd := byte(rnd.IntN(2) * 2) // SET or INCR
				rec := binary.LittleEndian.AppendUint32(nil, uint32(2+len(v)))
				c.Data = append(append(rec, cmd, 0), v...)
			}
			sc := c.cmd()
			rs, ex = a.Do(store.Owner(1+rnd.IntN(3)), &sc, now, rs[:0], ex[:0])
			if rnd.IntN(5) == 0 {
				rs, ex = a.Expire(now, rs[:0], ex[:0])
			}
			a.PersistDue(now)
			a.Journal(now, func(s *store.KeyState) {
				records++
				cp := *s
				cp.Value = append([]byte(nil), s.Value...)
				if s.Value == nil {
					cp.Value = nil
				}
				cp.Holders = append([]store.HolderState(nil), s.Holders...)
				b.Restore(&cp, now)
			})
			rs, ex = b.Expire(now, rs[:0], ex[:0])
			rs, ex = a.Expire(now, rs[:0], ex[:0])
			a.PersistDue(now)
			a.Journal(now, func(s *store.KeyState) {
				records++
				cp := *s
				cp.Holders = append([]store.HolderState(nil), s.Holders...)
				b.Restore(&cp, now)
			})
			va, vb := persistView(a, now), persistView(b, now)
			if fmt.Sprint(va) != fmt.Sprint(vb) {
				t.Logf("op %+v flag %#x rs %+v", c, c.Flag, rs)
				t.Fatalf("seed %d step %d: live state\n%q\nreplayed journal\n%q", seed, step, va, vb)
			}
			if err := a.Check(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if err := b.Check(); err != nil {
				t.Fatalf("seed %d step %d: replayed: %v", seed, step, err)
			}
		}
		if records == 0 {
			t.Fatalf("seed %d: nothing journaled", seed)
		}
	}
}

// BenchmarkRewriteSnapshot measures what a rewrite costs the loop per key: finding the
// logged keys (the one pause at its start) and snapshotting them (done in slices).
func BenchmarkRewriteSnapshot(b *testing.B) {
	const keys = 1_000_000
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1})
	now := int64(1e18)
	var rs []store.LockReply
	var ex []store.Exec
	for i := range keys {
		var c wc
		c.Kind, c.Flag = 1, 0x20
		binary.BigEndian.PutUint64(c.Key[8:], uint64(i))
		c.LockID = c.Key
		c.Expried, c.ExpriedFlag = 0x7FFF, 0x4000|0x0100
		rec := binary.LittleEndian.AppendUint32(nil, 2+8)
		c.Data = append(append(rec, 0, 1), 1, 2, 3, 4, 5, 6, 7, 8)
		sc := c.cmd()
		rs, ex = l.Do(1, &sc, now, rs[:0], ex[:0])
	}
	l.Journal(now, func(*store.KeyState) {})
	// What a raft snapshot encoded in one turn (SnapshotAll, each key encoded) held the loop
	// for, whole, and what a backup's step (SaveNext, saveStep keys) does.
	b.Run("SnapshotAll-encoded-1M", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = buf[:0]
			l.SnapshotAll(now, func(ks *store.KeyState) { buf = aof.AppendState(buf, ks) })
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	b.Run("SaveNext-1024-encoded", func(b *testing.B) {
		var buf []byte
		emit := func(ks *store.KeyState) { buf = aof.AppendState(buf, ks) }
		l.BeginSave(now, emit)
		for b.Loop() {
			if len(buf) > 64<<20 {
				buf = buf[:0]
			}
			if l.SaveNext(1024) {
				l.BeginSave(now, emit)
			}
		}
	})
	b.Run("SnapshotNext-per-key", func(b *testing.B) {
		n := 0
		l.BeginSnapshot()
		for b.Loop() {
			if l.SnapshotNext(1, now, func(*store.KeyState) { n++ }) {
				l.BeginSnapshot()
			}
		}
		if n == 0 {
			b.Fatal("no snapshot")
		}
	})
}

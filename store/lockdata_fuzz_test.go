package store_test

import (
	"encoding/binary"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// FuzzLockData feeds arbitrary bytes as data records (and as the bodies of
// PIPELINE and EXECUTE records) to Locks, Updates and Unlocks, checking the
// invariants, that every stored value is a well-formed record (Check) and
// that every EXECUTE handed back is a Lock or Unlock frame of the carrying
// database with its record whole.
func FuzzLockData(f *testing.F) {
	f.Add([]byte{0, 'v'}, uint8(0))
	f.Add(rec(store.DataPipeline, 0, rec(store.DataAppend, 0, []byte("a")), rec(store.DataExecute, 0, frame(lockc(1, "i", "x")))), uint8(1))
	f.Add(rec(store.DataExecute|0x40, 0x20, frame(with(lockc(1, "i", "x"), func(c *wc) { c.Data = setV }))), uint8(2))
	f.Add(rec(store.DataPush, 0x12, []byte{1, 0, 9}), uint8(3))
	f.Add(rec(store.DataPop, 0, u32(1)), uint8(4))
	f.Fuzz(func(t *testing.T, body []byte, mode uint8) {
		if len(body) < 2 {
			return // the codec closes the connection on N < 2
		}
		h := newLkh(t, store.LocksConfig{MaxValue: 4096})
		r := append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
		pipe := rec(store.DataPipeline, 0, r, r)
		l := with(lockc(1, "a", "k"), func(c *wc) { c.Rcount = 3; c.Count = 3; c.Expried = 1 })
		for i, c := range []store.LockCommand{
			with(l, func(c *wc) { c.Data = r }),
			with(l, func(c *wc) { c.Data = pipe }),
			with(l, func(c *wc) { c.Flag = 0x02; c.Data = r }),
			with(l, func(c *wc) { c.LockID = id16("b"); c.Data = r }),
			with(l, func(c *wc) { c.Kind = 2; c.Rcount = 1; c.Data = r }),
			with(l, func(c *wc) { c.Kind = 2; c.Data = pipe }),
		} {
			if mode&1 != 0 {
				c.DB = 7
			}
			rs := h.do(1, c)
			if len(rs) == 0 {
				t.Fatalf("command %d: no reply", i)
			}
			for _, e := range h.execs {
				if e.DB != c.DB || e.Owner != 1 {
					t.Fatalf("command %d: exec of db %d owner %d", i, e.DB, e.Owner)
				}
			}
		}
		h.advance(5e9)
	})
}

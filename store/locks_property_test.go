package store_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// The lock property test runs seeded random Locks and Unlocks (a subset of
// the flags: show, update, concurrent check, unlock head, cancel wait,
// requeue, priority, wait-while-unlocked, timeout-when-data, arrival-based
// holds, less-lock-version, reverse key on timeout and on expiry,
// keep-alive, never expiring, minute and millisecond units, SET and INCR
// records with and without PROCESS_FIRST_OR_LAST; not tree locks, EXECUTE
// and the other data commands, which have their own tests), clock
// advances with Expire and
// disconnects against a model written with slices from slock-protocol.md
// §4–§6, comparing every reply in order, the STATE of each database, each
// key's TTL, holders and queue and the next deadline, and running Check
// after every operation.

type pmItem struct {
	owner   store.Owner
	cmd     wc
	levels  int
	data    []byte
	arrived int64
	prio    int
	armed   bool // in the model's deadline set
	kept    bool // in kept[keptBy]
	keptBy  store.Owner
	due     int64
	seq     uint64
}

type pmKey struct {
	db      uint8
	key     [16]byte
	holders []*pmItem
	waiters []*pmItem
	value   []byte // record, nil for none
}

func (k *pmKey) levels() int {
	if k == nil {
		return 0
	}
	n := 0
	for _, h := range k.holders {
		n += h.levels
	}
	return n
}

func (k *pmKey) cur() []byte {
	if k == nil {
		return nil
	}
	return k.value
}

type pmName struct {
	db  uint8
	key [16]byte
}

type lockModel struct {
	keys         map[pmName]*pmKey
	st           map[uint8]*store.LockState
	kept         map[store.Owner][]*pmItem // keep-alive items, in the order they were kept
	gone         map[store.Owner]bool
	seq          uint64
	maxWK, maxWO int
	out          []store.LockReply
}

func newLockModel(maxWK, maxWO int) *lockModel {
	return &lockModel{keys: map[pmName]*pmKey{}, st: map[uint8]*store.LockState{}, kept: map[store.Owner][]*pmItem{},
		gone: map[store.Owner]bool{}, maxWK: maxWK, maxWO: maxWO}
}

func (m *lockModel) reply(o store.Owner, c *wc, res store.LockResult, id [16]byte, levels, lr int, v []byte) {
	m.out = append(m.out, store.LockReply{Owner: o, Kind: c.Kind, RequestID: c.RequestID, Result: res, DB: c.DB,
		LockID: id, Key: c.Key, Lcount: uint16(levels), Count: c.Count, Lrcount: uint8(lr), Rcount: c.Rcount, Value: bytes.Clone(v)})
}

// due is when v in flag's unit runs out counted from base.
func pmDue(base int64, v, flag uint16) int64 {
	if flag&0x0400 != 0 {
		return base + int64(v)*1e6
	}
	s := int64(v)
	if flag&0x0040 != 0 {
		s *= 60
	}
	return (base/sec + s + 1) * sec
}

func (m *lockModel) unkeep(it *pmItem) {
	if !it.kept {
		return
	}
	l := m.kept[it.keptBy]
	i := slices.Index(l, it)
	m.kept[it.keptBy] = slices.Delete(l, i, i+1)
	it.kept = false
}

func (m *lockModel) keep(it *pmItem) {
	m.kept[it.owner] = append(m.kept[it.owner], it)
	it.kept, it.keptBy = true, it.owner
}

func (m *lockModel) arm(it *pmItem, due int64) {
	m.seq++
	it.armed, it.due, it.seq = true, due, m.seq
}

func (m *lockModel) armHold(h *pmItem, base int64) {
	m.unkeep(h)
	h.armed = false
	switch {
	case h.cmd.ExpriedFlag&0x4000 != 0:
	case h.cmd.ExpriedFlag&0x8000 != 0 && !m.gone[h.owner]:
		m.keep(h)
	default:
		m.arm(h, pmDue(base, h.cmd.Expried, h.cmd.ExpriedFlag))
	}
}

func (m *lockModel) getKey(c *wc) *pmKey {
	n := pmName{c.DB, c.Key}
	k := m.keys[n]
	if k == nil {
		k = &pmKey{db: c.DB, key: c.Key}
		m.keys[n] = k
	}
	return k
}

func (m *lockModel) settle(k *pmKey) {
	if len(k.holders) == 0 && len(k.waiters) == 0 {
		delete(m.keys, pmName{k.db, k.key})
	}
}

// apply applies a SET or INCR record (the only ones generated).
func (m *lockModel) apply(k *pmKey, data []byte, fol bool) {
	if data == nil || data[5]&0x20 != 0 && !fol {
		return
	}
	switch data[4] {
	case store.DataSet:
		k.value = bytes.Clone(data)
	case store.DataIncr:
		var base int64
		if k.value != nil {
			var b [8]byte
			copy(b[:], k.value[6:])
			base = int64(binary.LittleEndian.Uint64(b[:]))
		}
		n := base + int64(binary.LittleEndian.Uint64(data[6:]))
		k.value = append([]byte{10, 0, 0, 0, 0, data[5] | 1}, binary.LittleEndian.AppendUint64(nil, uint64(n))...)
	}
}

func (m *lockModel) admits(k *pmKey, c *wc) bool {
	lv := k.levels()
	if lv == 0 {
		return true
	}
	head := k.holders[0]
	if c.Count == 0 {
		return false
	}
	return (c.Count == 0xFFFF || lv <= int(c.Count)) && (head.cmd.Count == 0xFFFF || lv <= int(head.cmd.Count)) &&
		(c.TimeoutFlag&0x4000 == 0 || pmVersion(c.LockID) <= pmVersion(head.cmd.LockID))
}

func pmVersion(id [16]byte) uint64 { return binary.LittleEndian.Uint64(id[:8]) }

func pmReversed(k [16]byte) [16]byte {
	slices.Reverse(k[:])
	return k
}

func (m *lockModel) waitersFull(k *pmKey, o store.Owner) bool {
	nw := 0
	for _, mk := range m.keys {
		for _, w := range mk.waiters {
			if w.owner == o {
				nw++
			}
		}
	}
	return k != nil && len(k.waiters) >= m.maxWK || nw >= m.maxWO
}

func (m *lockModel) lock(o store.Owner, c wc, now int64) {
	data := c.Data
	c.Data = nil
	if c.DB == 255 {
		m.reply(o, &c, store.LockUnknownDB, c.LockID, 0, 0, nil)
		return
	}
	m.state(c.DB) // a Lock creates the database
	k := m.keys[pmName{c.DB, c.Key}]
	lv := k.levels()
	if c.Flag&0x08 != 0 && c.Timeout == 0 && (c.Count < 0xFFFF && lv > int(c.Count) || c.TimeoutFlag&0x0200 != 0 && lv == 0) {
		m.reply(o, &c, store.LockTimeout, c.LockID, lv, 0, k.cur())
		return
	}
	if lv > 0 {
		var h *pmItem
		if c.Flag&0x01 != 0 {
			head := k.holders[0]
			if c.Flag&0x02 == 0 {
				m.out = append(m.out, store.LockReply{Owner: o, Kind: 1, RequestID: c.RequestID, Result: store.LockUnownError, DB: c.DB, LockID: head.cmd.LockID,
					Key: c.Key, Lcount: uint16(lv), Count: head.cmd.Count, Lrcount: uint8(head.levels), Rcount: head.cmd.Rcount, Value: bytes.Clone(k.value)})
				return
			}
			h = head
			c.LockID = head.cmd.LockID
		} else {
			for _, x := range k.holders {
				if x.cmd.LockID == c.LockID {
					h = x
				}
			}
		}
		if h != nil {
			m.relock(o, k, h, c, data, now)
			return
		}
	}
	admitted := lv == 0
	switch {
	case lv == 0 && c.TimeoutFlag&0x0200 != 0:
		if k != nil && len(k.waiters) > 0 && c.Count == 0 {
			m.reply(o, &c, store.LockUnownError, c.LockID, 0, 0, k.value)
			return
		}
		admitted = false
	case lv > 0 && len(k.waiters) == 0:
		admitted = m.admits(k, &c)
	case lv > 0 && c.TimeoutFlag&0x0010 != 0 && int(c.Rcount) > k.waiters[0].prio:
		admitted = m.admits(k, &c)
	}
	if admitted {
		k = m.getKey(&c)
		m.grant(o, k, c, data, now, now)
		if len(k.waiters) > 0 && c.Expried != 0 {
			m.wake(k, now)
		}
		m.settle(k)
		return
	}
	if c.TimeoutFlag&0x4000 != 0 && k != nil && len(k.holders) > 0 && pmVersion(c.LockID) < pmVersion(k.holders[0].cmd.LockID) {
		before := bytes.Clone(k.value)
		m.state(c.DB).LockCount++
		m.apply(k, data, lv == 1)
		m.reply(o, &c, store.LockOK, k.holders[0].cmd.LockID, lv, 0, before)
		return
	}
	if c.Timeout == 0 || c.TimeoutFlag&0x0008 != 0 && k != nil && k.value != nil || m.waitersFull(k, o) {
		m.reply(o, &c, store.LockTimeout, c.LockID, lv, 0, k.cur())
		return
	}
	k = m.getKey(&c)
	w := &pmItem{owner: o, cmd: c, data: data, arrived: now}
	m.enqueue(k, w)
}

func (m *lockModel) relock(o store.Owner, k *pmKey, h *pmItem, c wc, data []byte, now int64) {
	st := m.state(k.db)
	lv := k.levels()
	before := bytes.Clone(k.value)
	if c.Flag&0x02 != 0 {
		m.apply(k, data, lv == 1)
		keep := c.ExpriedFlag&0x4000 != 0 && c.Expried == 0xFFFF
		e, ef, was := h.cmd.Expried, h.cmd.ExpriedFlag, h.owner
		h.cmd, h.owner, h.arrived = c, o, now
		if !keep {
			m.armHold(h, now)
		} else {
			h.cmd.Expried, h.cmd.ExpriedFlag = e, ef
			if ef&0x8000 != 0 && ef&0x4000 == 0 && was != o && (h.kept || !m.gone[o]) {
				m.armHold(h, now)
			}
		}
		m.reply(o, &c, store.LockLockedError, c.LockID, lv, h.levels, before)
		return
	}
	if h.levels >= 255 || h.levels > int(c.Rcount) || c.TimeoutFlag&0x0010 != 0 {
		m.reply(o, &c, store.LockLockedError, c.LockID, lv, h.levels, k.value)
		return
	}
	st.LockCount++
	if c.Expried == 0 {
		m.reply(o, &c, store.LockOK, c.LockID, lv, h.levels, k.value)
		return
	}
	h.levels++
	st.LockedCount++
	h.cmd, h.owner, h.arrived = c, o, now
	m.apply(k, data, lv+1 == 1)
	m.armHold(h, now)
	m.reply(o, &c, store.LockOK, c.LockID, lv+1, h.levels, before)
}

func (m *lockModel) enqueue(k *pmKey, w *pmItem) {
	if w.cmd.TimeoutFlag&0x0010 != 0 {
		w.prio = int(w.cmd.Rcount)
	}
	i := len(k.waiters)
	for i > 0 && k.waiters[i-1].prio < w.prio {
		i--
	}
	k.waiters = slices.Insert(k.waiters, i, w)
	m.state(k.db).WaitCount++
	if w.cmd.TimeoutFlag&0x8000 != 0 && !m.gone[w.owner] {
		m.keep(w)
	} else {
		m.arm(w, pmDue(w.arrived, w.cmd.Timeout, w.cmd.TimeoutFlag))
	}
}

func (m *lockModel) grant(o store.Owner, k *pmKey, c wc, data []byte, arrived, now int64) {
	before := bytes.Clone(k.value)
	st := m.state(k.db)
	st.LockCount++
	if c.Expried == 0 {
		m.apply(k, data, k.levels() == 1)
		m.reply(o, &c, store.LockOK, c.LockID, k.levels(), 0, before)
		return
	}
	h := &pmItem{owner: o, cmd: c, levels: 1, arrived: arrived}
	k.holders = append(k.holders, h)
	st.LockedCount++
	m.apply(k, data, k.levels() == 1)
	base := now
	if c.TimeoutFlag&0x0100 != 0 {
		base = arrived
	}
	m.armHold(h, base)
	m.reply(o, &c, store.LockOK, c.LockID, k.levels(), 1, before)
}

func (m *lockModel) unqueue(k *pmKey, w *pmItem) {
	k.waiters = slices.DeleteFunc(k.waiters, func(x *pmItem) bool { return x == w })
	m.state(k.db).WaitCount--
	w.armed = false
	m.unkeep(w)
}

func (m *lockModel) wake(k *pmKey, now int64) {
	for len(k.waiters) > 0 && m.admits(k, &k.waiters[0].cmd) {
		w := k.waiters[0]
		m.unqueue(k, w)
		if i := slices.IndexFunc(k.holders, func(h *pmItem) bool { return h.cmd.LockID == w.cmd.LockID }); i >= 0 {
			m.relock(w.owner, k, k.holders[i], w.cmd, w.data, now)
			continue
		}
		m.grant(w.owner, k, w.cmd, w.data, w.arrived, now)
	}
}

func (m *lockModel) removeHolder(k *pmKey, h *pmItem) {
	k.holders = slices.DeleteFunc(k.holders, func(x *pmItem) bool { return x == h })
	m.state(k.db).LockedCount -= uint32(h.levels)
	h.armed = false
	m.unkeep(h)
}

func (m *lockModel) unlock(o store.Owner, c wc, now int64) {
	data := c.Data
	c.Data = nil
	st := m.st[c.DB]
	if c.DB == 255 || st == nil {
		m.reply(o, &c, store.LockUnknownDB, c.LockID, 0, 0, nil)
		return
	}
	k := m.keys[pmName{c.DB, c.Key}]
	if k == nil {
		st.UnlockErrorCount++
		m.reply(o, &c, store.LockUnlockError, c.LockID, 0, 0, nil)
		return
	}
	var h *pmItem
	for _, x := range k.holders {
		if x.cmd.LockID == c.LockID {
			h = x
		}
	}
	if h == nil {
		if c.Flag&0x02 != 0 {
			for _, w := range k.waiters {
				if w.cmd.LockID == c.LockID {
					m.unqueue(k, w)
					st.UnLockCount++
					m.reply(o, &c, store.LockLockedError, c.LockID, k.levels(), 0, k.value)
					m.reply(w.owner, &w.cmd, store.LockUnlockError, w.cmd.LockID, k.levels(), 0, k.value)
					m.settle(k)
					return
				}
			}
		}
		if len(k.holders) == 0 {
			st.UnlockErrorCount++
			m.reply(o, &c, store.LockUnlockError, c.LockID, 0, 0, k.value)
			return
		}
		if c.Flag&0x01 == 0 {
			st.UnlockErrorCount++
			res := store.LockUnownError
			if c.Flag&0x02 != 0 {
				res = store.LockUnlockError // nothing to cancel (§5.5)
			}
			m.reply(o, &c, res, c.LockID, k.levels(), 0, k.value)
			return
		}
		h = k.holders[0]
		hc := h.cmd
		c.LockID, c.Timeout, c.TimeoutFlag, c.Expried, c.ExpriedFlag, c.Count, c.Rcount =
			hc.LockID, hc.Timeout, hc.TimeoutFlag, hc.Expried, hc.ExpriedFlag, hc.Count, hc.Rcount
	}
	before := bytes.Clone(k.value)
	one := h.levels == 1
	full := one || c.Rcount == 0 || c.TimeoutFlag&0x0010 != 0
	lr := 0
	if full {
		st.UnLockCount += uint64(h.levels)
		m.removeHolder(k, h)
	} else {
		st.UnLockCount++
		h.levels--
		st.LockedCount--
		lr = h.levels
	}
	m.apply(k, data, k.levels() == 0 && len(k.waiters) == 0)
	requeue := c.Flag&0x08 != 0 && one && c.Timeout > 0
	id := c.LockID
	if requeue && h.cmd.TimeoutFlag&0x4000 != 0 {
		binary.LittleEndian.PutUint64(id[:8], pmVersion(id)+1)
	}
	m.reply(o, &c, store.LockOK, id, k.levels(), lr, before)
	if requeue {
		rc := h.cmd
		rc.LockID = id
		rc.Timeout, rc.TimeoutFlag, rc.Expried, rc.ExpriedFlag, rc.Count, rc.Rcount = c.Timeout, c.TimeoutFlag, c.Expried, c.ExpriedFlag, c.Count, c.Rcount
		if m.waitersFull(k, h.owner) {
			m.reply(h.owner, &rc, store.LockTimeout, id, k.levels(), 0, k.value)
		} else {
			m.enqueue(k, &pmItem{owner: h.owner, cmd: rc, arrived: now})
		}
	}
	m.wake(k, now)
	m.settle(k)
}

func (m *lockModel) expire(now int64) {
	for {
		var first *pmItem
		var fk *pmKey
		for _, k := range m.keys {
			for _, l := range [][]*pmItem{k.holders, k.waiters} {
				for _, it := range l {
					if it.armed && it.due <= now && (first == nil || it.due < first.due || it.due == first.due && it.seq < first.seq) {
						first, fk = it, k
					}
				}
			}
		}
		if first == nil {
			return
		}
		st := m.state(fk.db)
		if slices.Contains(fk.waiters, first) {
			m.unqueue(fk, first)
			st.TimeoutedCount++
			m.reply(first.owner, &first.cmd, store.LockTimeout, first.cmd.LockID, fk.levels(), 0, fk.value)
			m.settle(fk)
			if first.cmd.TimeoutFlag&0x0080 != 0 {
				c := first.cmd
				c.Key, c.TimeoutFlag, c.Data = pmReversed(c.Key), 0, first.data
				m.lock(first.owner, c, now)
			}
			continue
		}
		m.removeHolder(fk, first)
		st.ExpiredCount++
		var v []byte
		if len(fk.holders) > 0 || len(fk.waiters) > 0 {
			v = fk.value
		}
		c := first.cmd
		m.out = append(m.out, store.LockReply{Owner: first.owner, Kind: 1, RequestID: c.RequestID, Result: store.LockExpried, DB: fk.db, LockID: c.LockID,
			Key: fk.key, Lcount: uint16(fk.levels()), Count: c.Count, Rcount: c.Rcount, Value: bytes.Clone(v)})
		m.wake(fk, now)
		m.settle(fk)
		if c.ExpriedFlag&0x0080 != 0 {
			c.Key, c.ExpriedFlag, c.Expried = pmReversed(c.Key), 0, c.Timeout
			m.lock(first.owner, c, now)
		}
	}
}

func (m *lockModel) disconnected(o store.Owner, now int64) {
	if m.gone[o] {
		return
	}
	m.gone[o] = true
	for _, it := range m.kept[o] {
		it.kept = false
		if m.isWaiter(it) {
			m.arm(it, pmDue(now, it.cmd.Timeout, it.cmd.TimeoutFlag))
		} else {
			m.arm(it, pmDue(now, it.cmd.Expried, it.cmd.ExpriedFlag))
		}
	}
	delete(m.kept, o)
}

func (m *lockModel) isWaiter(it *pmItem) bool {
	for _, k := range m.keys {
		if slices.Contains(k.waiters, it) {
			return true
		}
	}
	return false
}

func (m *lockModel) state(db uint8) *store.LockState {
	st := m.st[db]
	if st == nil {
		st = &store.LockState{}
		m.st[db] = st
	}
	return st
}

// compare checks the Locks against the model: STATE (with KeyCount), the
// holders and queue and TTL of every key, the next deadline.
func (m *lockModel) compare(l *store.Locks, now int64) error {
	for db := uint8(0); db < 3; db++ {
		got, ok := l.State(db)
		want := m.st[db]
		if want == nil {
			if ok {
				return fmt.Errorf("db %d exists", db)
			}
			continue
		}
		w := *want
		for n := range m.keys {
			if n.db == db {
				w.KeyCount++
			}
		}
		if !ok || got != w {
			return fmt.Errorf("State(%d) = %+v, want %+v", db, got, w)
		}
	}
	var next int64 = -1
	for n, k := range m.keys {
		_, hs, st := l.ListLocked(n.db, n.key, nil)
		if len(k.holders) == 0 {
			if st != store.ListNoLock {
				return fmt.Errorf("key %s: listed holders %+v with none", name(n.key), hs)
			}
		} else {
			if len(hs) != len(k.holders) {
				return fmt.Errorf("key %s: %d holders, want %d", name(n.key), len(hs), len(k.holders))
			}
			for i, h := range k.holders {
				if hs[i].LockID != h.cmd.LockID || int(hs[i].Levels) != h.levels || hs[i].Command.RequestID != h.cmd.RequestID {
					return fmt.Errorf("key %s: holder %d is %s/%d, want %s/%d", name(n.key), i, name(hs[i].LockID), hs[i].Levels, name(h.cmd.LockID), h.levels)
				}
			}
			_, ws, _ := l.ListWait(n.db, n.key, nil)
			if len(ws) != len(k.waiters) {
				return fmt.Errorf("key %s: %d waiters, want %d", name(n.key), len(ws), len(k.waiters))
			}
			for i, w := range k.waiters {
				if ws[i].LockID != w.cmd.LockID || ws[i].Command.RequestID != w.cmd.RequestID {
					return fmt.Errorf("key %s: waiter %d is %s, want %s", name(n.key), i, name(ws[i].LockID), name(w.cmd.LockID))
				}
			}
			wt := int64(-1)
			if head := k.holders[0]; head.armed {
				wt = max(head.due-now, 0) / 1e6
			}
			if got := l.TTL(n.db, n.key, now); got != wt {
				return fmt.Errorf("key %s: TTL %d, want %d", name(n.key), got, wt)
			}
		}
		for _, list := range [][]*pmItem{k.holders, k.waiters} {
			for _, it := range list {
				if it.armed && (next < 0 || it.due < next) {
					next = it.due
				}
			}
		}
	}
	at, ok := l.NextDeadline()
	if ok != (next >= 0) || ok && at != next {
		return fmt.Errorf("NextDeadline = %d, %v; want %d", at, ok, next)
	}
	return nil
}

// randomLock returns a random command from the flag subset.
func randomLock(r *rand.Rand, seq uint16) (wc, store.Owner) {
	pick := func(vs ...uint16) uint16 { return vs[r.IntN(len(vs))] }
	bit := func(p int, b uint16) uint16 {
		if r.IntN(100) < p {
			return b
		}
		return 0
	}
	c := wc{LockCommand: store.LockCommand{Kind: 1, RequestID: rid(seq), DB: uint8(r.IntN(2))}}
	if r.IntN(200) == 0 {
		c.DB = 255
	}
	c.LockID = id16(string(rune('a' + r.IntN(4))))
	c.LockID[0] = byte(r.IntN(2)) // the less-lock-version
	c.Key = id16(string(rune('k' + r.IntN(3))))
	if r.IntN(100) < 40 {
		c.Kind = 2
		c.Flag = uint8(pick(0, 0, 0, 0x01, 0x02, 0x08))
		c.TimeoutFlag = bit(20, 0x4000)
		c.Rcount = uint8(pick(0, 1))
		c.Timeout, c.Expried = pick(0, 2), pick(1, 3)
	} else {
		c.Flag = uint8(pick(0, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x08))
		c.TimeoutFlag = bit(10, 0x0010) | bit(8, 0x0200) | bit(10, 0x8000) | bit(10, 0x0100) | bit(5, 0x0040) |
			bit(5, 0x0080) | bit(8, 0x4000) | bit(5, 0x0008)
		c.Timeout = pick(0, 1, 2, 3)
		if r.IntN(100) < 20 {
			c.TimeoutFlag |= 0x0400
			c.Timeout = pick(0, 300, 1500)
		}
		c.ExpriedFlag = bit(5, 0x4000) | bit(10, 0x8000) | bit(3, 0x0040) | bit(5, 0x0080)
		c.Expried = pick(0, 1, 2, 5, 0xFFFF)
		if r.IntN(100) < 20 {
			c.ExpriedFlag |= 0x0400
			c.Expried = pick(0, 200, 2500)
		}
		c.Count = pick(0, 0, 1, 2, 0xFFFF)
		c.Rcount = uint8(pick(0, 1, 2, 0xFF))
	}
	switch r.IntN(10) {
	case 0:
		c.Data = rec(store.DataSet, uint8(bit(30, 0x20)), []byte{byte(r.IntN(256))})
	case 1:
		c.Data = rec(store.DataIncr, uint8(bit(30, 0x20)), i64(int64(r.IntN(5))-2))
	}
	return c, store.Owner(1 + r.IntN(4))
}

func TestLocksModel(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runLocksModel(t, uint64(seed), 600) })
	}
}

func runLocksModel(t *testing.T, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, 0x10c5))
	maxWK, maxWO := 1+r.IntN(4), 1+r.IntN(6)
	l := store.NewLocks(store.LocksConfig{MaxWaitersPerKey: maxWK, MaxWaitersPerOwner: maxWO})
	m := newLockModel(maxWK, maxWO)
	now := at(0) + int64(r.IntN(1000))*1e6
	var log []string
	fail := func(f string, a ...any) {
		t.Helper()
		for _, s := range log[max(0, len(log)-25):] {
			t.Log(s)
		}
		t.Fatalf("seed %d: "+f, append([]any{seed}, a...)...)
	}
	for step := range steps {
		var got []store.LockReply
		m.out = nil
		switch n := r.IntN(100); {
		case n < 75:
			c, o := randomLock(r, uint16(step))
			log = append(log, fmt.Sprintf("%d @%d owner %d: %s", step, (now-at(0))/1e6, o, show(c.cmd())))
			sc := c.cmd()
			got, _ = l.Do(o, &sc, now, nil, nil)
			if c.Kind == 1 {
				m.lock(o, c, now)
			} else {
				m.unlock(o, c, now)
			}
		case n < 95:
			now += int64(r.IntN(2500)) * 1e6
			log = append(log, fmt.Sprintf("%d Expire @%d", step, (now-at(0))/1e6))
			got, _ = l.Expire(now, nil, nil)
			m.expire(now)
		default:
			o := store.Owner(1 + r.IntN(4))
			log = append(log, fmt.Sprintf("%d Disconnected(%d) @%d", step, o, (now-at(0))/1e6))
			l.Disconnected(o, now)
			m.disconnected(o, now)
		}
		if len(got) != len(m.out) {
			fail("step %d: %d replies, want %d:\n%v\n%v", step, len(got), len(m.out), showAll(got), showAll(m.out))
		}
		for i := range got {
			g, w := got[i], m.out[i]
			if !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) {
				fail("step %d: reply %d value %x, want %x", step, i, g.Value, w.Value)
			}
			if showReply(g) != showReply(w) || g.RequestID != w.RequestID || g.LockID != w.LockID || g.Key != w.Key {
				fail("step %d: reply %d\n  got  %s\n  want %s", step, i, showReply(got[i]), showReply(m.out[i]))
			}
		}
		if err := l.Check(); err != nil {
			fail("step %d: %v", step, err)
		}
		if err := m.compare(l, now); err != nil {
			fail("step %d: %v", step, err)
		}
	}
}

func showAll(rs []store.LockReply) string {
	var b bytes.Buffer
	for _, r := range rs {
		b.WriteString("  " + showReply(r) + "\n")
	}
	return b.String()
}

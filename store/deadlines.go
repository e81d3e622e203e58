package store

import (
	"fmt"
	"math"
)

// deadline is the handle a timed item embeds: when it is due, where it sits
// in its deadlines heap, and the item itself, which the heap hands back when
// it is due. The zero value is "not scheduled".
type deadline struct {
	at int64 // Unix nanoseconds; meaningful while scheduled
	i  int32 // 1 + index in the heap while scheduled, else 0
	it timer // the item embedding it, set when it is scheduled
}

// scheduled reports whether the item is in a deadlines heap.
func (d *deadline) scheduled() bool { return d.i != 0 }

// timer is what a deadlines heap holds: a pointer to an item embedding a
// deadline, which the heap updates as the item moves. The store's are a
// PoolCounter wait (*poolEntry), an slock wait or hold (*lockItem), an slock
// holder that will persist once held long enough (*agedItem), and the
// collections (*counterGC, *semaphoreGC); whoever pops one tells them apart
// by type.
type timer interface{ deadline() *deadline }

// deadlines is the store's one structure for things that happen at a time: a
// binary min-heap of items by deadline, earliest first, items with equal
// deadlines in the order they were added. Each item carries its own handle
// (an embedded deadline), so removing or moving an item is O(log n) without
// a search, and adding and removing allocate nothing once the heap slice has
// grown to the peak number of pending items.
//
// A heap beats a timing wheel here: the waits it holds are mostly cancelled
// long before they fire, which costs a wheel as little but makes it keep slots
// for every millisecond up to the longest timeout (2^32 s for PoolCounter) or
// cascade between levels; the heap needs no tuning, answers "when is the
// next one due" exactly, and stays O(log n) at any number of items.
//
// Additions are staged: an added item goes to the end of h, past the heap,
// and joins the heap only when someone asks what is due (next, pop). Most
// slock holds and waits end in the turn that made them (a Lock and its
// Unlock in one read): staged, such an item costs an append and a swap, and
// the heap is never sifted for it. Its deadline and order are fixed when it
// is added, so when it joins makes no difference to anyone.
type deadlines struct {
	h   []slot // h[:n] is the heap; h[n:] the items added since, in no order
	n   int
	seq uint64 // order of additions, to keep equal deadlines first in, first out
}

// slot is one heap element. The deadline is copied here so that sifting
// compares contiguous memory and touches an item's handle only to record its
// index, without a call.
type slot struct {
	at  int64
	seq uint64
	d   *deadline
}

// shrinkSlots is the smallest heap capacity given back when the heap falls to
// a quarter of it.
const shrinkSlots = 1024

func (s *slot) before(t *slot) bool {
	return s.at < t.at || s.at == t.at && s.seq < t.seq
}

// len returns the number of scheduled items.
func (q *deadlines) len() int { return len(q.h) }

// add schedules it, which must not be scheduled, at at. It is staged: it
// joins the heap at the next next or pop.
func (q *deadlines) add(it timer, at int64) {
	d := it.deadline()
	if d.i != 0 {
		panic("store: deadline added twice")
	}
	if len(q.h) == math.MaxInt32-1 {
		panic("store: too many deadlines")
	}
	d.at, d.it = at, it
	q.seq++
	q.h = append(q.h, slot{at: at, seq: q.seq, d: d})
	d.i = int32(len(q.h))
}

// settle moves the staged items into the heap.
func (q *deadlines) settle() {
	for q.n < len(q.h) {
		q.up(q.n)
		q.n++
	}
}

// remove unschedules it, reporting whether it was scheduled.
func (q *deadlines) remove(it timer) bool {
	d := it.deadline()
	if d.i == 0 {
		return false
	}
	q.cut(int(d.i) - 1)
	return true
}

// move reschedules it, scheduled or not, at at. It counts as a new addition
// among items with the same deadline.
func (q *deadlines) move(it timer, at int64) {
	d := it.deadline()
	if d.i == 0 {
		q.add(it, at)
		return
	}
	i := int(d.i) - 1
	d.at = at
	q.seq++
	q.h[i].at, q.h[i].seq = at, q.seq
	if i < q.n && !q.up(i) {
		q.down(i)
	}
}

// next returns the earliest deadline, and false if nothing is scheduled.
func (q *deadlines) next() (at int64, ok bool) {
	q.settle()
	if len(q.h) == 0 {
		return 0, false
	}
	return q.h[0].at, true
}

// peek returns the earliest item due at now (deadline <= now), and false if none
// is, leaving it scheduled.
func (q *deadlines) peek(now int64) (it timer, ok bool) {
	q.settle()
	if len(q.h) == 0 || q.h[0].at > now {
		return nil, false
	}
	return q.h[0].d.it, true
}

// pop unschedules and returns the earliest item due at now (deadline <= now),
// and false if none is.
func (q *deadlines) pop(now int64) (it timer, ok bool) {
	q.settle()
	if len(q.h) == 0 || q.h[0].at > now {
		return nil, false
	}
	it = q.h[0].d.it
	q.cut(0)
	return it, true
}

// cut removes the item at index i: a staged one is replaced by the last
// staged, one in the heap by the heap's last, whose place the last staged
// takes.
func (q *deadlines) cut(i int) {
	h := q.h
	h[i].d.i = 0
	last := len(h) - 1
	moved := -1 // where the heap's last went, to be sifted
	if i < q.n {
		q.n--
		if i != q.n {
			h[i] = h[q.n]
			h[i].d.i = int32(i + 1)
			moved = i
		}
		i = q.n // the hole left, filled by the last staged
	}
	if i != last {
		h[i] = h[last]
		h[i].d.i = int32(i + 1)
	}
	h[last] = slot{}
	q.h = h[:last]
	if moved >= 0 && !q.up(moved) {
		q.down(moved)
	}
	if cap(q.h) >= shrinkSlots && len(q.h) <= cap(q.h)/4 {
		q.h = append(make([]slot, 0, 2*len(q.h)), q.h...)
	}
}

// up moves the item at i towards the root while it is due before its parent
// and reports whether it moved.
func (q *deadlines) up(i int) bool {
	h := q.h
	s := h[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if !s.before(&h[p]) {
			break
		}
		h[i] = h[p]
		h[i].d.i = int32(i + 1)
		i = p
	}
	h[i] = s
	s.d.i = int32(i + 1)
	return i != start
}

// down moves the item at i, in the heap, towards the leaves while a child is
// due before it.
func (q *deadlines) down(i int) {
	h := q.h
	n := q.n
	s := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].before(&h[c]) {
			c = r
		}
		if !h[c].before(&s) {
			break
		}
		h[i] = h[c]
		h[i].d.i = int32(i + 1)
		i = c
	}
	h[i] = s
	s.d.i = int32(i + 1)
}

// check verifies the heap: the order, each item's handle pointing back at its
// slot with the same deadline and at the item, and no item in two slots.
func (q *deadlines) check() error {
	if q.n < 0 || q.n > len(q.h) {
		return fmt.Errorf("store: deadline heap: %d in the heap of %d", q.n, len(q.h))
	}
	seen := make(map[*deadline]bool, len(q.h))
	for i := range q.h {
		s := &q.h[i]
		d := s.d
		switch {
		case d == nil || d.it == nil || d.it.deadline() != d:
			return fmt.Errorf("store: deadline heap: item at %d has a handle that is not its own", i)
		case seen[d]:
			return fmt.Errorf("store: deadline heap: item at %d is also earlier in the heap", i)
		case int(d.i) != i+1:
			return fmt.Errorf("store: deadline heap: item at %d has handle %d", i, d.i)
		case d.at != s.at:
			return fmt.Errorf("store: deadline heap: item at %d due at %d, handle says %d", i, s.at, d.at)
		case s.seq > q.seq:
			return fmt.Errorf("store: deadline heap: item at %d added as %d of %d", i, s.seq, q.seq)
		case i > 0 && i < q.n && s.before(&q.h[(i-1)/2]):
			return fmt.Errorf("store: deadline heap: item at %d (due %d) before its parent (due %d)", i, s.at, q.h[(i-1)/2].at)
		}
		seen[d] = true
	}
	return nil
}

// HeapGrowth is what the next growth of the deadline heap's slice adds to Bytes at once (it
// doubles): a caller that counts down a headroom by what each command adds on average keeps
// it in reserve.
func (s *Store) HeapGrowth() int64 { return int64(cap(s.q.h)) * heapSlot }

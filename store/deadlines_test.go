package store

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// item is a test item for the deadline heap.
type item struct {
	dl deadline
	id int
}

func (it *item) deadline() *deadline { return &it.dl }

func items(n int) []*item {
	its := make([]*item, n)
	for i := range its {
		its[i] = &item{id: i}
	}
	return its
}

// popAll pops everything due at now and returns the ids in order.
func popAll(q *deadlines, now int64) []int {
	var ids []int
	for {
		t, ok := q.pop(now)
		if !ok {
			return ids
		}
		it := t.(*item)
		if it.dl.scheduled() {
			panic("popped item still scheduled")
		}
		ids = append(ids, it.id)
	}
}

func mustCheck(t *testing.T, q *deadlines) {
	t.Helper()
	if err := q.check(); err != nil {
		t.Fatal(err)
	}
}

func TestDeadlinesEmpty(t *testing.T) {
	var q deadlines
	if at, ok := q.next(); ok {
		t.Fatalf("next on empty heap = %d, true", at)
	}
	if it, ok := q.pop(1 << 62); ok {
		t.Fatalf("pop on empty heap = item %d", it.(*item).id)
	}
	if q.remove(&item{}) {
		t.Fatal("remove of an unscheduled item reported true")
	}
}

func TestDeadlinesOrder(t *testing.T) {
	var q deadlines
	its := items(6)
	for i, at := range []int64{50, 10, 40, 10, 30, 20} {
		q.add(its[i], at)
		mustCheck(t, &q)
	}
	if at, ok := q.next(); !ok || at != 10 {
		t.Fatalf("next = %d, %v; want 10, true", at, ok)
	}
	if got := popAll(&q, 9); got != nil {
		t.Fatalf("pop at 9 gave %v, want nothing", got)
	}
	// Equal deadlines come out in the order they were added.
	if got, want := popAll(&q, 30), []int{1, 3, 5, 4}; !slices.Equal(got, want) {
		t.Fatalf("pop at 30 = %v, want %v", got, want)
	}
	mustCheck(t, &q)
	if got, want := popAll(&q, 1000), []int{2, 0}; !slices.Equal(got, want) {
		t.Fatalf("pop at 1000 = %v, want %v", got, want)
	}
	if q.len() != 0 {
		t.Fatalf("len %d after popping everything", q.len())
	}
}

func TestDeadlinesRemoveAndMove(t *testing.T) {
	var q deadlines
	its := items(5)
	for i, it := range its {
		q.add(it, int64(10*(i+1))) // 10 20 30 40 50
	}
	if !q.remove(its[0]) || !q.remove(its[3]) {
		t.Fatal("remove of a scheduled item reported false")
	}
	if its[0].dl.scheduled() || its[3].dl.scheduled() {
		t.Fatal("removed item still scheduled")
	}
	if q.remove(its[0]) {
		t.Fatal("second remove reported true")
	}
	mustCheck(t, &q)
	q.move(its[4], 5)  // first now
	q.move(its[1], 60) // last now
	q.move(its[0], 30) // unscheduled: added, after item 2 at 30
	mustCheck(t, &q)
	if at, _ := q.next(); at != 5 {
		t.Fatalf("next = %d, want 5", at)
	}
	if got, want := popAll(&q, 100), []int{4, 2, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("pop = %v, want %v", got, want)
	}
}

func TestDeadlinesAddTwicePanics(t *testing.T) {
	var q deadlines
	it := &item{}
	q.add(it, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("second add did not panic")
		}
	}()
	q.add(it, 2)
}

// TestDeadlinesModel runs random adds, removes, moves and pops against a
// slice sorted by (deadline, order of addition).
func TestDeadlinesModel(t *testing.T) {
	type want struct {
		at, seq int64
		it      *item
	}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 99))
		var q deadlines
		its := items(1 + r.IntN(300))
		var model []want
		var seq, now int64
		find := func(it *item) int {
			return slices.IndexFunc(model, func(w want) bool { return w.it == it })
		}
		sortModel := func() {
			slices.SortFunc(model, func(a, b want) int {
				return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
			})
		}
		for op := range 3000 {
			it := its[r.IntN(len(its))]
			switch r.IntN(5) {
			case 0, 1: // add or move
				at := now + r.Int64N(100)
				seq++
				if i := find(it); i >= 0 {
					q.move(it, at)
					model[i] = want{at, seq, it}
				} else {
					q.add(it, at)
					model = append(model, want{at, seq, it})
				}
				sortModel()
			case 2:
				i := find(it)
				if got := q.remove(it); got != (i >= 0) {
					t.Fatalf("seed %d op %d: remove = %v, scheduled %v", seed, op, got, i >= 0)
				}
				if i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
			case 3:
				now += r.Int64N(30)
				got := popAll(&q, now)
				var exp []int
				for len(model) > 0 && model[0].at <= now {
					exp = append(exp, model[0].it.id)
					model = model[1:]
				}
				if !slices.Equal(got, exp) {
					t.Fatalf("seed %d op %d: pop at %d = %v, want %v", seed, op, now, got, exp)
				}
			case 4:
				at, ok := q.next()
				if ok != (len(model) > 0) || ok && at != model[0].at {
					t.Fatalf("seed %d op %d: next = %d, %v; model %v", seed, op, at, ok, model)
				}
			}
			if q.len() != len(model) {
				t.Fatalf("seed %d op %d: len %d, model %d", seed, op, q.len(), len(model))
			}
			mustCheck(t, &q)
		}
	}
}

// TestDeadlinesShrink: a heap that grew large gives most of it back once it
// empties, and still works.
func TestDeadlinesShrink(t *testing.T) {
	var q deadlines
	its := items(100000)
	for i, it := range its {
		q.add(it, int64(i))
	}
	big := cap(q.h)
	for _, it := range its[:len(its)-10] {
		q.remove(it)
	}
	if cap(q.h) >= big/4 || cap(q.h) < q.len() {
		t.Fatalf("cap %d with %d items, was %d", cap(q.h), q.len(), big)
	}
	mustCheck(t, &q)
	if got := popAll(&q, 1<<62); len(got) != 10 || got[0] != len(its)-10 {
		t.Fatalf("pop after shrinking = %v", got)
	}
}

func TestDeadlinesNoAllocs(t *testing.T) {
	var q deadlines
	its := items(1000)
	for i, it := range its {
		q.add(it, int64(i*7%1000))
	}
	now := int64(0)
	n := testing.AllocsPerRun(10000, func() {
		it := its[now%1000]
		q.remove(it)
		q.add(it, now+1000)
		q.move(its[(now*13)%1000], now+500)
		now++
		for {
			it, ok := q.pop(now - 1)
			if !ok {
				break
			}
			q.add(it, now+1000)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per remove/add/move/pop", n)
	}
	mustCheck(t, &q)
}

// BenchmarkDeadlines: with 100,000 pending items, cancel one and schedule
// another (the common case for waits), or pop one that is due and reschedule it.
func BenchmarkDeadlines(b *testing.B) {
	const n = 100000
	r := rand.New(rand.NewPCG(1, 2))
	setup := func() (*deadlines, []*item) {
		q := &deadlines{}
		its := items(n)
		for _, it := range its {
			q.add(it, r.Int64N(n))
		}
		return q, its
	}
	b.Run("remove+add", func(b *testing.B) {
		q, its := setup()
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			it := its[i%n]
			q.remove(it)
			q.add(it, int64(i%n)+r.Int64N(n))
			i++
		}
	})
	b.Run("pop+add", func(b *testing.B) {
		q, _ := setup()
		now := int64(0)
		b.ReportAllocs()
		for b.Loop() {
			it, ok := q.pop(1 << 62)
			if !ok {
				b.Fatal("empty")
			}
			now++
			q.add(it, now+n)
		}
	})
}

// TestDeadlinesStaged: an added item waits past the heap until someone asks
// what is due, so one removed before that never touches the heap; removing
// from the heap while items are staged keeps both parts whole, and the order
// is the same as if every item had joined the heap when added.
func TestDeadlinesStaged(t *testing.T) {
	var q deadlines
	its := items(8)
	for i, at := range []int64{50, 40, 30} {
		q.add(its[i], at)
	}
	if q.n != 0 || q.len() != 3 {
		t.Fatalf("after three adds: %d in the heap, %d scheduled; want 0, 3", q.n, q.len())
	}
	mustCheck(t, &q)
	if !q.remove(its[1]) || q.n != 0 || q.len() != 2 {
		t.Fatalf("staged remove: %d in the heap, %d scheduled; want 0, 2", q.n, q.len())
	}
	mustCheck(t, &q)
	if at, ok := q.next(); !ok || at != 30 || q.n != 2 {
		t.Fatalf("next = %d, %v with %d in the heap; want 30, true, 2", at, ok, q.n)
	}
	q.add(its[3], 10) // staged, earlier than everything in the heap
	q.add(its[4], 30) // staged, ties with its[2]: after it
	q.move(its[4], 20)
	q.add(its[5], 20) // ties with its[4], added after it
	if !q.remove(its[2]) || q.n != 1 || q.len() != 4 {
		t.Fatalf("heap remove with staged items: %d in the heap, %d scheduled; want 1, 4", q.n, q.len())
	}
	mustCheck(t, &q)
	if got, want := popAll(&q, 100), []int{3, 4, 5, 0}; !slices.Equal(got, want) {
		t.Fatalf("pop = %v, want %v", got, want)
	}
	mustCheck(t, &q)
}

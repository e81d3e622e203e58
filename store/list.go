package store

// links are the pointers an item of a list carries, so that linking it never allocates.
type links[T any] struct{ prev, next *T }

// linked is an item type that can be on a list: a pointer to a struct embedding links.
type linked[T any] interface {
	*T
	link() *links[T]
}

// list is a doubly linked FIFO of items that carry their own links.
type list[T any, P linked[T]] struct {
	head, tail *T
	n          int
}

// push puts it at the back.
func (l *list[T, P]) push(it *T) {
	ln := P(it).link()
	ln.prev, ln.next = l.tail, nil
	if l.tail != nil {
		P(l.tail).link().next = it
	} else {
		l.head = it
	}
	l.tail = it
	l.n++
}

// insertAfter puts it after at, which is on l, or first if at is nil.
func (l *list[T, P]) insertAfter(at, it *T) {
	ln := P(it).link()
	if at == nil {
		ln.prev, ln.next = nil, l.head
	} else {
		ln.prev, ln.next = at, P(at).link().next
	}
	if ln.prev != nil {
		P(ln.prev).link().next = it
	} else {
		l.head = it
	}
	if ln.next != nil {
		P(ln.next).link().prev = it
	} else {
		l.tail = it
	}
	l.n++
}

// remove takes it, which is on l, off it.
func (l *list[T, P]) remove(it *T) {
	ln := P(it).link()
	if ln.prev != nil {
		P(ln.prev).link().next = ln.next
	} else {
		l.head = ln.next
	}
	if ln.next != nil {
		P(ln.next).link().prev = ln.prev
	} else {
		l.tail = ln.prev
	}
	ln.prev, ln.next = nil, nil
	l.n--
}

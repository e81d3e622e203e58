package store_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/store"
)

// id16 maps a short name to a 16-byte id the way slock's text protocol
// does: right-aligned, zero-padded.
func id16(s string) (id [16]byte) {
	if len(s) > 16 {
		panic("id16: name longer than 16 bytes")
	}
	copy(id[16-len(s):], s)
	return id
}

// rid is RequestId number n.
func rid(n uint16) (id [16]byte) {
	binary.BigEndian.PutUint16(id[14:], n)
	return id
}

// lockc is a Lock: wait 5 s, hold 10 s, exclusive, not reentrant.
func lockc(req uint16, id, key string) store.LockCommand {
	return wc{LockCommand: store.LockCommand{Kind: 1, RequestID: rid(req), LockID: id16(id), Key: id16(key)}, Timeout: 5, Expried: 10}.cmd()
}

// unlockc is an Unlock with the same defaults.
func unlockc(req uint16, id, key string) store.LockCommand {
	c := lockc(req, id, key)
	c.Kind = 2
	return c
}

// wc is a LockCommand as the tests write it: with slock's flag byte and
// time words, which lockwire translates.
type wc struct {
	store.LockCommand
	Flag                                       uint8
	Timeout, TimeoutFlag, Expried, ExpriedFlag uint16
}

// cmd returns the store's command for w.
func (w wc) cmd() store.LockCommand {
	c := w.LockCommand
	lockwire.Set(&c, lockwire.Words{Flag: w.Flag, Timeout: w.Timeout, TimeoutFlag: w.TimeoutFlag,
		Expried: w.Expried, ExpriedFlag: w.ExpriedFlag})
	return c
}

// wire returns c with its words.
func wire(c store.LockCommand) wc {
	x := lockwire.Of(&c)
	return wc{c, x.Flag, x.Timeout, x.TimeoutFlag, x.Expried, x.ExpriedFlag}
}

// with returns c changed by f, which sees it in wire words.
func with(c store.LockCommand, f func(*wc)) store.LockCommand {
	w := wire(c)
	f(&w)
	return w.cmd()
}

// rec is a data record: command byte, flag, value (no properties).
func rec(cmd, flag byte, value ...[]byte) []byte {
	return recp(cmd, flag, nil, value...)
}

// recp is a data record with a property area (props without its u16 P);
// flag 0x10 is set for a non-nil props.
func recp(cmd, flag byte, props []byte, value ...[]byte) []byte {
	var body []byte
	body = append(body, cmd, flag)
	if props != nil {
		body[1] |= 0x10
		body = binary.LittleEndian.AppendUint16(body, uint16(len(props)))
		body = append(body, props...)
	}
	for _, v := range value {
		body = append(body, v...)
	}
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func i64(n int64) []byte  { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }
func u32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

// elems is an array value: each element as u32 length and bytes.
func elems(es ...string) []byte {
	var b []byte
	for _, e := range es {
		b = append(u32At(b, uint32(len(e))), e...)
	}
	return b
}

func u32At(b []byte, n uint32) []byte { return binary.LittleEndian.AppendUint32(b, n) }

// frame encodes c as a 64-byte slock request frame, followed by its data
// record if it has one (flag 0x20 is then set).
func frame(sc store.LockCommand) []byte {
	c := wire(sc)
	b := make([]byte, 64)
	b[0], b[1], b[2] = 0x56, 0x01, uint8(c.Kind)
	copy(b[3:19], c.RequestID[:])
	b[19], b[20] = c.Flag, c.DB
	copy(b[21:37], c.LockID[:])
	copy(b[37:53], c.Key[:])
	le := binary.LittleEndian
	le.PutUint16(b[53:], c.Timeout)
	le.PutUint16(b[55:], c.TimeoutFlag)
	le.PutUint16(b[57:], c.Expried)
	le.PutUint16(b[59:], c.ExpriedFlag)
	le.PutUint16(b[61:], c.Count)
	b[63] = c.Rcount
	if c.Data != nil {
		b[19] |= 0x20
		b = append(b, c.Data...)
	}
	return b
}

// unframe decodes a frame made by frame (or handed back as an Exec).
func unframe(b []byte) store.LockCommand {
	le := binary.LittleEndian
	c := wc{LockCommand: store.LockCommand{Kind: store.LockKind(b[2]), DB: b[20], Count: le.Uint16(b[61:]), Rcount: b[63]}, Flag: b[19], Timeout: le.Uint16(b[53:]), TimeoutFlag: le.Uint16(b[55:]), Expried: le.Uint16(b[57:]), ExpriedFlag: le.Uint16(b[59:])}.cmd()
	copy(c.RequestID[:], b[3:19])
	copy(c.LockID[:], b[21:37])
	copy(c.Key[:], b[37:53])
	if b[19]&0x20 != 0 {
		c.Data = b[64:]
	}
	return c
}

// lkh drives a Locks with a fake clock, checking its invariants after every
// call and keeping copies of what each call returned.
type lkh struct {
	t     *testing.T
	l     *store.Locks
	now   int64
	execs []store.Exec
}

func newLkh(t *testing.T, cfg store.LocksConfig) *lkh {
	return &lkh{t: t, l: store.NewLocks(cfg), now: at(0)}
}

func (h *lkh) check(what string) {
	h.t.Helper()
	if err := h.l.Check(); err != nil {
		h.t.Fatalf("after %s: %v", what, err)
	}
}

// keep copies what a call returned, whose bytes the next call reuses.
func (h *lkh) keep(rs []store.LockReply, ex []store.Exec) []store.LockReply {
	out := make([]store.LockReply, len(rs))
	for i, r := range rs {
		if r.Value != nil {
			r.Value = bytes.Clone(r.Value)
		}
		out[i] = r
	}
	h.execs = h.execs[:0]
	for _, e := range ex {
		e.Frame = bytes.Clone(e.Frame)
		h.execs = append(h.execs, e)
	}
	return out
}

// do runs c from owner o at the current time.
func (h *lkh) do(o store.Owner, c store.LockCommand) []store.LockReply {
	h.t.Helper()
	rs, ex := h.l.Do(o, &c, h.now, nil, nil)
	h.check(fmt.Sprintf("Do(%d, %s)", o, show(c)))
	return h.keep(rs, ex)
}

// advance moves the clock by d and runs Expire.
func (h *lkh) advance(d time.Duration) []store.LockReply {
	h.t.Helper()
	h.now += int64(d)
	rs, ex := h.l.Expire(h.now, nil, nil)
	h.check(fmt.Sprintf("Expire at +%v", time.Duration(h.now-at(0))))
	return h.keep(rs, ex)
}

// one runs c from o and fails unless it gets exactly the replies want.
func (h *lkh) one(o store.Owner, c store.LockCommand, want ...rp) {
	h.t.Helper()
	expect(h.t, show(c), h.do(o, c), want...)
}

// state fails unless database db's STATE is want.
func (h *lkh) state(db uint8, want store.LockState) {
	h.t.Helper()
	got, ok := h.l.State(db)
	if !ok || got != want {
		h.t.Fatalf("State(%d) = %+v, %v; want %+v", db, got, ok, want)
	}
}

// rp is an expected reply; req -1 matches any RequestId.
type rp struct {
	o       store.Owner
	t       store.LockKind // 0 means 1
	req     int
	res     store.LockResult
	db      uint8
	id, key string
	lc, c   uint16
	lr, rc  uint8
	v       []byte
	rawID   *[16]byte // instead of id
	rawKey  *[16]byte // instead of key
}

func (w rp) reply() store.LockReply {
	r := store.LockReply{Owner: w.o, Kind: w.t, Result: w.res, DB: w.db, LockID: id16(w.id), Key: id16(w.key),
		Lcount: w.lc, Count: w.c, Lrcount: w.lr, Rcount: w.rc, Value: w.v}
	if r.Kind == 0 {
		r.Kind = 1
	}
	if w.req >= 0 {
		r.RequestID = rid(uint16(w.req))
	}
	if w.rawID != nil {
		r.LockID = *w.rawID
	}
	if w.rawKey != nil {
		r.Key = *w.rawKey
	}
	return r
}

// expect fails unless got is exactly want, in order.
func expect(t *testing.T, what string, got []store.LockReply, want ...rp) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		w := want[i].reply()
		g := got[i]
		if want[i].req < 0 {
			g.RequestID = w.RequestID
		}
		ok = g.Owner == w.Owner && g.Kind == w.Kind && g.RequestID == w.RequestID && g.Result == w.Result &&
			g.DB == w.DB && g.LockID == w.LockID && g.Key == w.Key && g.Lcount == w.Lcount && g.Count == w.Count &&
			g.Lrcount == w.Lrcount && g.Rcount == w.Rcount && bytes.Equal(g.Value, w.Value) && (g.Value == nil) == (w.Value == nil)
	}
	if !ok {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: replies\n", what)
		for _, g := range got {
			fmt.Fprintf(&b, "  got  %s\n", showReply(g))
		}
		for _, w := range want {
			fmt.Fprintf(&b, "  want %s\n", showReply(w.reply()))
		}
		t.Fatal(b.String())
	}
}

// name shows a 16-byte id as the text it was made from when it is one.
func name(id [16]byte) string {
	s := strings.TrimLeft(string(id[:]), "\x00")
	for _, r := range s {
		if r < ' ' || r > '~' {
			return fmt.Sprintf("%x", id)
		}
	}
	return s
}

func show(sc store.LockCommand) string {
	c := wire(sc)
	return fmt.Sprintf("{type %d req %x flag %#x db %d id %s key %s timeout %d/%#x expried %d/%#x count %d rcount %d data %x}",
		c.Kind, c.RequestID[12:], c.Flag, c.DB, name(c.LockID), name(c.Key), c.Timeout, c.TimeoutFlag,
		c.Expried, c.ExpriedFlag, c.Count, c.Rcount, c.Data)
}

func showReply(r store.LockReply) string {
	return fmt.Sprintf("{owner %d type %d req %x result %v db %d id %s key %s lcount %d count %d lrcount %d rcount %d value %x(nil %v)}",
		r.Owner, r.Kind, r.RequestID[12:], r.Result, r.DB, name(r.LockID), name(r.Key), r.Lcount, r.Count,
		r.Lrcount, r.Rcount, r.Value, r.Value == nil)
}

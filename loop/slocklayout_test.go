package loop

// The lock store keeps its own outcome type and its own, unexported copies of slock's
// data-record layout (store imports only the standard library; proto/slock exports the wire
// values). These tests fail if the two ever disagree: the outcome table is checked name by
// name, and the layout by driving the store with records built from proto/slock's constants
// and reading what it kept with proto/slock's decoders.

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// TestSlockResultTable: every store outcome a frame can carry has its own wire code, of the
// same name. An Add's own outcomes (not an integer, overflow) reach only the Redis-text side,
// which answers them as Redis errors.
func TestSlockResultTable(t *testing.T) {
	seen := map[slock.Result]store.LockResult{}
	for r := range store.NumLockResults {
		if r == store.LockNotInteger || r == store.LockOverflow {
			continue
		}
		w := slockResults[r]
		if prev, dup := seen[w]; dup {
			t.Errorf("%v and %v both map to %v", prev, r, w)
		}
		seen[w] = r
		name := strings.TrimPrefix(r.String(), "Lock")
		if !strings.EqualFold(name, strings.ReplaceAll(w.String(), "_", "")) {
			t.Errorf("%v maps to %d (%v)", r, uint8(w), w)
		}
	}
}

// layoutRig drives a store.Locks with frames built by proto/slock, converted as the loop
// converts them.
type layoutRig struct {
	t   *testing.T
	l   *store.Locks
	now int64
	req uint16
	rs  []store.LockReply
	ex  []store.Exec
}

// do runs one Lock or Unlock on database 0 and returns its own reply.
func (g *layoutRig) do(typ slock.Type, flag uint8, id, key string, count, expried uint16, data []byte) store.LockReply {
	g.t.Helper()
	g.req++
	f := slock.Frame{Type: typ, Flag: flag, LockID: key16(id), Key: key16(key), Expried: expried, Count: count, Data: data}
	binary.BigEndian.PutUint16(f.RequestID[14:], g.req)
	cmd := frameCommand(&f)
	g.rs, g.ex = g.l.Do(1, &cmd, g.now, g.rs[:0], g.ex[:0])
	for _, r := range g.rs {
		if r.RequestID == f.RequestID {
			return r
		}
	}
	g.t.Fatalf("%v %s on %s: no reply of its own in %d", typ, id, key, len(g.rs))
	return store.LockReply{}
}

// ok runs do and fails unless the store answers LockOK, or LockLockedError for an Update.
func (g *layoutRig) ok(typ slock.Type, flag uint8, id, key string, count, expried uint16, data []byte) {
	g.t.Helper()
	want := store.LockOK
	if typ == slock.TypeLock && flag&0x02 != 0 {
		want = store.LockLockedError
	}
	if r := g.do(typ, flag, id, key, count, expried, data); r.Result != want {
		g.t.Fatalf("%v %s on %s: %v, want %v", typ, id, key, r.Result, want)
	}
}

// value parses the record key holds; ok is false when it holds none.
func (g *layoutRig) value(key string) (d slock.Data, ok bool) {
	g.t.Helper()
	rec := g.l.Value(0, key16(key))
	if rec == nil {
		return d, false
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil {
		g.t.Fatalf("value of %s: %v", key, err)
	}
	return d, true
}

func (g *layoutRig) wantString(key, want string) {
	g.t.Helper()
	d, ok := g.value(key)
	if !ok || string(d.Value) != want || slock.DataKind(d.Flag) != slock.KindString {
		g.t.Fatalf("value of %s: %q (flag %#x, present %v), want the string %q", key, d.Value, d.Flag, ok, want)
	}
}

func i64le(v int64) []byte  { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
func u32le(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// data is a stage-0 record of cmd with flag.
func data(cmd, flag uint8, value []byte) []byte {
	return slock.AppendDataRecord(nil, cmd, slock.StageCurrent, flag, nil, value)
}

const update = 0x02 // Lock flag: update the holder

// TestSlockDataLayoutAgrees: each data command, stage and flag bit of proto/slock has the
// effect the store gives its own constant of that name.
func TestSlockDataLayoutAgrees(t *testing.T) {
	g := &layoutRig{t: t, l: store.NewLocks(store.LocksConfig{}), now: 1000e9}
	lk, un := slock.TypeLock, slock.TypeUnlock

	// SET, APPEND, SHIFT, UNSET: "a" holds "str" and updates it.
	g.ok(lk, 0, "a", "str", 0, 100, data(slock.DataSet, 0, []byte("abc")))
	g.wantString("str", "abc")
	g.ok(lk, update, "a", "str", 0, 100, data(slock.DataAppend, 0, []byte("de")))
	g.wantString("str", "abcde")
	g.ok(lk, update, "a", "str", 0, 100, data(slock.DataShift, 0, u32le(2)))
	g.wantString("str", "cde")
	g.ok(lk, update, "a", "str", 0, 100, data(slock.DataUnset, 0, nil))
	if d, ok := g.value("str"); ok {
		t.Fatalf("value after UNSET: %q", d.Value)
	}

	// INCR makes a number: DataNumber.
	g.ok(lk, 0, "a", "num", 0, 100, data(slock.DataIncr, 0, i64le(5)))
	g.ok(lk, update, "a", "num", 0, 100, data(slock.DataIncr, 0, i64le(-2)))
	if d, ok := g.value("num"); !ok || d.Flag&slock.DataNumber == 0 || slock.DataKind(d.Flag) != slock.KindNumber || slock.Number(d.Value) != 3 {
		t.Fatalf("value after INCR 5, INCR -2: %x (flag %#x, present %v), want the number 3", d.Value, d.Flag, ok)
	}

	// PUSH makes an array: DataArray; POP drops from the front.
	g.ok(lk, 0, "a", "arr", 0, 100, data(slock.DataPush, 0, []byte("x")))
	g.ok(lk, update, "a", "arr", 0, 100, data(slock.DataPush, 0, []byte("y")))
	g.ok(lk, update, "a", "arr", 0, 100, data(slock.DataPush, 0, []byte("z")))
	g.ok(lk, update, "a", "arr", 0, 100, data(slock.DataPop, 0, u32le(1)))
	d, ok := g.value("arr")
	if !ok || d.Flag&slock.DataArray == 0 || slock.DataKind(d.Flag) != slock.KindArray {
		t.Fatalf("value after PUSH x, y, z, POP 1: flag %#x, present %v; want an array", d.Flag, ok)
	}
	var elems []string
	for v := d.Value; len(v) > 0; {
		el, rest, ok := slock.NextElem(v)
		if !ok {
			t.Fatalf("array value %x is malformed", d.Value)
		}
		elems, v = append(elems, string(el)), rest
	}
	if strings.Join(elems, ",") != "y,z" {
		t.Fatalf("array after PUSH x, y, z, POP 1: %q, want [y z]", elems)
	}

	// A property area (DataProps) is kept apart from the value: a SHIFT takes from the value.
	withKey := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0,
		[]slock.Property{{Code: slock.PropKey, Value: []byte("human name")}}, []byte("vw"))
	g.ok(lk, 0, "a", "props", 0, 100, withKey)
	g.wantString("props", "vw")
	g.ok(lk, update, "a", "props", 0, 100, data(slock.DataShift, 0, u32le(1)))
	g.wantString("props", "w")
	d, _ = g.value("props")
	if name, ok := slock.Prop(d.Props, slock.PropKey); d.Flag&slock.DataProps == 0 || !ok || string(name) != "human name" {
		t.Fatalf("properties %x (flag %#x): key %q, %v", d.Props, d.Flag, name, ok)
	}

	// PIPELINE runs its elements: a SHIFT that changes nothing, then a SET.
	pipe := append(data(slock.DataShift, 0, u32le(0)), data(slock.DataSet, 0, []byte("piped"))...)
	g.ok(lk, 0, "a", "pipe", 0, 100, data(slock.DataPipeline, 0, pipe))
	g.wantString("pipe", "piped")

	// PROCESS_FIRST_OR_LAST (DataFirstOrLast): only the first level's record applies.
	g.ok(lk, 0, "x", "fol", 5, 100, data(slock.DataSet, slock.DataFirstOrLast, []byte("first")))
	g.ok(lk, 0, "y", "fol", 5, 100, data(slock.DataSet, slock.DataFirstOrLast, []byte("second")))
	g.wantString("fol", "first")
	g.ok(lk, 0, "z", "fol", 5, 100, data(slock.DataSet, 0, []byte("third")))
	g.wantString("fol", "third")

	// EXECUTE, at each stage: now (StageCurrent), at the Unlock that releases the holder
	// (StageUnlock), at its expiry (StageExpried), never on a standalone server
	// (StageTimeout).
	inner := slock.AppendLockRequest(nil, &slock.Frame{Type: slock.TypeLock, LockID: key16("inner"),
		Key: key16("target"), Expried: 10})
	exec := func(stage uint8) []byte {
		return slock.AppendDataRecord(nil, slock.DataExecute, stage, 0, nil, inner)
	}
	wantExec := func(what string, n int) {
		t.Helper()
		if len(g.ex) != n {
			t.Fatalf("%s: %d EXECUTEs, want %d", what, len(g.ex), n)
		}
		if n == 1 && !bytes.Equal(g.ex[0].Frame, inner) {
			t.Fatalf("%s: EXECUTE frame % x, want % x", what, g.ex[0].Frame, inner)
		}
	}
	g.ok(lk, 0, "e", "now", 0, 100, exec(slock.StageCurrent))
	wantExec("StageCurrent at the lock", 1)

	g.ok(lk, 0, "e", "at-unlock", 0, 100, exec(slock.StageUnlock))
	wantExec("StageUnlock at the lock", 0)
	g.ok(lk, 0, "e", "at-expiry", 0, 1, exec(slock.StageExpried))
	wantExec("StageExpried at the lock", 0)
	g.ok(lk, 0, "e", "never", 0, 1, exec(slock.StageTimeout))
	wantExec("StageTimeout at the lock", 0)

	g.ok(un, 0, "e", "at-unlock", 0, 100, nil)
	wantExec("StageUnlock at the unlock", 1)

	g.rs, g.ex = g.l.Expire(g.now+2e9, g.rs[:0], g.ex[:0])
	if len(g.rs) != 2 {
		t.Fatalf("expiry: %d replies, want 2 (at-expiry and never)", len(g.rs))
	}
	wantExec("StageExpried and StageTimeout at expiry", 1)
	if err := g.l.Check(); err != nil {
		t.Fatal(err)
	}
}

package rediscmd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

func textArgs(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

func seqIDs() func() [16]byte {
	var n byte
	return func() (id [16]byte) { n++; id[15] = n; return id }
}

func TestParseTextLock(t *testing.T) {
	last := slock.TextID([]byte("prev"))
	txt := &Text{DB: 3, Timeout: 15, LastLockID: last}
	var f slock.Frame
	will, buf, err := ParseTextLock(textArgs("LOCK key1 TIMEOUT 65541 EXPRIED 1024 COUNT 3 RCOUNT 1 LOCK_ID abc"), txt, seqIDs(), &f, nil)
	if err != nil || will || len(buf) != 0 {
		t.Fatalf("lock: %v %v %q", err, will, buf)
	}
	want := slock.Frame{Type: slock.TypeLock, RequestID: [16]byte{15: 1}, DB: 3, Key: slock.TextID([]byte("key1")),
		LockID: slock.TextID([]byte("abc")), Timeout: 5, TimeoutFlag: 1, Expried: 1024, Count: 2, Rcount: 0}
	if f.Type != want.Type || f.RequestID != want.RequestID || f.DB != want.DB || f.Key != want.Key ||
		f.LockID != want.LockID || f.Timeout != 5 || f.TimeoutFlag != 1 || f.Expried != 1024 || f.ExpriedFlag != 0 ||
		f.Count != 2 || f.Rcount != 0 || f.Flag != 0 || f.Data != nil {
		t.Fatalf("frame %+v", f)
	}
	// Defaults: Timeout from the connection, Expried 120, a fresh LockId; UNLOCK uses the last one.
	if _, _, err = ParseTextLock(textArgs("LOCK k"), txt, seqIDs(), &f, nil); err != nil || f.Timeout != 15 || f.Expried != 120 || f.LockID != [16]byte{15: 2} {
		t.Fatalf("defaults: %v %+v", err, f)
	}
	if _, _, err = ParseTextLock(textArgs("UNLOCK k"), txt, seqIDs(), &f, nil); err != nil || f.Type != slock.TypeUnlock || f.LockID != last {
		t.Fatalf("unlock default id: %v %+v", err, f)
	}
	// Data options build a record and set the data flag, even with FLAG after them.
	_, buf, err = ParseTextLock(textArgs("LOCK k SET hello FLAG 2"), txt, seqIDs(), &f, nil)
	if err != nil || f.Flag != 0x22 || !bytes.Equal(f.Data, slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("hello"))) {
		t.Fatalf("set: %v flag %#x data %q", err, f.Flag, f.Data)
	}
	_ = buf
	_, _, err = ParseTextLock(textArgs("LOCK k INCR -3"), txt, seqIDs(), &f, nil)
	d, derr := slock.ParseDataRecord(f.Data)
	if err != nil || derr != nil || d.Cmd != slock.DataIncr || int64(binary.LittleEndian.Uint64(d.Value)) != -3 {
		t.Fatalf("incr: %v %v %+v", err, derr, d)
	}
	if will, _, err = ParseTextLock(textArgs("LOCK k WILL 1"), txt, seqIDs(), &f, nil); err != nil || !will {
		t.Fatalf("will: %v %v", err, will)
	}
	// EXECUTE: the rest is the inner command, carried in an EXECUTE record; it does not leak out.
	_, _, err = ParseTextLock(textArgs("LOCK outer EXPRIED 5 EXECUTE UNLOCK LOCK inner LOCK_ID x EXPRIED 9"), txt, seqIDs(), &f, nil)
	if err != nil || f.Expried != 5 || f.Key != slock.TextID([]byte("outer")) {
		t.Fatalf("execute outer: %v %+v", err, f)
	}
	d, derr = slock.ParseDataRecord(f.Data)
	var inner slock.Frame
	var dec slock.Decoder
	if n, ierr := dec.Parse(d.Value, &inner); derr != nil || d.Cmd != slock.DataExecute || d.Stage != slock.StageUnlock || ierr != nil || n != slock.FrameLen ||
		inner.Key != slock.TextID([]byte("inner")) || inner.LockID != slock.TextID([]byte("x")) || inner.Expried != 9 {
		t.Fatalf("execute inner: %v %+v %v %+v", derr, d, ierr, inner)
	}
	for _, bad := range []string{"LOCK", "LOCK k TIMEOUT", "LOCK k COUNT x", "LOCK k TIMEOUT -1", "LOCK k BOGUS 1", "LOCK k FLAG 256"} {
		_, _, err := ParseTextLock(textArgs(bad), txt, seqIDs(), &f, nil)
		var te *TextError
		if !errors.As(err, &te) {
			t.Errorf("%q: %v, want a TextError", bad, err)
		}
	}
}

func TestAppendTextLockReply(t *testing.T) {
	r := slock.LockReply{Result: slock.ResultOK, LockID: slock.TextID([]byte("abc")), Lcount: 1, Count: 0xffff, Lrcount: 1, Rcount: 0}
	got := string(AppendTextLockReply(nil, &r))
	want := "*12\r\n$1\r\n0\r\n$2\r\nOK\r\n$7\r\nLOCK_ID\r\n$32\r\n00000000000000000000000000616263\r\n" +
		"$6\r\nLCOUNT\r\n$1\r\n1\r\n$5\r\nCOUNT\r\n$1\r\n0\r\n$7\r\nLRCOUNT\r\n$1\r\n1\r\n$6\r\nRCOUNT\r\n$1\r\n1\r\n"
	if got != want {
		t.Fatalf("reply\n%q\nwant\n%q", got, want)
	}
	// With a value: DATA by type.
	var num [8]byte
	binary.LittleEndian.PutUint64(num[:], 42)
	for _, c := range []struct {
		rec  []byte
		tail string
	}{
		{slock.AppendDataRecord(nil, slock.DataSet, 0, 0, nil, []byte("hi")), "$4\r\nDATA\r\n$2\r\nhi\r\n"},
		{slock.AppendDataRecord(nil, slock.DataSet, 0, slock.DataNumber, nil, num[:]), "$4\r\nDATA\r\n:42\r\n"},
		{slock.AppendDataRecord(nil, slock.DataSet, 0, slock.DataArray, nil, []byte("\x01\x00\x00\x00a\x00\x00\x00\x00\x02\x00\x00\x00bc")), "$4\r\nDATA\r\n*2\r\n$1\r\na\r\n$2\r\nbc\r\n"},
	} {
		r.Value = c.rec
		got := AppendTextLockReply(nil, &r)
		rep, _, err := resp.ParseReply(got)
		if err != nil || len(rep.Elems) != 14 || !strings.HasSuffix(string(got), c.tail) {
			t.Fatalf("with %q: %v %q", c.rec, err, got)
		}
	}
	// An UNSET value is no value.
	r.Value = slock.AppendDataRecord(nil, slock.DataUnset, 0, 0, nil, nil)
	if rep, _, _ := resp.ParseReply(AppendTextLockReply(nil, &r)); len(rep.Elems) != 12 {
		t.Fatalf("unset value shown: %d elements", len(rep.Elems))
	}
}

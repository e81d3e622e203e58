package slock

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestParseListRequests(t *testing.T) {
	key := seq16(0x40)
	keyField := cat([]byte{0x12, 16}, key[:])
	tests := []struct {
		name     string
		body     []byte
		lock     ListRequest // from ParseListLockRequest
		withKey  ListRequest // from ParseListKeyRequest
		skipLock bool
	}{
		{"empty", nil, ListRequest{}, ListRequest{}, false},
		{"db", []byte{0x08, 0x05}, ListRequest{DB: 5}, ListRequest{DB: 5}, false},
		{"db-key", cat([]byte{0x08, 0x05}, keyField), ListRequest{DB: 5}, ListRequest{DB: 5, Key: key}, false},
		{"key-first", cat(keyField, []byte{0x08, 0x7f}), ListRequest{DB: 127}, ListRequest{DB: 127, Key: key}, false},
		{"key-short", []byte{0x12, 2, 'a', 'b'}, ListRequest{}, ListRequest{Key: [16]byte{'a', 'b'}}, false},
		{"key-long", cat([]byte{0x12, 18}, key[:], str("zz")), ListRequest{}, ListRequest{Key: key}, false},
		{"key-twice-last-wins", cat(keyField, []byte{0x12, 1, 'x'}), ListRequest{}, ListRequest{Key: [16]byte{'x'}}, false},
		{"db-twice-last-wins", []byte{0x08, 0x01, 0x08, 0x02}, ListRequest{DB: 2}, ListRequest{DB: 2}, false},
		{"db-multibyte", []byte{0x08, 0xac, 0x02}, ListRequest{DB: 300}, ListRequest{DB: 300}, false},
		{"db-over-32-bits", []byte{0x08, 0x81, 0x80, 0x80, 0x80, 0x10}, ListRequest{DB: 1}, ListRequest{DB: 1}, false},
		{"db-wrong-wire-type-skipped", []byte{0x0a, 0x01, 0x07, 0x08, 0x03}, ListRequest{DB: 3}, ListRequest{DB: 3}, false},
		{"key-wrong-wire-type-skipped", []byte{0x10, 0x09}, ListRequest{}, ListRequest{}, false},
		{"unknown-fields-skipped", cat([]byte{0x18, 0x01, 0x21}, rep(0xee, 8), []byte{0x2d}, rep(0xdd, 4),
			[]byte{0x33, 0x08, 0x01, 0x34}, []byte{0x3a, 0x01, 0x00, 0x08, 0x09}), ListRequest{DB: 9}, ListRequest{DB: 9}, false},
	}
	for _, tt := range tests {
		got, err := ParseListLockRequest(tt.body)
		if err != nil || got != tt.lock {
			t.Errorf("%s: ParseListLockRequest = %+v, %v; want %+v", tt.name, got, err, tt.lock)
		}
		got, err = ParseListKeyRequest(tt.body)
		if err != nil || got != tt.withKey {
			t.Errorf("%s: ParseListKeyRequest = %+v, %v; want %+v", tt.name, got, err, tt.withKey)
		}
	}
}

func TestParseListRequestErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		body   []byte
		offset int
	}{
		{"truncated-varint", []byte{0x08}, 0},
		{"truncated-varint-later", []byte{0x08, 0x01, 0x08, 0x80}, 2},
		{"bytes-overrun", []byte{0x08, 0x01, 0x12, 0x05, 'a'}, 2},
		{"field-0", []byte{0x00, 0x01}, 0},
		{"end-group-alone", []byte{0x08, 0x01, 0x0c}, 2},
		{"group-unterminated", []byte{0x0b, 0x08, 0x01}, 0},
		{"wire-type-6", []byte{0x0e, 0x01}, 0},
		{"truncated-fixed32", []byte{0x0d, 1, 2}, 0},
		{"tag-overflow", rep(0xff, 11), 0},
	} {
		for _, parse := range []func([]byte) (ListRequest, error){ParseListLockRequest, ParseListKeyRequest} {
			r, err := parse(tt.body)
			var ce *CallError
			if !errors.As(err, &ce) || ce.Offset != tt.offset || r != (ListRequest{}) {
				t.Errorf("%s: got %+v, %v; want a *CallError at offset %d", tt.name, r, err, tt.offset)
				continue
			}
			if ce.Err == nil || err.Error() != "slock: CALL body at offset "+itoa(uint64(tt.offset))+": "+ce.Err.Error() {
				t.Errorf("%s: message %q", tt.name, err)
			}
		}
	}
}

func TestAppendListRequest(t *testing.T) {
	key := seq16(1)
	if got, want := AppendListRequest(nil, 3, nil), []byte{0x08, 0x03}; !bytes.Equal(got, want) {
		t.Errorf("LIST_LOCK body % x, want % x", got, want)
	}
	if got, want := AppendListRequest(nil, 0, key[:]), cat([]byte{0x12, 16}, key[:]); !bytes.Equal(got, want) {
		t.Errorf("LIST_LOCKED body % x, want % x", got, want)
	}
	r, err := ParseListKeyRequest(AppendListRequest(nil, 255, key[:]))
	if err != nil || r != (ListRequest{DB: 255, Key: key}) {
		t.Errorf("round trip = %+v, %v", r, err)
	}
}

// node is one expected field of a protobuf message: a varint (v), bytes
// (b), or a nested message (sub, when not nil).
type node struct {
	num int
	typ protowire.Type
	v   uint64
	b   []byte
	sub []node
}

func vint(num int, v uint64) node { return node{num: num, typ: protowire.VarintType, v: v} }
func bts(num int, b []byte) node  { return node{num: num, typ: protowire.BytesType, b: b} }
func msg(num int, sub ...node) node {
	return node{num: num, typ: protowire.BytesType, sub: append([]node{}, sub...)}
}
func id(num int, v [16]byte) node { return bts(num, v[:]) }

// match walks body with protowire directly, independently of the package's
// decoders, and checks that it holds exactly want, in order.
func match(t *testing.T, path string, body []byte, want []node) {
	t.Helper()
	i := 0
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			t.Fatalf("%s: bad tag: %v", path, protowire.ParseError(n))
		}
		body = body[n:]
		if i >= len(want) {
			t.Fatalf("%s: unexpected field %d (type %d) after %d fields", path, num, typ, i)
		}
		w := want[i]
		if int(num) != w.num || typ != w.typ {
			t.Fatalf("%s: field %d is %d type %d, want %d type %d", path, i, num, typ, w.num, w.typ)
		}
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 || v != w.v {
				t.Fatalf("%s: field %d = %d (n %d), want %d", path, num, v, n, w.v)
			}
			body = body[n:]
		case protowire.BytesType:
			b, n := protowire.ConsumeBytes(body)
			if n < 0 {
				t.Fatalf("%s: field %d: %v", path, num, protowire.ParseError(n))
			}
			if w.sub != nil {
				match(t, path+"."+itoa(uint64(num)), b, w.sub)
			} else if !bytes.Equal(b, w.b) {
				t.Fatalf("%s: field %d = % x, want % x", path, num, b, w.b)
			}
			body = body[n:]
		default:
			t.Fatalf("%s: field %d has wire type %d", path, num, typ)
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("%s: %d fields, want %d", path, i, len(want))
	}
}

var (
	testCmd = Command{RequestID: seq16(1), Flag: 0x10, LockID: lid1, Key: key1, TimeoutFlag: 0x0400,
		Timeout: 300, ExpriedFlag: 0x4000, Expried: 0xffff, Count: 0xffff, Rcount: 0xff}
	testCmdNodes = []node{id(1, seq16(1)), vint(2, 0x10), id(3, lid1), id(4, key1), vint(5, 0x0400),
		vint(6, 300), vint(7, 0x4000), vint(8, 0xffff), vint(9, 0xffff), vint(10, 0xff)}
	zeroCmdNodes = []node{id(1, [16]byte{}), id(3, [16]byte{}), id(4, [16]byte{})}
)

func TestAppendListLockResponse(t *testing.T) {
	k2 := seq16(0x90)
	locks := []ListLock{
		{Key: key1, LockedCount: 3, Data: &LockData{Value: str("v"), Cmd: DataIncr, Flag: DataNumber}},
		{Key: k2},
		{Key: key1, LockedCount: 70000, Data: &LockData{}},
	}
	body := AppendListLockResponse(nil, locks)
	match(t, "ListLock", body, []node{
		msg(1, id(1, key1), vint(2, 3), msg(3, bts(1, str("v")), vint(2, 2), vint(3, 1))),
		msg(1, id(1, k2)),
		msg(1, id(1, key1), vint(2, 70000), msg(3)),
	})
	// The exact bytes of the first entry, by hand.
	first := cat([]byte{0x0a, 0x1d, 0x0a, 0x10}, key1[:], []byte{0x10, 0x03, 0x1a, 0x07, 0x0a, 0x01, 'v', 0x10, 0x02, 0x18, 0x01})
	if !bytes.HasPrefix(body, first) {
		t.Fatalf("first entry\n got % x\nwant % x", body[:len(first)], first)
	}
	if got := AppendListLockResponse(str("keep"), nil); string(got) != "keep" {
		t.Fatalf("no locks: %q", got)
	}
	back, err := ParseListLockResponse(body)
	if err != nil || !reflect.DeepEqual(back, locks) {
		t.Fatalf("ParseListLockResponse = %+v, %v", back, err)
	}
}

func TestAppendListLockedResponse(t *testing.T) {
	r := ListLocked{Key: key1, LockedCount: 2, Locks: []Locked{
		{LockID: lid1, StartTime: 1700000000, TimeoutTime: 1700000005, ExpriedTime: 0x7fffffffffffffff,
			LockedCount: 1, AofTime: 1, IsTimeouted: true, IsExpried: true, IsAof: true, IsLongTime: true, Command: testCmd},
		{LockID: seq16(0xa0)},
	}, Data: &LockData{Value: cat(le32(1), str("a")), Cmd: DataPush, Flag: DataArray}}
	body := AppendListLockedResponse(nil, &r)
	match(t, "ListLocked", body, []node{
		id(1, key1), vint(2, 2),
		msg(3, append([]node{id(1, lid1), vint(2, 1700000000), vint(3, 1700000005), vint(4, 0x7fffffffffffffff),
			vint(5, 1), vint(6, 1), vint(7, 1), vint(8, 1), vint(9, 1), vint(10, 1)}, msg(11, testCmdNodes...))...),
		msg(3, id(1, seq16(0xa0)), msg(11, zeroCmdNodes...)),
		msg(4, bts(1, cat(le32(1), str("a"))), vint(2, DataPush), vint(3, DataArray)),
	})
	back, err := ParseListLockedResponse(body)
	if err != nil || !reflect.DeepEqual(*back, r) {
		t.Fatalf("ParseListLockedResponse = %+v, %v", back, err)
	}
	empty := ListLocked{Key: key1}
	body = AppendListLockedResponse(nil, &empty)
	match(t, "ListLocked/empty", body, []node{id(1, key1)})
	back, err = ParseListLockedResponse(body)
	if err != nil || !reflect.DeepEqual(*back, empty) {
		t.Fatalf("ParseListLockedResponse(empty) = %+v, %v", back, err)
	}
}

func TestAppendListWaitResponse(t *testing.T) {
	r := ListWait{Key: key1, LockedCount: 1, Waits: []Wait{
		{LockID: lid1, StartTime: 5, TimeoutTime: 1 << 40, IsLongTime: true, Command: testCmd},
		{LockID: seq16(0xb0), StartTime: 6, Command: Command{Count: 1}},
	}}
	body := AppendListWaitResponse(nil, &r)
	match(t, "ListWait", body, []node{
		id(1, key1), vint(2, 1),
		msg(3, id(1, lid1), vint(2, 5), vint(3, 1<<40), vint(4, 1), msg(5, testCmdNodes...)),
		msg(3, id(1, seq16(0xb0)), vint(2, 6), msg(5, append(zeroCmdNodes, vint(9, 1))...)),
	})
	back, err := ParseListWaitResponse(body)
	if err != nil || !reflect.DeepEqual(*back, r) {
		t.Fatalf("ParseListWaitResponse = %+v, %v", back, err)
	}
}

func TestParseListResponseErrors(t *testing.T) {
	// A bad nested message reports the offset in the whole body.
	body := cat([]byte{0x0a, 0x10, 0x0a, 0x10}, rep(1, 14))
	if _, err := ParseListLockResponse(body); err == nil {
		t.Fatal("ParseListLockResponse accepted a truncated message")
	}
	nested := cat([]byte{0x08, 0x01, 0x1a, 0x03, 0x10, 0x01, 0x0e})
	var ce *CallError
	if _, err := ParseListLockedResponse(nested); !errors.As(err, &ce) || ce.Offset != 6 {
		t.Fatalf("ParseListLockedResponse = %v, want a *CallError at offset 6", err)
	}
	if _, err := ParseListWaitResponse([]byte{0x22, 0x01, 0x08}); !errors.As(err, &ce) || ce.Offset != 2 {
		t.Fatalf("ParseListWaitResponse = %v, want a *CallError at offset 2", err)
	}
}

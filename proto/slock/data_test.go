package slock

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

func TestParseDataRecord(t *testing.T) {
	props := cat([]byte{1}, le16(3), str("key"), []byte{9}, le16(0))
	tests := []struct {
		name string
		rec  []byte
		want Data
	}{
		{"set", record([]byte{0x00, 0x00}, str("value")), Data{Value: str("value")}},
		{"set/empty", record([]byte{0x00, 0x00}), Data{Value: []byte{}}},
		{"incr", record([]byte{0x02, 0x01}, le64(5)), Data{Cmd: DataIncr, Flag: DataNumber, Value: le64(5)}},
		{"unset-marker", cat(le32(2), []byte{0x01, 0x00}), Data{Cmd: DataUnset, Value: []byte{}}},
		{"execute/stage-unlock", record([]byte{0x45, 0x20}, str("F")), Data{Stage: StageUnlock, Cmd: DataExecute, Flag: 0x20, Value: str("F")}},
		{"execute/stage-expried", record([]byte{0xc5, 0x00}), Data{Stage: StageExpried, Cmd: DataExecute, Value: []byte{}}},
		{"stage-timeout-cmd-63", record([]byte{0xbf, 0xff}, le16(0)), Data{Stage: StageTimeout, Cmd: 63, Flag: 0xff, Props: []byte{}, Value: []byte{}}},
		{"props", record([]byte{0x07, 0x12}, le16(uint16(len(props))), props, le32(1), str("a")),
			Data{Cmd: DataPush, Flag: 0x12, Props: props, Value: cat(le32(1), str("a"))}},
		{"props/empty-area", record([]byte{0x00, 0x10}, le16(0), str("v")), Data{Flag: 0x10, Props: []byte{}, Value: str("v")}},
	}
	for _, tt := range tests {
		got, err := ParseDataRecord(tt.rec)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
		// Re-encoding the parts gives the record back.
		var ps []Property
		for p := got.Props; ; {
			c, v, rest, ok := NextProp(p)
			if !ok {
				break
			}
			ps, p = append(ps, Property{c, v}), rest
		}
		if again := AppendDataRecord(nil, got.Cmd, got.Stage, got.Flag, ps, got.Value); !bytes.Equal(again, tt.rec) {
			t.Errorf("%s: re-encoded\n got % x\nwant % x", tt.name, again, tt.rec)
		}
	}
}

func TestParseDataRecordErrors(t *testing.T) {
	for _, tt := range []struct {
		name, rec, want string
	}{
		{"empty", "", "slock: data record at offset 0: length needs 4 bytes, have 0"},
		{"short", "\x02\x00\x00", "slock: data record at offset 0: length needs 4 bytes, have 3"},
		{"len-0", "\x00\x00\x00\x00", "slock: data record at offset 0: length 0 is below 2"},
		{"len-1", "\x01\x00\x00\x00\x00", "slock: data record at offset 0: length 1 is below 2"},
		{"len-mismatch-short", "\x05\x00\x00\x00\x00\x00", "slock: data record at offset 0: length 5 but 2 bytes follow"},
		{"len-mismatch-long", "\x02\x00\x00\x00\x00\x00\x00", "slock: data record at offset 0: length 2 but 3 bytes follow"},
		{"props-no-length", "\x02\x00\x00\x00\x00\x10", "slock: data record at offset 6: property length needs 2 bytes, have 0"},
		{"props-one-byte", "\x03\x00\x00\x00\x00\x10\x05", "slock: data record at offset 6: property length needs 2 bytes, have 1"},
		{"props-overrun", "\x05\x00\x00\x00\x00\x10\x02\x00\x01", "slock: data record at offset 6: property length 2 but 1 bytes follow"},
	} {
		_, err := ParseDataRecord([]byte(tt.rec))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestAppendDataRecord(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"set", AppendDataRecord(nil, DataSet, StageCurrent, 0, nil, str("abc")), []byte{5, 0, 0, 0, 0x00, 0x00, 'a', 'b', 'c'}},
		{"unset", AppendDataRecord(nil, DataUnset, 0, 0, nil, nil), []byte{2, 0, 0, 0, 0x01, 0x00}},
		{"incr", AppendDataRecord(nil, DataIncr, 0, DataNumber, nil, le64(math.MaxUint64)),
			cat([]byte{10, 0, 0, 0, 0x02, 0x01}, rep(0xff, 8))},
		{"execute/stage-expried", AppendDataRecord(str(">"), DataExecute, StageExpried, DataFirstOrLast, nil, str("F")),
			[]byte{'>', 3, 0, 0, 0, 0xc5, 0x20, 'F'}},
		{"props-set-flag", AppendDataRecord(nil, DataSet, 0, DataArray, []Property{{PropKey, str("k")}, {7, nil}}, str("v")),
			[]byte{12, 0, 0, 0, 0x00, 0x12, 7, 0, 1, 1, 0, 'k', 7, 0, 0, 'v'}},
		{"props-flag-no-props", AppendDataRecord(nil, DataPop, 0, DataProps, nil, le32(2)),
			[]byte{8, 0, 0, 0, 0x08, 0x10, 0, 0, 2, 0, 0, 0}},
		{"cmd-masked", AppendDataRecord(nil, 0xc1, StageCurrent, 0, nil, nil), []byte{2, 0, 0, 0, 0x01, 0}},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s:\n got % x\nwant % x", tt.name, tt.got, tt.want)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic for a property of 65536 bytes")
			}
		}()
		AppendDataRecord(nil, 0, 0, 0, []Property{{1, make([]byte, 1<<16)}}, nil)
	}()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic for a property area of 65536 bytes")
			}
		}()
		big := make([]byte, 40000)
		AppendDataRecord(nil, 0, 0, 0, []Property{{1, big}, {2, big}}, nil)
	}()
}

func TestProps(t *testing.T) {
	area := cat([]byte{9}, le16(2), str("xy"), []byte{PropKey}, le16(4), str("name"), []byte{PropKey}, le16(1), str("z"), []byte{3}, le16(5), str("ab"))
	var got []Property
	for p := area; ; {
		c, v, rest, ok := NextProp(p)
		if !ok {
			break
		}
		got, p = append(got, Property{c, v}), rest
	}
	want := []Property{{9, str("xy")}, {PropKey, str("name")}, {PropKey, str("z")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NextProp walk = %+v, want %+v (the truncated last entry is not returned)", got, want)
	}
	if v, ok := Prop(area, PropKey); !ok || string(v) != "name" {
		t.Fatalf("Prop(KEY) = %q, %v", v, ok)
	}
	if v, ok := Prop(area, 3); ok {
		t.Fatalf("Prop(3) on a truncated entry = %q", v)
	}
	if _, ok := Prop(nil, PropKey); ok {
		t.Fatal("Prop on an empty area found something")
	}
	if _, _, _, ok := NextProp([]byte{1, 0}); ok {
		t.Fatal("NextProp on 2 bytes")
	}
}

func TestDataKindAndNumber(t *testing.T) {
	for flag, want := range map[uint8]ValueKind{
		0x00: KindString, 0x10: KindString, 0x20: KindString, 0xf8: KindString,
		0x01: KindNumber, 0x07: KindNumber, 0xff: KindNumber,
		0x02: KindArray, 0x06: KindArray, 0x12: KindArray,
		0x04: KindKV, 0x14: KindKV,
	} {
		if got := DataKind(flag); got != want {
			t.Errorf("DataKind(%#x) = %d, want %d", flag, got, want)
		}
	}
	for _, tt := range []struct {
		v    []byte
		want int64
	}{
		{nil, 0},
		{[]byte{5}, 5},
		{str("5"), 53},
		{[]byte{0xff, 0xff}, 0xffff},
		{le64(uint64(1) << 63), math.MinInt64},
		{rep(0xff, 8), -1},
		{cat(le64(7), str("ignored")), 7},
	} {
		if got := Number(tt.v); got != tt.want {
			t.Errorf("Number(% x) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

func TestElems(t *testing.T) {
	arr := cat(le32(1), str("a"), le32(0), le32(3), str("bcd"), le32(0), le32(0), le32(2), str("ef"), le32(9), str("trunc"))
	var got []string
	for e, rest, ok := NextElem(arr); ok; e, rest, ok = NextElem(rest) {
		got = append(got, string(e))
	}
	if want := []string{"a", "bcd", "ef"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NextElem walk = %q, want %q", got, want)
	}
	if n := ArrayLen(arr); n != 3 {
		t.Fatalf("ArrayLen = %d, want 3", n)
	}
	for _, v := range [][]byte{nil, le32(0), cat(le32(0), le32(0)), []byte{1, 0, 0}, cat(le32(2), str("a"))} {
		if e, _, ok := NextElem(v); ok || ArrayLen(v) != 0 {
			t.Errorf("NextElem(% x) = %q, %v", v, e, ok)
		}
	}
	// The element view cannot overwrite what follows it.
	e, _, _ := NextElem(arr)
	_ = append(e, 'X')
	if arr[5] != 0 {
		t.Fatal("appending to an element overwrote the value")
	}

	kv := cat(le32(1), str("k"), le32(2), str("v1"), le32(0), le32(0), le32(2), str("k3"), le32(5), str("v"))
	var pairs []string
	for k, v, rest, ok := NextPair(kv); ok; k, v, rest, ok = NextPair(rest) {
		pairs = append(pairs, string(k), string(v))
	}
	if want := []string{"k", "v1", "", ""}; !reflect.DeepEqual(pairs, want) {
		t.Fatalf("NextPair walk = %q, want %q", pairs, want)
	}
	if n := KVLen(kv); n != 2 {
		t.Fatalf("KVLen = %d, want 2", n)
	}
}

func TestLockDataOf(t *testing.T) {
	d, err := ParseDataRecord(record([]byte{0x07, 0x12}, le16(4), []byte{1, 1, 0, 'k'}, le32(1), str("a")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.LockData(), (LockData{Value: cat(le32(1), str("a")), Cmd: DataPush, Flag: 0x12}); !reflect.DeepEqual(got, want) {
		t.Fatalf("LockData = %+v, want %+v", got, want)
	}
}

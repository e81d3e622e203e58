package slock

import (
	"bytes"
	"reflect"
	"testing"
)

func TestAppendRequests(t *testing.T) {
	rec := record([]byte{0x07, 0x00}, str("elem"))
	lock := Frame{Type: TypeLock, RequestID: rid1, Flag: 0x02, DB: 5, LockID: lid1, Key: key1, Timeout: 0x0102,
		TimeoutFlag: 0x0304, Expried: 0x0506, ExpriedFlag: 0x0708, Count: 0x090a, Rcount: 0x0b}
	lockData := lock
	lockData.Data = rec
	flagOnly := lock
	flagOnly.Type, flagOnly.Flag = TypeWillUnlock, 0x20
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"lock", AppendLockRequest(nil, &lock), lockFrame(1, 0x02, 5, 0x0102, 0x0304, 0x0506, 0x0708, 0x090a, 0x0b)},
		{"lock/data-sets-flag", AppendLockRequest(nil, &lockData), lockFrame(1, 0x22, 5, 0x0102, 0x0304, 0x0506, 0x0708, 0x090a, 0x0b, rec)},
		{"will-unlock/flag-without-data", AppendLockRequest(nil, &flagOnly), lockFrame(9, 0x20, 5, 0x0102, 0x0304, 0x0506, 0x0708, 0x090a, 0x0b)},
		{"init", AppendInitRequest(nil, rid1, cid1), cat(head(0, rid1), cid1[:], rep(0, 29))},
		{"ping", AppendPing(str("p"), rid1), cat(str("p"), head(5, rid1), rep(0, 45))},
		{"quit", AppendRequest(nil, TypeQuit, rid1), cat(head(6, rid1), rep(0, 45))},
		{"leader", AppendRequest(nil, TypeLeader, rid1), cat(head(10, rid1), rep(0, 45))},
		{"state", AppendStateRequest(nil, rid1, 0xfe), cat(head(3, rid1), []byte{0, 0xfe}, rep(0, 43))},
		{"call", AppendCallRequest(nil, rid1, MethodListLocked, []byte{8, 1}),
			cat(head(7, rid1), []byte{0, 3, 1, 2, 0, 0, 0}, pad(str("LIST_LOCKED"), 38), []byte{8, 1})},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s:\n got % x\nwant % x", tt.name, tt.got, tt.want)
		}
	}
	// A lock request parses back to the frame it was built from.
	var d Decoder
	var f Frame
	buf := AppendLockRequest(nil, &lockData)
	if n, err := d.Parse(buf, &f); n != len(buf) || err != nil {
		t.Fatalf("Parse = %d, %v", n, err)
	}
	lockData.Flag |= FlagData
	lockData.Raw = buf
	if !reflect.DeepEqual(f, lockData) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", f, lockData)
	}
}

func TestParseReply(t *testing.T) {
	value := record([]byte{0x00, 0x02}, le32(1), str("a"))
	callBody := []byte{0x0a, 0x01, 0x00}
	tests := []struct {
		name  string
		in    []byte
		want  Reply
		extra int
	}{
		{"lock", cat(head(1, rid1), []byte{5, 0, 3}, lid1[:], key1[:], []byte{2, 1, 4, 3, 7, 8, 0xaa, 0xbb, 0xcc, 0xdd}),
			Reply{LockReply: LockReply{Type: TypeLock, RequestID: rid1, Result: ResultLockedError, DB: 3, LockID: lid1, Key: key1,
				Lcount: 0x0102, Count: 0x0304, Lrcount: 7, Rcount: 8}}, 0},
		{"lock/value", cat(head(1, rid1), []byte{0, 0x20, 3}, lid1[:], key1[:], rep(0, 10), value, str("tail")),
			Reply{LockReply: LockReply{Type: TypeLock, RequestID: rid1, DB: 3, LockID: lid1, Key: key1, Value: value}, Flag: 0x20}, 4},
		{"unlock/expried-push", cat(head(2, rid1), []byte{9, 0, 0}, lid1[:], key1[:], rep(0, 10)),
			Reply{LockReply: LockReply{Type: TypeUnlock, RequestID: rid1, Result: ResultExpried, LockID: lid1, Key: key1}}, 0},
		{"init", cat(head(0, rid1), []byte{0, 0x0d}, rep(0, 43)),
			Reply{LockReply: LockReply{Type: TypeInit, RequestID: rid1}, Flag: 0x0d}, 0},
		{"init/flag-0x20-no-value", cat(head(0, rid1), []byte{0, 0x2c}, rep(0, 43), le32(5)),
			Reply{LockReply: LockReply{Type: TypeInit, RequestID: rid1}, Flag: 0x2c}, 4},
		{"ping", cat(head(5, rid1), rep(0, 45)), Reply{LockReply: LockReply{Type: TypePing, RequestID: rid1}}, 0},
		{"unknown", cat(head(0x33, rid1), []byte{4}, rep(0, 44)),
			Reply{LockReply: LockReply{Type: 0x33, RequestID: rid1, Result: ResultUnknownCommand}}, 0},
		{"state", cat(head(3, rid1), []byte{0, 0, 1, 2}, le64(3), le64(4), le32(5), le32(6), le32(7), le32(8), le32(9), le32(10), []byte{0}),
			Reply{LockReply: LockReply{Type: TypeState, RequestID: rid1}, State: State{DBState: 1, DB: 2, LockCount: 3,
				UnlockCount: 4, LockedCount: 5, WaitCount: 6, TimeoutedCount: 7, ExpriedCount: 8, UnlockErrorCount: 9, KeyCount: 10}}, 0},
		{"call", cat(head(7, rid1), []byte{0, 0, 3, 1}, le32(3), pad(str("DECODE_ERROR"), 37), callBody),
			Reply{LockReply: LockReply{Type: TypeCall, RequestID: rid1}, Encoding: 3, Charset: 1, ErrType: str("DECODE_ERROR"), Body: callBody}, 0},
		{"leader", cat(head(10, rid1), []byte{0, 0}, pad(str("h:1"), 43)),
			Reply{LockReply: LockReply{Type: TypeLeader, RequestID: rid1}, Host: str("h:1")}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Reply
			n, err := ParseReply(tt.in, DefaultMaxData, &r)
			if err != nil || n != len(tt.in)-tt.extra {
				t.Fatalf("ParseReply = %d, %v; want %d", n, err, len(tt.in)-tt.extra)
			}
			if !reflect.DeepEqual(r, tt.want) {
				t.Fatalf("\n got %+v\nwant %+v", r, tt.want)
			}
			// Every prefix is "need more".
			for i := 0; i < n; i++ {
				if m, err := ParseReply(tt.in[:i], DefaultMaxData, &r); m != 0 || err != nil {
					t.Fatalf("%d bytes: ParseReply = %d, %v", i, m, err)
				}
			}
		})
	}
}

func TestParseReplyErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		max  uint32
		want error
	}{
		{"bad-magic", cat([]byte{0x90, 0x01, 1}, rid1[:], rep(0, 45)), 100,
			&HeaderError{Result: ResultUnknownMagic, Magic: 0x90, Version: 1, Type: 1, RequestID: rid1, Len: 64}},
		{"bad-version", cat([]byte{0x56, 0x00, 5}, rid1[:], rep(0, 45)), 100,
			&HeaderError{Result: ResultUnknownVersion, Magic: 0x56, Version: 0, Type: 5, RequestID: rid1, Len: 64}},
		{"value-0", cat(head(1, rid1), []byte{0, 0x20}, rep(0, 43), le32(0)), 100,
			&LengthError{Type: TypeLock, Field: "value record length", Len: 0, Min: 2, Max: 100}},
		{"value-over", cat(head(2, rid1), []byte{0, 0x20}, rep(0, 43), le32(101)), 100,
			&LengthError{Type: TypeUnlock, Field: "value record length", Len: 101, Min: 2, Max: 100}},
		{"call-over", cat(head(7, rid1), []byte{0, 0, 3, 1}, le32(101), rep(0, 37)), 100,
			&LengthError{Type: TypeCall, Field: "content length", Len: 101, Max: 100}},
	}
	for _, tt := range tests {
		r := Reply{Flag: 0x77}
		if n, err := ParseReply(tt.in, tt.max, &r); n != 0 || !reflect.DeepEqual(err, tt.want) || r.Flag != 0x77 {
			t.Errorf("%s: ParseReply = %d, %#v (reply %+v); want 0, %#v", tt.name, n, err, r, tt.want)
		}
	}
}

// TestLockReplyRoundTrip encodes replies with the server's appender and
// decodes them with the client's parser, pipelined.
func TestLockReplyRoundTrip(t *testing.T) {
	replies := []LockReply{
		{Type: TypeLock, RequestID: rid1, Result: ResultOK, DB: 1, LockID: lid1, Key: key1, Lcount: 1, Lrcount: 1},
		{Type: TypeLock, RequestID: seq16(1), Result: ResultExpried, Value: record([]byte{0, 0}, str("x"))},
		{Type: TypeUnlock, RequestID: seq16(2), Result: ResultUnlockError, Count: 0xffff, Rcount: 0xff},
	}
	var stream []byte
	for i := range replies {
		stream = AppendLockReply(stream, &replies[i])
	}
	for i, want := range replies {
		var r Reply
		n, err := ParseReply(stream, DefaultMaxData, &r)
		if err != nil || n == 0 {
			t.Fatalf("reply %d: ParseReply = %d, %v", i, n, err)
		}
		if !reflect.DeepEqual(r.LockReply, want) {
			t.Fatalf("reply %d:\n got %+v\nwant %+v", i, r.LockReply, want)
		}
		if wantFlag := byte(0); len(want.Value) > 0 && r.Flag != FlagData || len(want.Value) == 0 && r.Flag != wantFlag {
			t.Fatalf("reply %d: flag %#x", i, r.Flag)
		}
		stream = stream[n:]
	}
}

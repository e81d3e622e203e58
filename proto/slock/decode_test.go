package slock

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// eqFrame compares frames field by field, treating nil and empty slices as
// different (Data nil means "no record").
func eqFrame(a, b Frame) bool {
	return reflect.DeepEqual(a, b)
}

func TestParseFrames(t *testing.T) {
	rec := record([]byte{0x00, 0x00}, str("hello"))
	callBody := []byte{0x08, 0x05, 0x12, 0x02, 'a', 'b'}
	tests := []struct {
		name  string
		in    []byte
		want  Frame
		extra int // bytes after the frame in the buffer
	}{
		{"lock", lockFrame(1, 0x00, 3, 5, 0x0400, 120, 0x4000, 0xffff, 0xff),
			Frame{Type: TypeLock, RequestID: rid1, DB: 3, LockID: lid1, Key: key1, Timeout: 5, TimeoutFlag: 0x0400,
				Expried: 120, ExpriedFlag: 0x4000, Count: 0xffff, Rcount: 0xff}, 0},
		{"lock/data", lockFrame(1, 0x21, 0, 0x0102, 0x0304, 0x0506, 0x0708, 0x090a, 0x0b, rec),
			Frame{Type: TypeLock, RequestID: rid1, Flag: 0x21, LockID: lid1, Key: key1, Timeout: 0x0102,
				TimeoutFlag: 0x0304, Expried: 0x0506, ExpriedFlag: 0x0708, Count: 0x090a, Rcount: 0x0b, Data: rec}, 0},
		{"lock/data-min", lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, record([]byte{0x01, 0x00})),
			Frame{Type: TypeLock, RequestID: rid1, Flag: 0x20, LockID: lid1, Key: key1,
				Data: record([]byte{0x01, 0x00})}, 0},
		{"lock/db-ff-data", lockFrame(1, 0x20, 0xff, 0, 0, 0, 0, 0, 0, rec),
			Frame{Type: TypeLock, RequestID: rid1, Flag: 0x20, DB: 0xff, LockID: lid1, Key: key1, Data: rec}, 0},
		{"unlock", lockFrame(2, 0x1b, 1, 0, 0, 0, 0, 0, 1),
			Frame{Type: TypeUnlock, RequestID: rid1, Flag: 0x1b, DB: 1, LockID: lid1, Key: key1, Rcount: 1}, 0},
		{"unlock/data-trailing", cat(lockFrame(2, 0x20, 1, 0, 0, 0, 0, 0, 0, rec), str("*1\r\n")),
			Frame{Type: TypeUnlock, RequestID: rid1, Flag: 0x20, DB: 1, LockID: lid1, Key: key1, Data: rec}, 4},
		{"will-lock/data", lockFrame(8, 0x20, 2, 1, 2, 3, 4, 5, 6, rec),
			Frame{Type: TypeWillLock, RequestID: rid1, Flag: 0x20, DB: 2, LockID: lid1, Key: key1, Timeout: 1,
				TimeoutFlag: 2, Expried: 3, ExpriedFlag: 4, Count: 5, Rcount: 6, Data: rec}, 0},
		{"will-unlock", lockFrame(9, 0x01, 2, 0, 0, 0, 0, 0, 0),
			Frame{Type: TypeWillUnlock, RequestID: rid1, Flag: 0x01, DB: 2, LockID: lid1, Key: key1}, 0},
		{"init", cat(head(0, rid1), cid1[:], rep(0, 29)),
			Frame{Type: TypeInit, RequestID: rid1, ClientID: cid1}, 0},
		{"init/flag-byte-0x20-no-data", cat(head(0, rid1), rep(0x20, 16), rep(0xee, 29), le32(2)),
			Frame{Type: TypeInit, RequestID: rid1, ClientID: [16]byte(rep(0x20, 16))}, 4},
		{"state", cat(head(3, rid1), []byte{0x20, 7}, rep(0, 43), le32(2)),
			Frame{Type: TypeState, RequestID: rid1, Flag: 0x20, DB: 7}, 4},
		{"admin", cat(head(4, rid1), rep(0, 45)), Frame{Type: TypeAdmin, RequestID: rid1}, 0},
		{"ping", cat(head(5, rid1), rep(0, 45)), Frame{Type: TypePing, RequestID: rid1}, 0},
		{"ping/garbage-tail", cat(head(5, rid1), rep(0xff, 45)), Frame{Type: TypePing, RequestID: rid1}, 0},
		{"quit", cat(head(6, rid1), rep(0, 45)), Frame{Type: TypeQuit, RequestID: rid1}, 0},
		{"leader", cat(head(10, rid1), rep(0, 45)), Frame{Type: TypeLeader, RequestID: rid1}, 0},
		{"subscribe", cat(head(11, rid1), rep(0x21, 45)), Frame{Type: TypeSubscribe, RequestID: rid1}, 0},
		{"unknown-12", cat(head(12, rid1), rep(0x20, 45), le32(2)), Frame{Type: 12, RequestID: rid1}, 4},
		{"unknown-ff", cat(head(0xff, rid1), rep(0, 45)), Frame{Type: 0xff, RequestID: rid1}, 0},
		{"call", cat(head(7, rid1), []byte{0, 3, 1}, le32(uint32(len(callBody))), pad(str("LIST_LOCKED"), 38), callBody),
			Frame{Type: TypeCall, RequestID: rid1, Encoding: 3, Charset: 1, Method: str("LIST_LOCKED"), Body: callBody}, 0},
		{"call/empty-body-trailing", cat(head(7, rid1), []byte{9, 2, 1}, le32(0), pad(str("LIST_LOCK"), 38), str("xy")),
			Frame{Type: TypeCall, RequestID: rid1, Flag: 9, Encoding: 2, Charset: 1, Method: str("LIST_LOCK"), Body: []byte{}}, 2},
		{"call/method-nul-inside", cat(head(7, rid1), []byte{0, 3, 1}, le32(0), pad(str("AB\x00CD"), 38)),
			Frame{Type: TypeCall, RequestID: rid1, Encoding: 3, Charset: 1, Method: str("AB"), Body: []byte{}}, 0},
		{"call/method-38-bytes", cat(head(7, rid1), []byte{0, 3, 1}, le32(0), rep('M', 38)),
			Frame{Type: TypeCall, RequestID: rid1, Encoding: 3, Charset: 1, Method: rep('M', 38), Body: []byte{}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decoder
			var f Frame
			n, err := d.Parse(tt.in, &f)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want := len(tt.in) - tt.extra; n != want {
				t.Fatalf("n = %d, want %d", n, want)
			}
			tt.want.Raw = tt.in[:n]
			if !eqFrame(f, tt.want) {
				t.Fatalf("Parse(% x)\n got %+v\nwant %+v", tt.in, f, tt.want)
			}
		})
	}
}

func TestParseViewsClipped(t *testing.T) {
	rec := record([]byte{0x00, 0x00}, str("v"))
	in := cat(lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, rec), str("NEXT"))
	var d Decoder
	var f Frame
	if n, err := d.Parse(in, &f); n != len(in)-4 || err != nil {
		t.Fatalf("Parse = %d, %v", n, err)
	}
	_ = append(f.Data, 'X')
	_ = append(f.Raw, 'X')
	if !bytes.HasSuffix(in, str("NEXT")) {
		t.Fatalf("appending to a view overwrote the buffer: % x", in)
	}
	call := cat(head(7, rid1), []byte{0, 3, 1}, le32(2), pad(str("M"), 38), str("bbNEXT"))
	if n, err := d.Parse(call, &f); n != 66 || err != nil {
		t.Fatalf("Parse = %d, %v", n, err)
	}
	_ = append(f.Body, 'X')
	_ = append(f.Method, 'X')
	if !bytes.Equal(call[64:], str("bbNEXT")) || call[27] != 0 {
		t.Fatalf("appending to a view overwrote the buffer: % x", call)
	}
}

func TestParseErrors(t *testing.T) {
	badMagic := cat([]byte{0x57, 0x01, 1}, rid1[:], rep(0, 45))
	badVersion := cat([]byte{0x56, 0x02, 2}, rid1[:], rep(0, 45))
	bothBad := cat([]byte{0x00, 0x00, 0xee}, rid1[:], rep(0, 45))
	tests := []struct {
		name string
		d    Decoder
		in   []byte
		want error
	}{
		{"bad-magic", Decoder{}, badMagic,
			&HeaderError{Result: ResultUnknownMagic, Magic: 0x57, Version: 1, Type: TypeLock, RequestID: rid1, Len: 64}},
		{"bad-version", Decoder{}, badVersion,
			&HeaderError{Result: ResultUnknownVersion, Magic: 0x56, Version: 2, Type: TypeUnlock, RequestID: rid1, Len: 64}},
		{"bad-magic-and-version", Decoder{}, bothBad,
			&HeaderError{Result: ResultUnknownMagic, Magic: 0, Version: 0, Type: 0xee, RequestID: rid1, Len: 64}},
		{"data-len-0", Decoder{}, lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(0)),
			&LengthError{Type: TypeLock, Field: "data record length", Len: 0, Min: 2, Max: DefaultMaxData}},
		{"data-len-1", Decoder{}, lockFrame(2, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(1), []byte{0}),
			&LengthError{Type: TypeUnlock, Field: "data record length", Len: 1, Min: 2, Max: DefaultMaxData}},
		{"data-len-over-default", Decoder{}, lockFrame(8, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(DefaultMaxData+1)),
			&LengthError{Type: TypeWillLock, Field: "data record length", Len: DefaultMaxData + 1, Min: 2, Max: DefaultMaxData}},
		{"data-len-max-u32", Decoder{}, lockFrame(9, 0xff, 0, 0, 0, 0, 0, 0, 0, le32(0xffffffff)),
			&LengthError{Type: TypeWillUnlock, Field: "data record length", Len: 0xffffffff, Min: 2, Max: DefaultMaxData}},
		{"data-len-over-custom", Decoder{MaxData: 10}, lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(11)),
			&LengthError{Type: TypeLock, Field: "data record length", Len: 11, Min: 2, Max: 10}},
		{"call-over-default", Decoder{}, cat(head(7, rid1), []byte{0, 3, 1}, le32(DefaultMaxCall+1), rep(0, 38)),
			&LengthError{Type: TypeCall, Field: "content length", Len: DefaultMaxCall + 1, Max: DefaultMaxCall}},
		{"call-over-custom", Decoder{MaxCall: 5}, cat(head(7, rid1), []byte{0, 3, 1}, le32(6), rep(0, 38)),
			&LengthError{Type: TypeCall, Field: "content length", Len: 6, Max: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Frame{Type: 0x99}
			n, err := tt.d.Parse(tt.in, &f)
			if n != 0 || !reflect.DeepEqual(err, tt.want) {
				t.Fatalf("Parse = %d, %#v; want 0, %#v", n, err, tt.want)
			}
			if f.Type != 0x99 {
				t.Fatalf("Parse touched *f on error: %+v", f)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
		})
	}
}

func TestParseErrorMessages(t *testing.T) {
	var d Decoder
	var f Frame
	for _, tt := range []struct {
		in   []byte
		want string
	}{
		{cat([]byte{0x57, 0x01, 1}, rid1[:], rep(0, 45)), "slock: LOCK frame magic 0x57, want 0x56"},
		{cat([]byte{0x56, 0x03, 5}, rid1[:], rep(0, 45)), "slock: PING frame version 0x03, want 0x01"},
		{cat([]byte{0x56, 0x03, 99}, rid1[:], rep(0, 45)), "slock: Type(99) frame version 0x03, want 0x01"},
		{lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(1)), "slock: LOCK frame data record length 1 is below 2"},
		{lockFrame(2, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(1<<20+1)), "slock: UNLOCK frame data record length 1048577 exceeds 1048576"},
		{cat(head(7, rid1), []byte{0, 3, 1}, le32(1<<21), rep(0, 38)), "slock: CALL frame content length 2097152 exceeds 1048576"},
	} {
		if _, err := d.Parse(tt.in, &f); err == nil || err.Error() != tt.want {
			t.Errorf("Parse(% x) error %v, want %q", tt.in[:4], err, tt.want)
		}
	}
}

// TestParseLimits checks the data and CALL limits at their edges.
func TestParseLimits(t *testing.T) {
	big := record([]byte{0, 0}, rep('v', DefaultMaxData-2)) // N = 1 MiB exactly
	in := lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, big)
	var d Decoder
	var f Frame
	if n, err := d.Parse(in, &f); n != len(in) || err != nil || len(f.Data) != 4+DefaultMaxData {
		t.Fatalf("N = 1 MiB: Parse = %d, %v, len(Data) %d", n, err, len(f.Data))
	}
	small := Decoder{MaxData: 10, MaxCall: 3}
	in = lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, record(rep(1, 10)))
	if n, err := small.Parse(in, &f); n != len(in) || err != nil {
		t.Fatalf("N = MaxData: Parse = %d, %v", n, err)
	}
	in = cat(head(7, rid1), []byte{0, 3, 1}, le32(3), rep(0, 38), str("abc"))
	if n, err := small.Parse(in, &f); n != len(in) || err != nil || string(f.Body) != "abc" {
		t.Fatalf("ContentLen = MaxCall: Parse = %d, %v, %q", n, err, f.Body)
	}
	callMax := cat(head(7, rid1), []byte{0, 3, 1}, le32(DefaultMaxCall), rep(0, 38), rep('b', DefaultMaxCall))
	if n, err := d.Parse(callMax, &f); n != len(callMax) || err != nil {
		t.Fatalf("ContentLen = 1 MiB: Parse = %d, %v", n, err)
	}
}

// TestParseErrorsEarly checks that length errors come as soon as the length
// is there, without waiting for the bytes it claims, and header errors
// only once the 64 bytes are there.
func TestParseErrorsEarly(t *testing.T) {
	var d Decoder
	var f Frame
	dataHead := lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(DefaultMaxData+1))
	for i := 0; i < len(dataHead); i++ {
		if n, err := d.Parse(dataHead[:i], &f); n != 0 || err != nil {
			t.Fatalf("%d of %d bytes: Parse = %d, %v", i, len(dataHead), n, err)
		}
	}
	var le *LengthError
	if _, err := d.Parse(dataHead, &f); !errors.As(err, &le) {
		t.Fatalf("68 bytes: err = %v, want *LengthError", err)
	}
	callHead := cat(head(7, rid1), []byte{0, 3, 1}, le32(DefaultMaxCall+1), rep(0, 38))
	if _, err := d.Parse(callHead, &f); !errors.As(err, &le) {
		t.Fatalf("CALL header: err = %v, want *LengthError", err)
	}
	bad := cat([]byte{0x00, 0x01, 1}, rid1[:], rep(0, 45))
	for i := 0; i < len(bad); i++ {
		if n, err := d.Parse(bad[:i], &f); n != 0 || err != nil {
			t.Fatalf("bad magic, %d bytes: Parse = %d, %v", i, n, err)
		}
	}
	var he *HeaderError
	if _, err := d.Parse(bad, &f); !errors.As(err, &he) || he.Len != 64 {
		t.Fatalf("bad magic, 64 bytes: err = %v", err)
	}
}

// splitFrames are whole frames for the split and pipelining tests.
var splitFrames = map[string][]byte{
	"lock":         lockFrame(1, 0x03, 0, 5, 0, 10, 0, 0, 0),
	"lock-data":    lockFrame(1, 0x20, 0, 5, 0, 10, 0, 0, 0, record([]byte{0x02, 0x01}, le64(7))),
	"unlock-props": lockFrame(2, 0x20, 0, 5, 0, 10, 0, 0, 0, record([]byte{0x00, 0x10}, le16(4), []byte{1, 1, 0, 'k'}, str("val"))),
	"will-data":    lockFrame(9, 0x20, 0, 0, 0, 0, 0, 0, 0, record([]byte{0x00, 0x00})),
	"init":         cat(head(0, rid1), cid1[:], rep(0, 29)),
	"state":        cat(head(3, rid1), []byte{0, 1}, rep(0, 43)),
	"ping":         cat(head(5, rid1), rep(0, 45)),
	"call":         cat(head(7, rid1), []byte{0, 3, 1}, le32(4), pad(str("LIST_WAIT"), 38), []byte{8, 1, 0x12, 0}),
	"call-empty":   cat(head(7, rid1), []byte{0, 3, 1}, le32(0), pad(str("LIST_LOCK"), 38)),
}

func TestParseSplits(t *testing.T) {
	for name, fr := range splitFrames {
		var d Decoder
		var want Frame
		if n, err := d.Parse(fr, &want); n != len(fr) || err != nil {
			t.Fatalf("%s: whole frame: Parse = %d, %v", name, n, err)
		}
		// Every prefix is "need more", and leaves *f alone.
		for i := 0; i < len(fr); i++ {
			f := Frame{Type: 0x99}
			if n, err := d.Parse(fr[:i], &f); n != 0 || err != nil || f.Type != 0x99 {
				t.Fatalf("%s: %d of %d bytes: Parse = %d, %v, frame %+v", name, i, len(fr), n, err, f)
			}
		}
		// A frame split in two at every byte, reassembled as a
		// connection's buffer would be, parses the same.
		for i := 1; i < len(fr); i++ {
			buf := append([]byte(nil), fr[:i]...)
			var f Frame
			if n, _ := d.Parse(buf, &f); n != 0 {
				t.Fatalf("%s: first part of %d bytes parsed", name, i)
			}
			buf = append(buf, fr[i:]...)
			if n, err := d.Parse(buf, &f); n != len(fr) || err != nil {
				t.Fatalf("%s: split at %d: Parse = %d, %v", name, i, n, err)
			}
			want.Raw = buf[:len(fr)]
			if f.Data != nil {
				want.Data = buf[64:len(fr)]
			}
			if !eqFrame(f, want) {
				t.Fatalf("%s: split at %d:\n got %+v\nwant %+v", name, i, f, want)
			}
		}
	}
}

func TestParsePipelined(t *testing.T) {
	order := []string{"init", "lock", "lock-data", "ping", "call", "unlock-props", "call-empty", "state", "will-data"}
	var stream []byte
	for _, name := range order {
		stream = append(stream, splitFrames[name]...)
	}
	var d Decoder
	buf := stream
	for _, name := range order {
		var f Frame
		n, err := d.Parse(buf, &f)
		if err != nil || n != len(splitFrames[name]) {
			t.Fatalf("%s: Parse = %d, %v; want %d", name, n, err, len(splitFrames[name]))
		}
		if !bytes.Equal(f.Raw, splitFrames[name]) {
			t.Fatalf("%s: Raw = % x", name, f.Raw)
		}
		buf = buf[n:]
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left", len(buf))
	}
}

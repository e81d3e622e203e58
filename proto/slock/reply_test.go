package slock

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestAppendReplies(t *testing.T) {
	value := record([]byte{0x00, 0x01}, le64(42))
	lr := LockReply{Type: TypeLock, RequestID: rid1, Result: ResultUnownError, DB: 4, LockID: lid1, Key: key1,
		Lcount: 0x0102, Count: 0xfffe, Lrcount: 3, Rcount: 0xfe}
	lrValue := lr
	lrValue.Value = value
	unlock := LockReply{Type: TypeUnlock, RequestID: rid1, Result: ResultOK, Value: []byte{}}
	state := State{DBState: 1, DB: 9, LockCount: 0x0102030405060708, UnlockCount: 0xa0b0c0d0e0f00011,
		LockedCount: 1, WaitCount: 2, TimeoutedCount: 3, ExpriedCount: 4, UnlockErrorCount: 0xfffffffe, KeyCount: 0x01020304}
	body := []byte{0x0a, 0x00}
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"lock-reply", AppendLockReply(nil, &lr),
			cat([]byte{0x56, 0x01, 0x01}, rid1[:], []byte{7, 0x00, 4}, lid1[:], key1[:],
				[]byte{0x02, 0x01, 0xfe, 0xff, 3, 0xfe, 0, 0, 0, 0})},
		{"lock-reply/value", AppendLockReply([]byte("prefix"), &lrValue),
			cat(str("prefix"), []byte{0x56, 0x01, 0x01}, rid1[:], []byte{7, 0x20, 4}, lid1[:], key1[:],
				[]byte{0x02, 0x01, 0xfe, 0xff, 3, 0xfe, 0, 0, 0, 0},
				[]byte{10, 0, 0, 0, 0x00, 0x01, 42, 0, 0, 0, 0, 0, 0, 0})},
		{"unlock-reply/empty-value", AppendLockReply(nil, &unlock),
			cat([]byte{0x56, 0x01, 0x02}, rid1[:], rep(0, 45))},
		{"simple/ping", AppendSimple(nil, TypePing, rid1, ResultOK),
			cat([]byte{0x56, 0x01, 0x05}, rid1[:], rep(0, 45))},
		{"simple/quit", AppendSimple(nil, TypeQuit, rid1, ResultOK),
			cat([]byte{0x56, 0x01, 0x06}, rid1[:], rep(0, 45))},
		{"simple/admin", AppendSimple(nil, TypeAdmin, rid1, ResultOK),
			cat([]byte{0x56, 0x01, 0x04}, rid1[:], rep(0, 45))},
		{"simple/unknown", AppendSimple(nil, 0xee, rid1, ResultUnknownCommand),
			cat([]byte{0x56, 0x01, 0xee}, rid1[:], []byte{4}, rep(0, 44))},
		{"init/standalone", AppendInit(nil, rid1, InitStandalone),
			cat([]byte{0x56, 0x01, 0x00}, rid1[:], []byte{0, 0x0c}, rep(0, 43))},
		{"init/known-client", AppendInit(nil, rid1, InitStandalone|InitKnownClient),
			cat([]byte{0x56, 0x01, 0x00}, rid1[:], []byte{0, 0x0d}, rep(0, 43))},
		{"state", AppendState(nil, rid1, &state),
			cat([]byte{0x56, 0x01, 0x03}, rid1[:], []byte{0, 0, 1, 9},
				[]byte{8, 7, 6, 5, 4, 3, 2, 1}, []byte{0x11, 0x00, 0xf0, 0xe0, 0xd0, 0xc0, 0xb0, 0xa0},
				[]byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 4, 3, 2, 1, 0})},
		{"state/no-db", AppendState(nil, rid1, &State{DB: 200}),
			cat([]byte{0x56, 0x01, 0x03}, rid1[:], []byte{0, 0, 0, 200}, rep(0, 41))},
		{"call/ok", AppendCall(nil, rid1, ResultOK, "", body),
			cat([]byte{0x56, 0x01, 0x07}, rid1[:], []byte{0, 0, 3, 1, 2, 0, 0, 0}, rep(0, 37), body)},
		{"call/decode-error", AppendCall(nil, rid1, ResultUnknownError, ErrTypeDecode, nil),
			cat([]byte{0x56, 0x01, 0x07}, rid1[:], []byte{11, 0, 3, 1, 0, 0, 0, 0}, pad(str("DECODE_ERROR"), 37))},
		{"call/unknown-db", AppendCall(nil, rid1, ResultUnknownDB, ErrTypeUnknownDB, nil),
			cat([]byte{0x56, 0x01, 0x07}, rid1[:], []byte{3, 0, 3, 1, 0, 0, 0, 0}, pad(str("UNKNOWN_DB_ERROR"), 37))},
		{"call/lock-manager", AppendCall(nil, rid1, ResultUnknownDB, ErrTypeLockManager, nil),
			cat([]byte{0x56, 0x01, 0x07}, rid1[:], []byte{3, 0, 3, 1, 0, 0, 0, 0}, pad(str("LOCK_MANAGER_ERROR"), 37))},
		{"call/unknown-method", AppendCall(nil, rid1, ResultUnknownCommand, "", nil),
			cat([]byte{0x56, 0x01, 0x07}, rid1[:], []byte{4, 0, 3, 1, 0, 0, 0, 0}, rep(0, 37))},
		{"call/errtype-37", AppendCall(nil, rid1, ResultOK, strings.Repeat("E", 37), nil),
			cat([]byte{0x56, 0x01, 0x07}, rid1[:], []byte{0, 0, 3, 1, 0, 0, 0, 0}, rep('E', 37))},
		{"leader", AppendLeader(nil, rid1, "127.0.0.1:5658"),
			cat([]byte{0x56, 0x01, 0x0a}, rid1[:], []byte{0, 0}, pad(str("127.0.0.1:5658"), 43))},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s:\n got % x\nwant % x", tt.name, tt.got, tt.want)
		}
	}
}

func TestAppendErrorReply(t *testing.T) {
	var d Decoder
	var f Frame
	rid := seq16(0xa0)
	badMagic := cat([]byte{0x55, 0x01, 0x01}, rid[:], rep(0xff, 45))
	_, err := d.Parse(badMagic, &f)
	if got, want := AppendErrorReply(nil, err), cat([]byte{0x56, 0x01, 0x01}, rid[:], []byte{1}, rep(0, 44)); !bytes.Equal(got, want) {
		t.Errorf("bad magic:\n got % x\nwant % x", got, want)
	}
	badVersion := cat([]byte{0x56, 0x09, 0x42}, rid[:], rep(0xff, 45))
	_, err = d.Parse(badVersion, &f)
	if got, want := AppendErrorReply(str("x"), err), cat(str("x"), []byte{0x56, 0x01, 0x42}, rid[:], []byte{2}, rep(0, 44)); !bytes.Equal(got, want) {
		t.Errorf("bad version:\n got % x\nwant % x", got, want)
	}
	_, err = d.Parse(lockFrame(1, 0x20, 0, 0, 0, 0, 0, 0, 0, le32(0)), &f)
	if err == nil {
		t.Fatal("no error for a data record of length 0")
	}
	for _, e := range []error{err, nil, errors.New("other"), (*HeaderError)(nil)} {
		if got := AppendErrorReply(str("keep"), e); string(got) != "keep" {
			t.Errorf("AppendErrorReply(%v) = %q, want dst unchanged", e, got)
		}
	}
}

func TestSetCallLen(t *testing.T) {
	out := str("before")
	start := len(out)
	out = AppendCall(out, rid1, ResultOK, "", nil)
	out = append(out, "0123456789"...)
	SetCallLen(out[start:])
	want := cat(str("before"), []byte{0x56, 0x01, 0x07}, rid1[:], []byte{0, 0, 3, 1, 10, 0, 0, 0}, rep(0, 37), str("0123456789"))
	if !bytes.Equal(out, want) {
		t.Fatalf("\n got % x\nwant % x", out, want)
	}
}

func TestReplyPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"call errtype 38":  func() { AppendCall(nil, rid1, 0, strings.Repeat("E", 38), nil) },
		"leader host 44":   func() { AppendLeader(nil, rid1, strings.Repeat("h", 44)) },
		"SetCallLen short": func() { SetCallLen(make([]byte, 63)) },
		"method 39":        func() { AppendCallRequest(nil, rid1, strings.Repeat("M", 39), nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

package slock

import (
	"strings"
	"testing"
)

func TestParseAllocs(t *testing.T) {
	d := &Decoder{}
	frames := map[string][]byte{
		"bad-magic":   cat([]byte{0x00, 0x01, 1}, rid1[:], rep(0, 45)),
		"unknown":     cat(head(0x40, rid1), rep(0, 45)),
		"leader":      cat(head(10, rid1), rep(0, 45)),
		"unlock-copy": lockFrame(2, 0, 0, 0, 0, 0, 0, 0, 0),
	}
	for name, f := range splitFrames {
		frames[name] = f
	}
	for name, fr := range frames {
		var f Frame
		if a := testing.AllocsPerRun(100, func() { d.Parse(fr, &f) }); a != 0 && name != "bad-magic" {
			t.Errorf("%s: Parse allocates %.1f times", name, a)
		}
		if a := testing.AllocsPerRun(100, func() { d.Parse(fr[:len(fr)-1], &f) }); a != 0 {
			t.Errorf("%s: incomplete Parse allocates %.1f times", name, a)
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	value := record([]byte{0x00, 0x00}, str("value"))
	lr := LockReply{Type: TypeLock, RequestID: rid1, LockID: lid1, Key: key1, Lcount: 1, Value: value}
	lockReq := Frame{Type: TypeLock, RequestID: rid1, LockID: lid1, Key: key1, Data: value}
	state := State{DBState: 1, LockCount: 5}
	props := []Property{{PropKey, str("name")}}
	rec := record([]byte{0x07, 0x12}, le16(7), []byte{1, 4, 0}, str("name"), le32(1), str("a"), le32(0), le32(2), str("bc"))
	kv := cat(le32(1), str("k"), le32(1), str("v"))
	reply := AppendLockReply(nil, &lr)
	call := AppendCall(nil, rid1, ResultOK, "", []byte{1, 2})
	listBody := AppendListRequest(nil, 3, key1[:])
	data := &LockData{Value: str("v"), Cmd: 0, Flag: 0}
	locks := []ListLock{{Key: key1, LockedCount: 1, Data: data}, {Key: lid1}}
	locked := ListLocked{Key: key1, LockedCount: 1, Locks: []Locked{{LockID: lid1, StartTime: 1, Command: testCmd}}, Data: data}
	waits := ListWait{Key: key1, Waits: []Wait{{LockID: lid1, StartTime: 1, Command: testCmd}}, Data: data}
	text := []byte(strings.Repeat("x", 40))
	var headerErr error = &HeaderError{Result: ResultUnknownMagic, RequestID: rid1}
	dst := make([]byte, 0, 4096)
	var r Reply
	var sink int
	for name, f := range map[string]func(){
		"AppendLockReply":          func() { dst = AppendLockReply(dst[:0], &lr) },
		"AppendSimple":             func() { dst = AppendSimple(dst[:0], TypePing, rid1, ResultOK) },
		"AppendErrorReply":         func() { dst = AppendErrorReply(dst[:0], headerErr) },
		"AppendInit":               func() { dst = AppendInit(dst[:0], rid1, InitStandalone) },
		"AppendState":              func() { dst = AppendState(dst[:0], rid1, &state) },
		"AppendCall":               func() { dst = AppendCall(dst[:0], rid1, ResultUnknownDB, ErrTypeUnknownDB, nil) },
		"SetCallLen":               func() { SetCallLen(call) },
		"AppendLeader":             func() { dst = AppendLeader(dst[:0], rid1, "127.0.0.1:5658") },
		"AppendLockRequest":        func() { dst = AppendLockRequest(dst[:0], &lockReq) },
		"AppendInitRequest":        func() { dst = AppendInitRequest(dst[:0], rid1, cid1) },
		"AppendPing":               func() { dst = AppendPing(dst[:0], rid1) },
		"AppendStateRequest":       func() { dst = AppendStateRequest(dst[:0], rid1, 1) },
		"AppendCallRequest":        func() { dst = AppendCallRequest(dst[:0], rid1, MethodListLock, listBody) },
		"ParseReply":               func() { sink, _ = ParseReply(reply, DefaultMaxData, &r) },
		"ParseReply/call":          func() { sink, _ = ParseReply(call, DefaultMaxData, &r) },
		"AppendDataRecord":         func() { dst = AppendDataRecord(dst[:0], DataSet, 0, 0, props, str("v")) },
		"ParseDataRecord":          func() { d, _ := ParseDataRecord(rec); sink = len(d.Value) },
		"Prop":                     func() { v, _ := Prop(rec[8:15], PropKey); sink = len(v) },
		"ArrayLen":                 func() { sink = ArrayLen(rec[15:]) },
		"NextElem":                 func() { e, _, _ := NextElem(rec[15:]); sink = len(e) },
		"KVLen":                    func() { sink = KVLen(kv) },
		"Number":                   func() { sink = int(Number(value)) },
		"Sniff":                    func() { k, _ := Sniff(reply); sink = int(k) },
		"TextID/short":             func() { id := TextID(text[:5]); sink = int(id[15]) },
		"TextID/md5":               func() { id := TextID(text); sink = int(id[0]) },
		"TextID/hex":               func() { id := TextID(str("000102030405060708090a0b0c0d0e0f")); sink = int(id[0]) },
		"AppendHexID":              func() { dst = AppendHexID(dst[:0], key1) },
		"ParseListLockRequest":     func() { q, _ := ParseListLockRequest(listBody); sink = int(q.DB) },
		"ParseListKeyRequest":      func() { q, _ := ParseListKeyRequest(listBody); sink = int(q.Key[0]) },
		"AppendListLockResponse":   func() { dst = AppendListLockResponse(dst[:0], locks) },
		"AppendListLockedResponse": func() { dst = AppendListLockedResponse(dst[:0], &locked) },
		"AppendListWaitResponse":   func() { dst = AppendListWaitResponse(dst[:0], &waits) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s allocates %.1f times with a pre-sized dst", name, a)
		}
	}
	_ = sink
}

func benchParse(b *testing.B, fr []byte) {
	var d Decoder
	var f Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(fr)))
	for b.Loop() {
		if n, err := d.Parse(fr, &f); n != len(fr) || err != nil {
			b.Fatalf("Parse = %d, %v", n, err)
		}
	}
}

func BenchmarkParseLock(b *testing.B)     { benchParse(b, splitFrames["lock"]) }
func BenchmarkParseLockData(b *testing.B) { benchParse(b, splitFrames["lock-data"]) }
func BenchmarkParseCall(b *testing.B)     { benchParse(b, splitFrames["call"]) }

// BenchmarkParseStream parses a buffer of 64 lock/unlock frames, as one
// read of a pipelining client delivers them.
func BenchmarkParseStream(b *testing.B) {
	var stream []byte
	for i := 0; i < 32; i++ {
		stream = append(stream, splitFrames["lock"]...)
		stream = append(stream, lockFrame(2, 0, 0, 0, 0, 0, 0, 0, 0)...)
	}
	var d Decoder
	var f Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		for buf := stream; len(buf) > 0; {
			n, err := d.Parse(buf, &f)
			if n == 0 || err != nil {
				b.Fatalf("Parse = %d, %v", n, err)
			}
			buf = buf[n:]
		}
	}
}

func BenchmarkAppendLockReply(b *testing.B) {
	r := LockReply{Type: TypeLock, RequestID: rid1, LockID: lid1, Key: key1, Lcount: 1, Lrcount: 1}
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendLockReply(dst[:0], &r)
	}
}

func BenchmarkAppendLockReplyValue(b *testing.B) {
	r := LockReply{Type: TypeLock, RequestID: rid1, LockID: lid1, Key: key1, Lcount: 1, Lrcount: 1,
		Value: record([]byte{0x00, 0x01}, le64(12345))}
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendLockReply(dst[:0], &r)
	}
}

func BenchmarkParseReply(b *testing.B) {
	reply := AppendLockReply(nil, &LockReply{Type: TypeLock, RequestID: rid1, Value: record([]byte{0, 0}, str("v"))})
	var r Reply
	b.ReportAllocs()
	for b.Loop() {
		if n, err := ParseReply(reply, DefaultMaxData, &r); n != len(reply) || err != nil {
			b.Fatalf("ParseReply = %d, %v", n, err)
		}
	}
}

func BenchmarkTextID(b *testing.B) {
	keys := [][]byte{[]byte("short-key"), []byte("0123456789abcdef"), []byte("a-key-that-needs-md5-hashing")}
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range keys {
			_ = TextID(k)
		}
	}
}

func BenchmarkAppendListLockedResponse(b *testing.B) {
	r := ListLocked{Key: key1, LockedCount: 8, Data: &LockData{Value: str("v")}}
	for i := 0; i < 8; i++ {
		r.Locks = append(r.Locks, Locked{LockID: seq16(byte(i)), StartTime: 1700000000, ExpriedTime: 1700000100,
			LockedCount: 1, Command: testCmd})
	}
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendListLockedResponse(dst[:0], &r)
	}
}

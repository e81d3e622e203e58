package slock

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// More seeds for every target live in testdata/fuzz.

// u16 and u32 read little-endian numbers the plain way, for the models.
func u16(b []byte, i int) uint16 { return uint16(b[i]) | uint16(b[i+1])<<8 }
func u32(b []byte, i int) uint32 { return uint32(u16(b, i)) | uint32(u16(b, i+2))<<16 }

// modelFrame is a second, deliberately plain reading of §1, §7 and §8.1:
// the frame Parse must produce from fr, exactly one whole frame that
// passed the header and length checks.
func modelFrame(fr []byte) Frame {
	f := Frame{Type: Type(fr[2]), Raw: fr}
	copy(f.RequestID[:], fr[3:19])
	switch fr[2] {
	case 1, 2, 8, 9:
		f.Flag, f.DB = fr[19], fr[20]
		copy(f.LockID[:], fr[21:37])
		copy(f.Key[:], fr[37:53])
		f.Timeout, f.TimeoutFlag, f.Expried, f.ExpriedFlag, f.Count = u16(fr, 53), u16(fr, 55), u16(fr, 57), u16(fr, 59), u16(fr, 61)
		f.Rcount = fr[63]
		if fr[19]&0x20 != 0 {
			f.Data = fr[64:]
		}
	case 0:
		copy(f.ClientID[:], fr[19:35])
	case 3:
		f.Flag, f.DB = fr[19], fr[20]
	case 7:
		f.Flag, f.Encoding, f.Charset = fr[19], fr[20], fr[21]
		m := fr[26:64]
		if i := bytes.IndexByte(m, 0); i >= 0 {
			m = m[:i]
		}
		f.Method, f.Body = m, fr[64:]
	}
	return f
}

// frameLen is the model's framing: the frame's whole length given buf's
// first 68 bytes (or fewer), -1 for "need more", or the error expected.
func frameLen(buf []byte, maxData, maxCall uint32) (int, error) {
	if len(buf) < 64 {
		return -1, nil
	}
	if buf[0] != 0x56 || buf[1] != 0x01 {
		res := ResultUnknownMagic
		if buf[0] == 0x56 {
			res = ResultUnknownVersion
		}
		return 0, &HeaderError{Result: res, Magic: buf[0], Version: buf[1], Type: Type(buf[2]), RequestID: [16]byte(buf[3:19]), Len: 64}
	}
	if maxData == 0 {
		maxData = 1 << 20
	}
	if maxCall == 0 {
		maxCall = 1 << 20
	}
	switch t := buf[2]; {
	case (t == 1 || t == 2 || t == 8 || t == 9) && buf[19]&0x20 != 0:
		if len(buf) < 68 {
			return -1, nil
		}
		if n := u32(buf, 64); n < 2 || n > maxData {
			return 0, &LengthError{Type: Type(t), Field: "data record length", Len: n, Min: 2, Max: maxData}
		} else {
			return 68 + int(n), nil
		}
	case t == 7:
		if n := u32(buf, 22); n > maxCall {
			return 0, &LengthError{Type: Type(t), Field: "content length", Len: n, Max: maxCall}
		} else {
			return 64 + int(n), nil
		}
	}
	return 64, nil
}

func FuzzParse(f *testing.F) {
	f.Add(splitFrames["lock-data"], uint32(0), uint32(0))
	f.Add(cat(splitFrames["init"], splitFrames["call"], splitFrames["unlock-props"]), uint32(16), uint32(3))
	f.Fuzz(func(t *testing.T, data []byte, maxData, maxCall uint32) {
		d := Decoder{MaxData: maxData, MaxCall: maxCall}
		// Parse frame after frame, as a connection would.
		for buf := data; ; {
			f := Frame{Type: 0x99}
			n, err := d.Parse(buf, &f)
			wantN, wantErr := frameLen(buf, maxData, maxCall)
			if wantErr != nil {
				if n != 0 || !reflect.DeepEqual(err, wantErr) || f.Type != 0x99 {
					t.Fatalf("Parse(% x) = %d, %v; want 0, %v", buf[:64], n, err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(% x): unexpected error %v", buf[:64], err)
			}
			if wantN < 0 || wantN > len(buf) {
				if n != 0 || f.Type != 0x99 {
					t.Fatalf("incomplete frame (%d of %d bytes): n = %d, frame %+v", len(buf), wantN, n, f)
				}
				return
			}
			if n != wantN {
				t.Fatalf("n = %d, want %d", n, wantN)
			}
			fr := buf[:n]
			if want := modelFrame(fr); !reflect.DeepEqual(f, want) {
				t.Fatalf("Parse(% x)\n got %+v\nwant %+v", fr, f, want)
			}
			if f.Type.lockLayout() {
				// Every byte of a lock frame is a field: it re-encodes exactly.
				if again := AppendLockRequest(nil, &f); !bytes.Equal(again, fr) {
					t.Fatalf("re-encoded\n got % x\nwant % x", again, fr)
				}
			}
			buf = buf[n:]
		}
	})
}

// modelReply is the plain reading of a whole reply fr (§1.2, §7, §8.1).
func modelReply(fr []byte) Reply {
	var r Reply
	r.Type, r.Result, r.Flag = Type(fr[2]), Result(fr[19]), fr[20]
	copy(r.RequestID[:], fr[3:19])
	cut := func(b []byte) []byte {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return b[:i]
		}
		return b
	}
	switch fr[2] {
	case 1, 2, 8, 9:
		r.DB = fr[21]
		copy(r.LockID[:], fr[22:38])
		copy(r.Key[:], fr[38:54])
		r.Lcount, r.Count, r.Lrcount, r.Rcount = u16(fr, 54), u16(fr, 56), fr[58], fr[59]
		if fr[20]&0x20 != 0 {
			r.Value = fr[64:]
		}
	case 3:
		r.State = State{fr[21], fr[22], uint64(u32(fr, 23)) | uint64(u32(fr, 27))<<32,
			uint64(u32(fr, 31)) | uint64(u32(fr, 35))<<32, u32(fr, 39), u32(fr, 43), u32(fr, 47), u32(fr, 51), u32(fr, 55), u32(fr, 59)}
	case 7:
		r.Encoding, r.Charset, r.ErrType, r.Body = fr[21], fr[22], cut(fr[27:64]), fr[64:]
	case 10:
		r.Host = cut(fr[21:64])
	}
	return r
}

func FuzzParseReply(f *testing.F) {
	f.Add(AppendLockReply(nil, &LockReply{Type: TypeLock, Value: record([]byte{0, 0}, str("v"))}), uint32(100))
	f.Add(AppendCall(nil, rid1, 0, "E", []byte{1, 2, 3}), uint32(2))
	f.Fuzz(func(t *testing.T, data []byte, maxLen uint32) {
		for buf := data; ; {
			var r Reply
			n, err := ParseReply(buf, maxLen, &r)
			if len(buf) < 64 {
				if n != 0 || err != nil {
					t.Fatalf("short: ParseReply = %d, %v", n, err)
				}
				return
			}
			var he *HeaderError
			var le *LengthError
			switch {
			case buf[0] != 0x56 || buf[1] != 0x01:
				if n != 0 || !errors.As(err, &he) || he.Magic != buf[0] || he.Version != buf[1] {
					t.Fatalf("bad header: ParseReply = %d, %v", n, err)
				}
				return
			case err != nil:
				if n != 0 || !errors.As(err, &le) || (le.Len >= 2 || le.Type == TypeCall) && le.Len <= maxLen {
					t.Fatalf("ParseReply error %v", err)
				}
				return
			case n == 0:
				return // need more; the model is checked on whole replies
			}
			fr := buf[:n]
			want := modelReply(fr)
			if len(want.Value) > 0 && u32(fr, 64) != uint32(len(want.Value)-4) ||
				want.Type == TypeCall && u32(fr, 23) != uint32(len(want.Body)) {
				t.Fatalf("n = %d does not match the length field", n)
			}
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("ParseReply(% x)\n got %+v\nwant %+v", fr, r, want)
			}
			// A lock reply with a canonical flag byte and zero tail
			// re-encodes exactly.
			if r.Type.lockLayout() && (r.Flag == 0 || r.Flag == FlagData) && u32(fr, 60) == 0 {
				if again := AppendLockReply(nil, &r.LockReply); !bytes.Equal(again, fr) {
					t.Fatalf("re-encoded\n got % x\nwant % x", again, fr)
				}
			}
			buf = buf[n:]
		}
	})
}

func FuzzSniff(f *testing.F) {
	f.Add([]byte("\x56\x01\x00"))
	f.Add([]byte("*1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, wholeOK := Sniff(data)
		decided := false
		for i := 0; i <= len(data); i++ {
			kind, ok := Sniff(data[:i])
			if decided && !ok {
				t.Fatalf("undecided at %d bytes after deciding", i)
			}
			if ok {
				if !decided && i > 2 {
					t.Fatalf("needed %d bytes", i)
				}
				decided = true
				if kind != whole {
					t.Fatalf("%d bytes: %v, whole input: %v", i, kind, whole)
				}
			}
		}
		if wholeOK {
			want := Unknown
			switch {
			case data[0] == '*':
				want = RESP
			case len(data) >= 2 && data[0] == 0x56 && data[1] == 0x01:
				want = Binary
			}
			if whole != want {
				t.Fatalf("Sniff(% x) = %v, want %v", data, whole, want)
			}
		} else if len(data) > 1 || len(data) == 1 && data[0] != 0x56 {
			t.Fatalf("Sniff(% x) undecided", data)
		}
	})
}

func FuzzDataRecord(f *testing.F) {
	f.Add(record([]byte{0x07, 0x12}, le16(4), []byte{1, 1, 0, 'k'}, le32(1), str("a")))
	f.Add(record([]byte{0x02, 0x01}, le64(1)))
	f.Fuzz(func(t *testing.T, rec []byte) {
		d, err := ParseDataRecord(rec)
		valid := len(rec) >= 6 && int(u32(rec, 0)) == len(rec)-4 &&
			(rec[5]&0x10 == 0 || len(rec) >= 8 && 8+int(u16(rec, 6)) <= len(rec))
		if (err == nil) != valid {
			t.Fatalf("ParseDataRecord(% x): err %v, valid %v", rec, err, valid)
		}
		if err != nil {
			return
		}
		// The parts are views that re-encode to the record, when the
		// property area is whole entries.
		var props []Property
		p := d.Props
		for {
			c, v, rest, ok := NextProp(p)
			if !ok {
				break
			}
			props, p = append(props, Property{c, v}), rest
		}
		if len(p) == 0 {
			if again := AppendDataRecord(nil, d.Cmd, d.Stage, d.Flag, props, d.Value); !bytes.Equal(again, rec) {
				t.Fatalf("re-encoded\n got % x\nwant % x", again, rec)
			}
		}
		// The iterators stay inside the value and agree with the counts.
		n := 0
		for e, rest, ok := NextElem(d.Value); ok; e, rest, ok = NextElem(rest) {
			if len(e) == 0 || len(rest) >= len(d.Value) {
				t.Fatalf("NextElem: empty element or no progress")
			}
			n++
		}
		if n != ArrayLen(d.Value) {
			t.Fatalf("ArrayLen %d, walked %d", ArrayLen(d.Value), n)
		}
		n = 0
		for _, _, rest, ok := NextPair(d.Value); ok; _, _, rest, ok = NextPair(rest) {
			n++
		}
		if n != KVLen(d.Value) {
			t.Fatalf("KVLen %d, walked %d", KVLen(d.Value), n)
		}
		_ = DataKind(d.Flag)
		_ = Number(d.Value)
	})
}

// FuzzListRequest checks the CALL request decoders against the protobuf
// library's decoding of the same body with the §8.2 schema.
func FuzzListRequest(f *testing.F) {
	f.Add(AppendListRequest(nil, 3, key1[:]))
	f.Add([]byte{0x0b, 0x08, 0x01, 0x0c, 0x08, 0x02})
	f.Fuzz(func(t *testing.T, body []byte) {
		lib := dynamicpb.NewMessage(schema(t, "LockDBListLockedRequest"))
		libErr := proto.Unmarshal(body, lib)
		r, err := ParseListKeyRequest(body)
		if (err == nil) != (libErr == nil) {
			t.Fatalf("ParseListKeyRequest(% x) error %v, library %v", body, err, libErr)
		}
		if err != nil {
			var ce *CallError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset >= len(body) {
				t.Fatalf("error %v: not a *CallError inside the body", err)
			}
			return
		}
		fields := lib.Descriptor().Fields()
		var key [16]byte
		copy(key[:], lib.Get(fields.ByName("lock_key")).Bytes())
		want := ListRequest{DB: uint32(lib.Get(fields.ByName("db_id")).Uint()), Key: key}
		if r != want {
			t.Fatalf("ParseListKeyRequest(% x) = %+v, library %+v", body, r, want)
		}
		if l, err := ParseListLockRequest(body); err != nil || l != (ListRequest{DB: want.DB}) {
			t.Fatalf("ParseListLockRequest(% x) = %+v, %v", body, l, err)
		}
	})
}

func FuzzTextID(f *testing.F) {
	f.Add([]byte("key"))
	f.Add([]byte("000102030405060708090a0b0c0d0e0F"))
	f.Fuzz(func(t *testing.T, s []byte) {
		id := TextID(s)
		var want [16]byte
		dec, hexErr := hex.DecodeString(string(s))
		switch {
		case len(s) == 16:
			copy(want[:], s)
		case len(s) == 32 && hexErr == nil:
			copy(want[:], dec)
		case len(s) > 16:
			want = md5.Sum(s)
		default:
			copy(want[16-len(s):], s)
		}
		if id != want {
			t.Fatalf("TextID(%q) = % x, want % x", s, id, want)
		}
		h := AppendHexID(nil, id)
		if back := TextID(h); back != id || len(h) != 32 || string(h) != hex.EncodeToString(id[:]) {
			t.Fatalf("hex %q does not map back to % x", h, id)
		}
	})
}

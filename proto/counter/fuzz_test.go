package counter

import (
	"bytes"
	"errors"
	"testing"
)

// model is a second, deliberately plain reading of NOTES §1 and §2 that
// FuzzParse checks Parse against. frame is exactly one whole frame.
func model(dialect Dialect, frame []byte) Request {
	r := Request{Opcode: Opcode(frame[1])}
	r.Opaque = uint32(frame[8])<<24 | uint32(frame[9])<<16 | uint32(frame[10])<<8 | uint32(frame[11])
	body := frame[12:]
	u16 := func(i int) int { return int(body[i])<<8 | int(body[i+1]) }
	u32 := func(i int) uint32 { return uint32(u16(i))<<16 | uint32(u16(i+2)) }
	switch {
	case frame[0] != 0x90:
		r.Status = StatusInvalid
	case r.Opcode == 0x00 || r.Opcode == 0x10 || (r.Opcode == 0x11 && dialect != Semaphore):
	case r.Opcode == 0x01:
		if len(body) < 2 || u16(0) == 0 || 2+u16(0) > len(body) {
			r.Status = StatusInvalid
		} else {
			r.Name = body[2 : 2+u16(0)]
		}
	case r.Opcode == 0x02:
		if len(body) < 10 || u32(0) == 0 || u32(4) < u32(0) || u16(8) == 0 || 10+u16(8) > len(body) {
			r.Status = StatusInvalid
		} else {
			r.Resources, r.Maximum, r.Name = u32(0), u32(4), body[10:10+u16(8)]
		}
	case r.Opcode == 0x03:
		if len(body) < 6 || u16(4) == 0 || 6+u16(4) > len(body) {
			r.Status = StatusInvalid
		} else {
			r.Resources, r.Name = u32(0), body[6:6+u16(4)]
		}
	default:
		r.Status = StatusUnknownCommand
	}
	return r
}

func FuzzParse(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzParse.
	f.Add(AppendAcquire(nil, 1, 1, 2, []byte("a")), false, uint32(DefaultMaxBody))
	f.Add(AppendRelease(AppendGet(nil, 1, []byte("a")), 2, 1, []byte("a")), true, uint32(16))
	f.Fuzz(func(t *testing.T, data []byte, semaphore bool, maxBody uint32) {
		d := Decoder{Dialect: Counter, MaxBody: maxBody}
		if semaphore {
			d.Dialect = Semaphore
		}
		// Parse frame after frame, as a connection would.
		for buf := data; ; {
			var r Request
			n, err := d.Parse(buf, &r)
			if len(buf) < HeaderLen {
				if n != 0 || err != nil {
					t.Fatalf("short buffer: Parse = %d, %v", n, err)
				}
				return
			}
			blen := uint32(buf[4])<<24 | uint32(buf[5])<<16 | uint32(buf[6])<<8 | uint32(buf[7])
			if blen > maxBody {
				var e *BodyTooLargeError
				if n != 0 || !errors.As(err, &e) || e.Length != blen || e.Limit != maxBody {
					t.Fatalf("blen %d > max %d: Parse = %d, %v", blen, maxBody, n, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse error %v for blen %d <= max %d", err, blen, maxBody)
			}
			if uint64(len(buf)) < HeaderLen+uint64(blen) {
				if n != 0 {
					t.Fatalf("incomplete frame: n = %d", n)
				}
				return
			}
			if n != HeaderLen+int(blen) || n > len(buf) {
				t.Fatalf("n = %d, want %d (buffer %d)", n, HeaderLen+int(blen), len(buf))
			}
			fr := buf[:n]
			if want := model(d.Dialect, fr); !eqRequest(r, want) {
				t.Fatalf("Parse(% x)\n got %+v\nwant %+v", fr, r, want)
			}
			if len(r.Name) > 0 && !inside(r.Name, fr[HeaderLen:]) {
				t.Fatalf("Name %q is not inside the frame body", r.Name)
			}
			if r.Status == StatusOK {
				reencode(t, d, r)
			}
			buf = buf[n:]
		}
	})
}

// inside reports whether sub is a sub-slice of s's memory.
func inside(sub, s []byte) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if &s[i] == &sub[0] {
			return true
		}
	}
	return false
}

// reencode writes r back with the client appenders and checks that it
// parses to the same fields.
func reencode(t *testing.T, d Decoder, r Request) {
	var enc []byte
	switch r.Opcode {
	case OpGet:
		enc = AppendGet(nil, r.Opaque, r.Name)
	case OpAcquire:
		enc = AppendAcquire(nil, r.Opaque, r.Resources, r.Maximum, r.Name)
	case OpRelease:
		enc = AppendRelease(nil, r.Opaque, r.Resources, r.Name)
	default:
		enc = AppendRequest(nil, r.Opcode, r.Opaque, nil)
	}
	d.MaxBody = MaxRequestLen
	var back Request
	if n, err := d.Parse(enc, &back); n != len(enc) || err != nil || !eqRequest(back, r) {
		t.Fatalf("re-encoded % x: Parse = %d, %v, %+v; want %+v", enc, n, err, back, r)
	}
}

func FuzzParseResponse(f *testing.F) {
	f.Add(AppendStats(nil, 1, []Stat{{"objects", 1}}), uint32(1024))
	f.Fuzz(func(t *testing.T, data []byte, maxBody uint32) {
		for buf := data; ; {
			var r Response
			n, err := ParseResponse(buf, maxBody, &r)
			if len(buf) < HeaderLen {
				if n != 0 || err != nil {
					t.Fatalf("short buffer: ParseResponse = %d, %v", n, err)
				}
				return
			}
			blen := uint32(buf[4])<<24 | uint32(buf[5])<<16 | uint32(buf[6])<<8 | uint32(buf[7])
			var me *MagicError
			var te *BodyTooLargeError
			switch {
			case buf[0] != 0x91:
				if n != 0 || !errors.As(err, &me) || me.Magic != buf[0] {
					t.Fatalf("magic 0x%02x: ParseResponse = %d, %v", buf[0], n, err)
				}
				return
			case blen > maxBody:
				if n != 0 || !errors.As(err, &te) {
					t.Fatalf("blen %d > max %d: ParseResponse = %d, %v", blen, maxBody, n, err)
				}
				return
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			case uint64(len(buf)) < HeaderLen+uint64(blen):
				if n != 0 {
					t.Fatalf("incomplete frame: n = %d", n)
				}
				return
			}
			if n != HeaderLen+int(blen) || n > len(buf) {
				t.Fatalf("n = %d, want %d (buffer %d)", n, HeaderLen+int(blen), len(buf))
			}
			fr := buf[:n]
			if len(r.Body) != int(blen) || (blen > 0 && &r.Body[0] != &fr[HeaderLen]) {
				t.Fatalf("Body is not the frame's body")
			}
			// Re-encoding gives the same frame, but for Reserved, which is ignored.
			enc := append(AppendHeader(nil, r.Opcode, r.Status, blen, r.Opaque), r.Body...)
			if want := append([]byte{fr[0], fr[1], fr[2], 0}, fr[4:]...); !bytes.Equal(enc, want) {
				t.Fatalf("re-encoded\n% x\nwant\n% x", enc, want)
			}
			if cur, max, name, err := ParseDumpBody(r.Body); err == nil {
				if got := AppendDumpEntry(nil, r.Opaque, cur, max, name)[HeaderLen:]; !bytes.Equal(got, r.Body) {
					t.Fatalf("dump entry re-encoded to % x, want % x", got, r.Body)
				}
			}
			if stats, err := ParseStatsBody(r.Body); err == nil {
				var re []byte
				for _, s := range stats {
					re = append(re, byte(len(s.Name)>>8), byte(len(s.Name)), byte(len(s.Value)>>8), byte(len(s.Value)))
					re = append(append(re, s.Name...), s.Value...)
				}
				if !bytes.Equal(re, r.Body) {
					t.Fatalf("stats items %q do not rebuild the body % x", stats, r.Body)
				}
			}
			buf = buf[n:]
		}
	})
}

package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// model is a second, deliberately plain reading of the layout in peer.go
// that FuzzPeerParse checks ParseLimit against: it reads the fields one by
// one off a bytes.Reader into copies. It returns the frame and its length,
// n == 0 for "wait for more", or bad for a frame ParseLimit must reject.
func model(buf []byte, limit int) (f Frame, n int, bad bool) {
	if limit <= 0 {
		limit = MaxFrame
	}
	if len(buf) < 4 {
		return Frame{}, 0, false
	}
	size := int64(buf[0])<<24 | int64(buf[1])<<16 | int64(buf[2])<<8 | int64(buf[3])
	if size == 0 || size > int64(limit) {
		return Frame{}, 0, true
	}
	if len(buf) < 5 {
		return Frame{}, 0, false
	}
	fixed := map[Type]int64{
		TypeHello: 18, TypeRaft: 0, TypeForward: 23, TypeReply: 8, TypeChallenge: 32, TypeProof: 32,
		TypeClose: 9, TypeJoin: 10, TypeJoinReply: 13,
	}
	t := Type(buf[4])
	least, known := fixed[t]
	if !known || size-1 < least {
		return Frame{}, 0, true
	}
	if int64(len(buf)) < 4+size {
		return Frame{}, 0, false
	}
	r := bytes.NewReader(buf[5 : 4+size])
	failed := false
	u8 := func() uint8 {
		b, err := r.ReadByte()
		failed = failed || err != nil
		return b
	}
	u16 := func() uint16 {
		var v uint16
		failed = failed || binary.Read(r, binary.BigEndian, &v) != nil
		return v
	}
	u64 := func() uint64 {
		var v uint64
		failed = failed || binary.Read(r, binary.BigEndian, &v) != nil
		return v
	}
	str := func() []byte {
		s := make([]byte, u16())
		if _, err := io.ReadFull(r, s); err != nil {
			failed = true
		}
		return s
	}
	rest := func() []byte {
		b, _ := io.ReadAll(r)
		return b
	}
	f.Type = t
	switch t {
	case TypeHello:
		f.From, f.ClusterID, f.Addr = u64(), u64(), str()
	case TypeRaft:
		f.Msg = rest()
	case TypeForward:
		f.Session, f.Client, f.Kind, f.Level, f.DB, f.Timeout, f.TimeoutFlag = u64(), u64(), u8(), u8(), u8(), u16(), u16()
		if f.Kind >= 0x80 { // a user's name follows, and it is never empty
			f.Kind -= 0x80
			f.User = str()
			bad = len(f.User) == 0
		}
		f.Data = rest()
		bad = bad || f.Kind < 1 || f.Kind > 3 || f.Level == 0 || f.Level > 3
	case TypeReply:
		f.Session, f.Data = u64(), rest()
	case TypeClose:
		f.Session, f.Why = u64(), u8()
	case TypeJoin:
		f.ID, f.Addr = u64(), str()
	case TypeChallenge, TypeProof:
		f.Auth = make([]byte, AuthLen)
		if _, err := io.ReadFull(r, f.Auth); err != nil {
			failed = true
		}
	case TypeJoinReply:
		ok := u8()
		f.OK, f.LeaderID, f.LeaderAddr, f.Err = ok == 1, u64(), str(), str()
		bad = ok > 1
	}
	if failed || bad || r.Len() != 0 {
		return Frame{}, 0, true
	}
	return f, int(4 + size), false
}

func eqFrame(a, b Frame) bool {
	return a.Type == b.Type && a.From == b.From && a.ClusterID == b.ClusterID && bytes.Equal(a.Addr, b.Addr) &&
		bytes.Equal(a.Msg, b.Msg) && a.Session == b.Session && a.Client == b.Client && a.Kind == b.Kind && a.Level == b.Level &&
		a.DB == b.DB && a.Timeout == b.Timeout && a.TimeoutFlag == b.TimeoutFlag && bytes.Equal(a.Data, b.Data) && bytes.Equal(a.User, b.User) &&
		a.Why == b.Why && a.ID == b.ID && a.OK == b.OK && a.LeaderID == b.LeaderID &&
		bytes.Equal(a.LeaderAddr, b.LeaderAddr) && bytes.Equal(a.Err, b.Err) && bytes.Equal(a.Auth, b.Auth)
}

// reencode writes f back with the appenders.
func reencode(f Frame) []byte {
	switch f.Type {
	case TypeHello:
		return AppendHello(nil, f.From, f.ClusterID, string(f.Addr))
	case TypeRaft:
		return AppendRaft(nil, f.Msg)
	case TypeForward:
		return AppendForwardAs(nil, f.Session, f.Client, f.Kind, f.Level, f.DB, f.Timeout, f.TimeoutFlag, string(f.User), f.Data)
	case TypeReply:
		return AppendReply(nil, f.Session, f.Data)
	case TypeClose:
		return AppendClose(nil, f.Session, f.Why)
	case TypeJoin:
		return AppendJoin(nil, f.ID, string(f.Addr))
	case TypeJoinReply:
		return AppendJoinReply(nil, f.OK, f.LeaderID, string(f.LeaderAddr), string(f.Err))
	case TypeChallenge, TypeProof:
		return AppendAuth(nil, f.Type, (*[AuthLen]byte)(f.Auth))
	}
	return nil
}

// inside reports whether v lies within buf.
func inside(v, buf []byte) bool {
	if len(v) == 0 {
		return true
	}
	for i := range buf {
		if &buf[i] == &v[0] {
			return i+len(v) <= len(buf)
		}
	}
	return false
}

func FuzzPeerParse(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzPeerParse.
	f.Add(AppendReply(AppendHello(nil, 1, 7, "10.0.0.1:7000"), 3, []byte("+OK\r\n")), uint16(0))
	f.Add(AppendForward(nil, 9, 9<<32|5, KindText, LevelQuorum, 0, 5, 0, []byte("*1\r\n$4\r\nPING\r\n")), uint16(20))
	f.Add(AppendForwardAs(nil, 9, 9<<32|5, KindSlock, LevelAll, 2, 0, 0, "alice", []byte("*1\r\n$4\r\nPING\r\n")), uint16(0))
	f.Add(AppendJoinReply(AppendJoin(nil, 4, "h:1"), false, 2, "10.0.0.2:7000", "not the leader")[:30], uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		for buf := data; ; {
			got, n, err := ParseLimit(buf, int(limit))
			want, wn, bad := model(buf, int(limit))
			switch {
			case bad:
				if err == nil || n != 0 || !eqFrame(got, Frame{}) {
					t.Fatalf("ParseLimit(%q, %d) = %+v, %d, %v; want an error", buf, limit, got, n, err)
				}
				if !errors.Is(err, ErrType) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
					t.Fatalf("ParseLimit(%q, %d): error %v wraps none of the package's", buf, limit, err)
				}
				return
			case err != nil || n != wn || !eqFrame(got, want):
				t.Fatalf("ParseLimit(%q, %d)\n got %+v, %d, %v\nwant %+v, %d", buf, limit, got, n, err, want, wn)
			case n == 0:
				return
			}
			frame := buf[:n]
			for _, v := range [][]byte{got.Addr, got.Msg, got.User, got.Data, got.LeaderAddr, got.Err} {
				if len(v) > 0 && (!inside(v, frame) || cap(v) != len(v)) {
					t.Fatalf("%q is not a capped view into the frame %q", v, frame)
				}
			}
			if enc := reencode(got); !bytes.Equal(enc, frame) {
				t.Fatalf("frame %q re-encodes as %q", frame, enc)
			}
			// Every part of a good frame is only "wait for more".
			step := 1
			if n > 64 {
				step = n / 16
			}
			for k := 0; k < n; k += step {
				if pf, m, err := ParseLimit(frame[:k], int(limit)); m != 0 || err != nil || !eqFrame(pf, Frame{}) {
					t.Fatalf("first %d bytes of %q: ParseLimit = %+v, %d, %v; want to wait", k, frame, pf, m, err)
				}
			}
			buf = buf[n:]
		}
	})
}

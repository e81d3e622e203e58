package counter

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestAppendReplies(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"header", AppendHeader(nil, OpGet, StatusNotFound, 0x01020304, 0xa1b2c3d4),
			[]byte{0x91, 0x01, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0xa1, 0xb2, 0xc3, 0xd4}},
		{"header/unknown-op", AppendHeader(nil, 0x12, StatusUnknownCommand, 0, 7),
			[]byte{0x91, 0x12, 0x81, 0x00, 0, 0, 0, 0, 0, 0, 0, 7}},
		{"ok/noop", AppendOK(nil, OpNoop, 0),
			[]byte{0x91, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"ok/release", AppendOK(nil, OpRelease, 0xffffffff),
			[]byte{0x91, 0x03, 0x00, 0x00, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
		{"ok/dump-end", AppendOK(nil, OpDump, 0x100),
			[]byte{0x91, 0x11, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 1, 0}},
		{"error/not-found", AppendError(nil, OpGet, StatusNotFound, 1),
			[]byte("\x91\x01\x01\x00\x00\x00\x00\x09\x00\x00\x00\x01Not found")},
		{"error/invalid", AppendError(nil, OpAcquire, StatusInvalid, 2),
			[]byte("\x91\x02\x04\x00\x00\x00\x00\x11\x00\x00\x00\x02Invalid arguments")},
		{"error/invalid-bad-magic-opcode", AppendError(nil, 0xee, StatusInvalid, 2),
			[]byte("\x91\xee\x04\x00\x00\x00\x00\x11\x00\x00\x00\x02Invalid arguments")},
		{"error/not-available", AppendError(nil, OpAcquire, StatusNotAvailable, 3),
			[]byte("\x91\x02\x21\x00\x00\x00\x00\x16\x00\x00\x00\x03Resource not available")},
		{"error/not-acquired", AppendError(nil, OpRelease, StatusNotAcquired, 4),
			[]byte("\x91\x03\x22\x00\x00\x00\x00\x0c\x00\x00\x00\x04Not acquired")},
		{"error/unknown-command", AppendError(nil, 0x12, StatusUnknownCommand, 5),
			[]byte("\x91\x12\x81\x00\x00\x00\x00\x0f\x00\x00\x00\x05Unknown command")},
		{"error/out-of-memory", AppendError(nil, OpAcquire, StatusOutOfMemory, 6),
			[]byte("\x91\x02\x82\x00\x00\x00\x00\x0d\x00\x00\x00\x06Out of memory")},
		{"error/ok-status", AppendError(nil, OpNoop, StatusOK, 7),
			[]byte("\x91\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x07")},
		{"error/undefined-status", AppendError(nil, OpNoop, 0x05, 8),
			[]byte("\x91\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x08")},
		{"uint32/get", AppendUint32(nil, OpGet, 9, 0),
			[]byte{0x91, 0x01, 0, 0, 0, 0, 0, 4, 0, 0, 0, 9, 0, 0, 0, 0}},
		{"uint32/acquire", AppendUint32(nil, OpAcquire, 10, 0xcafebabe),
			[]byte{0x91, 0x02, 0, 0, 0, 0, 0, 4, 0, 0, 0, 10, 0xca, 0xfe, 0xba, 0xbe}},
		{"dump-entry", AppendDumpEntry(nil, 11, 3, 0x01000002, []byte("ab")),
			[]byte{0x91, 0x11, 0, 0, 0, 0, 0, 12, 0, 0, 0, 11, 0, 0, 0, 3, 1, 0, 0, 2, 0, 2, 'a', 'b'}},
		{"dump-entry/nul-name", AppendDumpEntry(nil, 12, 0, 0, []byte{0}),
			[]byte{0x91, 0x11, 0, 0, 0, 0, 0, 11, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}},
		{"stats/empty", AppendStats(nil, 13, nil),
			[]byte{0x91, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13}},
		{"stats", AppendStats(nil, 14, []Stat{{"objects", 3}, {"conflicts", 0}, {"command:get", 1234567890}}),
			[]byte("\x91\x10\x00\x00\x00\x00\x00\x33\x00\x00\x00\x0e" +
				"\x00\x07\x00\x01objects3" +
				"\x00\x09\x00\x01conflicts0" +
				"\x00\x0b\x00\x0acommand:get1234567890")},
		{"stats/max-uint64", AppendStats(nil, 15, []Stat{{"x", math.MaxUint64}}),
			[]byte("\x91\x10\x00\x00\x00\x00\x00\x19\x00\x00\x00\x0f\x00\x01\x00\x14x18446744073709551615")},
		// Appending keeps what dst held.
		{"append/keeps-prefix", AppendOK([]byte("pre"), OpNoop, 1),
			[]byte("pre\x91\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01")},
		{"append/stats-after-reply", AppendStats(AppendUint32(nil, OpGet, 1, 2), 3, []Stat{{"a", 42}}),
			[]byte("\x91\x01\x00\x00\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x02" +
				"\x91\x10\x00\x00\x00\x00\x00\x07\x00\x00\x00\x03\x00\x01\x00\x02a42")},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, tc.got, tc.want)
		}
	}
}

// TestAppendStatsLayout walks a STATS body with the full tallyd stat list and
// checks every item and the BodyLength, independently of ParseStatsBody.
func TestAppendStatsLayout(t *testing.T) {
	names := []string{"objects", "total_objects", "used_memory", "conflicts", "gc_count",
		"last_gc_elapsed", "total_gc_elapsed", "curr_connections", "total_connections",
		"command:noop", "command:get", "command:acquire", "command:release", "command:stats", "command:dump"}
	stats := make([]Stat, len(names))
	for i, n := range names {
		stats[i] = Stat{n, uint64(i) * 1000003}
	}
	b := AppendStats(nil, 0x77, stats)
	if string(b[:4]) != "\x91\x10\x00\x00" || string(b[8:12]) != "\x00\x00\x00\x77" {
		t.Fatalf("header % x", b[:12])
	}
	if blen := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7]); blen != len(b)-12 {
		t.Fatalf("BodyLength %d, body has %d bytes", blen, len(b)-12)
	}
	body := b[12:]
	for i, s := range stats {
		nl, vl := int(body[0])<<8|int(body[1]), int(body[2])<<8|int(body[3])
		name, value := string(body[4:4+nl]), string(body[4+nl:4+nl+vl])
		if name != s.Name || value != strconv.FormatUint(s.Value, 10) {
			t.Fatalf("item %d = %q=%q, want %q=%d", i, name, value, s.Name, s.Value)
		}
		body = body[4+nl+vl:]
	}
	if len(body) != 0 {
		t.Fatalf("%d bytes after the last item", len(body))
	}
}

func TestAppendPanicsOnLongName(t *testing.T) {
	long := make([]byte, MaxNameLen+1)
	for name, f := range map[string]func(){
		"AppendDumpEntry": func() { AppendDumpEntry(nil, 1, 1, 1, long) },
		"AppendStats":     func() { AppendStats(nil, 1, []Stat{{string(long), 1}}) },
		"AppendGet":       func() { AppendGet(nil, 1, long) },
		"AppendAcquire":   func() { AppendAcquire(nil, 1, 1, 1, long) },
		"AppendRelease":   func() { AppendRelease(nil, 1, 1, long) },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "length 65536 exceeds 65535") {
					t.Errorf("%s: panic %q, want one naming the length", name, msg)
				}
			}()
			f()
		}()
	}
	// MaxNameLen itself is fine.
	b := AppendDumpEntry(nil, 1, 1, 1, long[:MaxNameLen])
	if len(b) != HeaderLen+10+MaxNameLen || b[20] != 0xff || b[21] != 0xff {
		t.Fatalf("max-length dump entry: %d bytes, namelen % x", len(b), b[20:22])
	}
}

package counter

import (
	"reflect"
	"strconv"
	"testing"
)

func TestStatCmdOf(t *testing.T) {
	want := map[Opcode]StatCmd{OpNoop: StatNoop, OpGet: StatGet, OpAcquire: StatAcquire,
		OpRelease: StatRelease, OpStats: StatStats, OpDump: StatDump}
	for op := range 256 {
		c, ok := StatCmdOf(Opcode(op))
		w, counted := want[Opcode(op)]
		if ok != counted || c != w {
			t.Errorf("StatCmdOf(%#x) = %d, %v; want %d, %v", op, c, ok, w, counted)
		}
	}
}

// TestAppendServerStats: every figure in its place, in the reference's order, and
// command:dump only for the counter dialect.
func TestAppendServerStats(t *testing.T) {
	s := ServerStats{Objects: 1, TotalObjects: 2, UsedMemory: 3, GCCount: 4, LastGCElapsed: 5,
		TotalGCElapsed: 6, CurrConnections: 7, TotalConnections: 8,
		Commands: [NumStatCmds]uint64{9, 10, 11, 12, 13, 1 << 63}}
	names := []string{"objects", "total_objects", "used_memory", "conflicts", "gc_count",
		"last_gc_elapsed", "total_gc_elapsed", "curr_connections", "total_connections",
		"command:noop", "command:get", "command:acquire", "command:release", "command:stats", "command:dump"}
	values := []string{"1", "2", "3", "0", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13",
		strconv.FormatUint(1<<63, 10)}
	for _, withDump := range []bool{true, false} {
		s.WithDump = withDump
		buf := AppendServerStats([]byte("pre"), 0xdeadbeef, &s)
		if string(buf[:3]) != "pre" {
			t.Fatalf("prefix clobbered: %q", buf[:3])
		}
		var r Response
		n, err := ParseResponse(buf[3:], 1<<20, &r)
		if err != nil || n != len(buf)-3 || r.Opcode != OpStats || r.Status != StatusOK || r.Opaque != 0xdeadbeef {
			t.Fatalf("ParseResponse = %d, %v, %+v (of %d bytes)", n, err, r, len(buf)-3)
		}
		items, err := ParseStatsBody(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		k := len(names)
		if !withDump {
			k--
		}
		var want []StatText
		for i := range k {
			want = append(want, StatText{names[i], values[i]})
		}
		if !reflect.DeepEqual(items, want) {
			t.Errorf("WithDump %v:\n got %q\nwant %q", withDump, items, want)
		}
	}
}

// TestAppendServerStatsMatchesAppendStats: the two encoders agree byte for byte.
func TestAppendServerStatsMatchesAppendStats(t *testing.T) {
	s := ServerStats{Objects: 12, UsedMemory: 1 << 40, Commands: [NumStatCmds]uint64{2: 3}}
	list := []Stat{{"objects", 12}, {"total_objects", 0}, {"used_memory", 1 << 40}, {"conflicts", 0},
		{"gc_count", 0}, {"last_gc_elapsed", 0}, {"total_gc_elapsed", 0}, {"curr_connections", 0},
		{"total_connections", 0}, {"command:noop", 0}, {"command:get", 0}, {"command:acquire", 3},
		{"command:release", 0}, {"command:stats", 0}}
	if got, want := AppendServerStats(nil, 7, &s), AppendStats(nil, 7, list); string(got) != string(want) {
		t.Fatalf("AppendServerStats = % x\nAppendStats      = % x", got, want)
	}
}

func TestAppendServerStatsAllocs(t *testing.T) {
	s := ServerStats{Objects: 123456, TotalConnections: 99, WithDump: true}
	dst := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { dst = AppendServerStats(dst[:0], 1, &s) }); n != 0 {
		t.Fatalf("AppendServerStats allocates %.1f times with a pre-sized dst", n)
	}
}

package pool

import (
	"strings"
	"testing"
)

func TestAppendRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"acq4me", AppendAcq4Me(nil, []byte("key"), 1, 2, 3), "ACQ4ME key 1 2 3\n"},
		{"acq4me/zeros", AppendAcq4Me(nil, []byte("k"), 0, 0, 0), "ACQ4ME k 0 0 0\n"},
		{"acq4me/max", AppendAcq4Me(nil, []byte("k"), max32, max32, max32), "ACQ4ME k 4294967295 4294967295 4294967295\n"},
		{"acq4any", AppendAcq4Any(nil, []byte("a%20b"), 10, 20, 30), "ACQ4ANY a%20b 10 20 30\n"},
		{"acq4any/odd-key", AppendAcq4Any(nil, []byte("\x00\t\r\xff"), 1, 1, 0), "ACQ4ANY \x00\t\r\xff 1 1 0\n"},
		{"release", AppendRelease(nil), "RELEASE\n"},
		{"stats/full", AppendStats(nil, "FULL"), "STATS FULL\n"},
		{"stats/empty", AppendStats(nil, ""), "STATS \n"},
		{"keeps-prefix", AppendRelease([]byte("RELEASE\n")), "RELEASE\nRELEASE\n"},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestRequestRoundTrip sends client-encoded requests through the server's Decoder.
func TestRequestRoundTrip(t *testing.T) {
	long := strings.Repeat("L", DefaultMaxLine-len("ACQ4ANY  4294967295 4294967295 4294967295"))
	var buf []byte
	want := []Request{
		me("k", 1, 2, 3),
		anyone(long, max32, max32, max32),
		release,
		stats("UPTIME"),
		me("\x00\r\t\xff", 0, 0, 0),
		stats("lock_while_waiting"),
	}
	for _, r := range want {
		switch r.Cmd {
		case CmdAcq4Me:
			buf = AppendAcq4Me(buf, r.Key, r.Workers, r.MaxQueue, r.Timeout)
		case CmdAcq4Any:
			buf = AppendAcq4Any(buf, r.Key, r.Workers, r.MaxQueue, r.Timeout)
		case CmdRelease:
			buf = AppendRelease(buf)
		case CmdStats:
			buf = AppendStats(buf, string(r.StatArg))
		}
	}
	d := Decoder{}
	got, rest := parseAll(t, &d, buf)
	if len(rest) != 0 || len(got) != len(want) {
		t.Fatalf("got %d requests, %q left; want %d", len(got), rest, len(want))
	}
	for i := range got {
		if !eqRequest(got[i], want[i]) {
			t.Errorf("request %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestAppendRequestPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"empty-key", func() { AppendAcq4Me(nil, nil, 1, 1, 1) }, "ACQ4ME with an empty key"},
		{"space", func() { AppendAcq4Any(nil, []byte("a b"), 1, 1, 1) }, `ACQ4ANY key "a b" contains a space`},
		{"newline", func() { AppendAcq4Me(nil, []byte("a\nb"), 1, 1, 1) }, `ACQ4ME key "a\nb" contains a newline`},
		{"stats-newline", func() { AppendStats(nil, "FULL\nRELEASE") }, `STATS argument "FULL\nRELEASE" contains a newline`},
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, tc.msg) {
					t.Errorf("%s: panic %q, want one containing %q", tc.name, msg, tc.msg)
				}
			}()
			tc.f()
		}()
	}
}

package pool

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendReply(t *testing.T) {
	want := map[Reply]string{
		Locked:          "LOCKED\n",
		Done:            "DONE\n",
		QueueFull:       "QUEUE_FULL\n",
		Timeout:         "TIMEOUT\n",
		LockHeld:        "LOCK_HELD\n",
		NotLocked:       "NOT_LOCKED\n",
		Released:        "RELEASED\n",
		BadCommand:      "ERROR BAD_COMMAND\n",
		BadSyntax:       "ERROR BAD_SYNTAX\n",
		WaitForResponse: "ERROR WAIT_FOR_RESPONSE\n",
		WrongStat:       "ERROR WRONG_STAT\n",
		LineTooLong:     "ERROR LINE_TOO_LONG\n",
	}
	if len(want) != int(numReplies) {
		t.Fatalf("the table has %d replies, the package %d", len(want), numReplies)
	}
	for r, w := range want {
		if got := AppendReply(nil, r); string(got) != w {
			t.Errorf("AppendReply(%d) = %q, want %q", r, got, w)
		}
		if got := AppendReply([]byte("x"), r); string(got) != "x"+w {
			t.Errorf("AppendReply onto \"x\" = %q, want %q", got, "x"+w)
		}
		if got := r.String(); got != strings.TrimSuffix(w, "\n") {
			t.Errorf("Reply(%d).String() = %q, want %q", r, got, strings.TrimSuffix(w, "\n"))
		}
	}
	// All replies in a row read back line by line, in order.
	var out []byte
	for r := Reply(0); r < numReplies; r++ {
		out = AppendReply(out, r)
	}
	for r := Reply(0); r < numReplies; r++ {
		line, n := ParseReplyLine(out)
		if n == 0 || string(line) != r.String() {
			t.Fatalf("reply %d read back as %q (n %d)", r, line, n)
		}
		out = out[n:]
	}
	if len(out) != 0 {
		t.Fatalf("left over %q", out)
	}
}

func TestAppendReplyUnknownPanics(t *testing.T) {
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "unknown reply 12") {
			t.Fatalf("panic %q, want one naming reply 12", msg)
		}
	}()
	AppendReply(nil, numReplies)
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{CmdBad.String(), "BAD"},
		{CmdAcq4Me.String(), "ACQ4ME"},
		{CmdAcq4Any.String(), "ACQ4ANY"},
		{CmdRelease.String(), "RELEASE"},
		{CmdStats.String(), "STATS"},
		{Cmd(5).String(), "Cmd(5)"},
		{Reply(200).String(), "Reply(200)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseReplyLine(t *testing.T) {
	for _, tc := range []struct {
		buf  string
		line string
		n    int
	}{
		{"", "", 0},
		{"LOCKED", "", 0},
		{"LOCKED\n", "LOCKED", 7},
		{"LOCKED\nDONE\n", "LOCKED", 7},
		{"\n", "", 1},
		{"\nmore", "", 1},
		{"ERROR WRONG_STAT\r\n", "ERROR WRONG_STAT\r", 18},
	} {
		buf := []byte(tc.buf)
		line, n := ParseReplyLine(buf)
		if n != tc.n || string(line) != tc.line {
			t.Errorf("ParseReplyLine(%q) = %q, %d; want %q, %d", tc.buf, line, n, tc.line, tc.n)
		}
		if len(line) > 0 && (&line[0] != &buf[0] || cap(line) != len(line)) {
			t.Errorf("ParseReplyLine(%q): line is not a capped view into buf", tc.buf)
		}
	}
	// A STATS FULL block ends with an empty line.
	block := []byte("uptime: 0 days, 0h 0m 1s\nprocessed_count: 0\n\nLOCKED\n")
	var lines []string
	for {
		line, n := ParseReplyLine(block)
		if n == 0 {
			t.Fatalf("block ended without an empty line: %q", lines)
		}
		block = block[n:]
		if len(line) == 0 {
			break
		}
		lines = append(lines, string(line))
	}
	if len(lines) != 2 || !bytes.Equal(block, []byte("LOCKED\n")) {
		t.Fatalf("block read as %q, left %q", lines, block)
	}
}

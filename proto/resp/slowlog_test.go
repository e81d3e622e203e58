package resp

import (
	"strings"
	"testing"
)

// TestSlowlogArgs: Redis's truncation of a logged command line, and the reply's shape.
func TestSlowlogArgs(t *testing.T) {
	var args [][]byte
	args = append(args, []byte("MGET"))
	for range 40 {
		args = append(args, []byte("k"))
	}
	got := AppendSlowlogArgs(nil, args)
	if len(got) != 32 || string(got[31]) != "... (10 more arguments)" || string(got[30]) != "k" {
		t.Fatalf("41 arguments kept as %d, last %q", len(got), got[len(got)-1])
	}
	long := []byte(strings.Repeat("y", 200))
	got = AppendSlowlogArgs(nil, [][]byte{[]byte("SET"), []byte("x"), long})
	if want := strings.Repeat("y", 128) + "... (72 more bytes)"; string(got[2]) != want {
		t.Fatalf("a 200-byte argument kept as %q", got[2])
	}
	long[0] = 'z'
	if got[2][0] != 'y' {
		t.Fatal("the entry shares the argument's bytes")
	}
	rep := string(AppendSlowlog(nil, []SlowlogEntry{{ID: 5, Time: 1795705255, Micros: 9,
		Args: [][]byte{[]byte("SET"), []byte("x")}, Addr: "127.0.0.1:57104", Name: "me"}}))
	want := "*1\r\n*6\r\n:5\r\n:1795705255\r\n:9\r\n*2\r\n$3\r\nSET\r\n$1\r\nx\r\n$15\r\n127.0.0.1:57104\r\n$2\r\nme\r\n"
	if rep != want {
		t.Fatalf("AppendSlowlog = %q, want %q", rep, want)
	}
}

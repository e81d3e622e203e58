package resp

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		arg, name string
		want      bool
	}{
		{"SET", "SET", true},
		{"set", "SET", true},
		{"SeT", "SET", true},
		{"lock_id", "LOCK_ID", true},
		{"LOCK_ID", "lock_id", true},
		{"", "", true},
		{"SET ", "SET", false},
		{"SE", "SET", false},
		{"GET", "SET", false},
		{"lock-id", "LOCK_ID", false},
		{"LOCK\x7fID", "LOCK_ID", false}, // 0x7f|0x20 == '_'|0x20: only letters fold
		{"@", "`", false},                // '@'|0x20 == '`'
		{"[", "{", false},                // '['|0x20 == '{'
		{"1", "\x11", false},             // '1' == 0x11|0x20
		{"\x00", " ", false},
		{"ſ", "S", false},      // U+017F folds to 's' in Unicode, not here
		{"\u212a", "K", false}, // the Kelvin sign
		{"ÉCHO", "éCHO", false},
		{"é", "é", true},
	} {
		if got := Is([]byte(tc.arg), tc.name); got != tc.want {
			t.Errorf("Is(%q, %q) = %v, want %v", tc.arg, tc.name, got, tc.want)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"15", 15, true},
		{"65535", 65535, true},
		{"-120", -120, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775806", math.MaxInt64 - 1, true},
		{"-9223372036854775807", math.MinInt64 + 1, true},
		// Redis's string2ll rejects all of these (checked against redis-server 7.0:
		// SET k <in>, then INCR k answers "value is not an integer").
		{"", 0, false},
		{"-", 0, false},
		{"-0", 0, false},
		{"00", 0, false},
		{"007", 0, false},
		{"-01", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1\r\n", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"--1", 0, false},
		{"1-", 0, false},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"18446744073709551615", 0, false},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"-99999999999999999999", 0, false},
		{"92233720368547758070", 0, false},
		{"000000000000000000001", 0, false},
		{"١", 0, false}, // an Arabic-Indic digit
	} {
		got, ok := ParseInt([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestProtocolErrorText(t *testing.T) {
	var d Decoder
	_, _, err := d.Parse([]byte("*1\r\n$x"), nil)
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *ProtocolError", err)
	}
	if got, want := err.Error(), "resp: bulk length has byte 'x' at offset 5"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for c, want := range map[byte]string{'a': "'a'", 0: "0x00", '\'': "0x27", '\\': "0x5c", 0xff: "0xff", '\r': "0x0d"} {
		if got := quoteByte(c); got != want {
			t.Errorf("quoteByte(%#x) = %s, want %s", c, got, want)
		}
	}
	if !strings.Contains(ErrInline.Error(), "inline") {
		t.Errorf("ErrInline = %q", ErrInline)
	}
}

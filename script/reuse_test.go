package script

import (
	"testing"
)

// KEYS and ARGV are reused from run to run, yet each run sees only its own: whatever a
// script added to them (string keys, more elements, a metatable, by rawset or
// table.insert), removed or replaced is gone at the next run, as with a new table.
func TestKeysArgvFreshEachRun(t *testing.T) {
	e, f := New(Limits{}), &fakeCall{}
	check := `return {#KEYS, #ARGV, KEYS[1], KEYS[2] or 'nil', ARGV[1] or 'nil', ARGV[2] or 'nil',
		tostring(KEYS.x), tostring(ARGV.y), tostring(getmetatable(KEYS)), tostring(rawget(KEYS, 3)),
		tostring(next(ARGV, #ARGV > 0 and #ARGV or nil))}`
	want := "*11\r\n:1\r\n:1\r\n$1\r\na\r\n$3\r\nnil\r\n$1\r\nb\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n"
	for _, mess := range []string{
		"KEYS.x = 1",
		"ARGV.y = 2",
		"table.insert(KEYS, 'more')",
		"KEYS[3] = 'z'",
		"rawset(KEYS, 3, 'z')",
		"setmetatable(KEYS, {__index = function() return 'meta' end})",
		"KEYS[1] = nil ARGV[1] = 5",
		"table.remove(KEYS) KEYS.x = 1",
		"table.remove(ARGV) ARGV.y = 2",
		"KEYS[1.5] = 'half'",
		"KEYS[100000000] = 'far'",
		"for i = 1, 300 do ARGV[i] = i end",
		"error('stopped midway' .. tostring(table.insert(KEYS, 'x')))",
	} {
		eval(t, e, f, mess, []string{"k1", "k2"}, "a1", "a2", "a3")
		if got := eval(t, e, f, check, []string{"a"}, "b"); got != want {
			t.Errorf("after %q: %q, want %q", mess, got, want)
		}
	}
	// Shrinking and growing.
	if got := eval(t, e, f, "return {#KEYS, #ARGV}", []string{"1", "2", "3"}, "x", "y"); got != "*2\r\n:3\r\n:2\r\n" {
		t.Fatalf("3 keys, 2 args: %q", got)
	}
	if got := eval(t, e, f, "return {#KEYS, #ARGV, KEYS[2] == nil}", []string{"1"}); got != "*3\r\n:1\r\n:0\r\n:1\r\n" {
		t.Fatalf("1 key: %q", got)
	}
}

// An EVALSHA of a small cached script allocates only what its values need: the KEYS and
// ARGV tables and strings already in place are reused, small integers are not boxed, and
// the script's name is looked up without a string.
func TestEvalSHAFewAllocations(t *testing.T) {
	e := New(Limits{})
	reply := []byte(":42\r\n")
	call := func([][]byte) []byte { return reply }
	body := "if redis.call('int') == 42 then return redis.call('int') end return 0"
	sha, err := e.Load([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{SHA: []byte(sha), NumKeys: []byte("1"), Rest: [][]byte{[]byte("lock:1"), []byte("token")}, Call: call}
	var dst []byte
	run := func() { dst = e.Eval(dst[:0], r) }
	run()
	if string(dst) != ":42\r\n" {
		t.Fatalf("reply %q", dst)
	}
	if a := testing.AllocsPerRun(100, run); a > 0 {
		t.Fatalf("%v allocations per EVALSHA, want none", a)
	} else {
		t.Logf("%v allocations per EVALSHA", a)
	}
}

package loop

import (
	"strconv"
	"testing"
)

// Issue 21, item 1: SLOWLOG GET|LEN|RESET, with Redis's reply shapes, shows the commands that
// ran longer than --slowlog-log-slower-than: here an MGET of 20,000 keys, which goes on
// across turns and is logged once, with the time it ran, not the time others were served in
// between.
func TestSlowlogShowsTheSlowCommand(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.SlowlogSlowerThan = 2000 })
	rc := dialResp(t, ts.slockAddr)
	fillKeys(t, rc, 20_000)
	expectSimple(t, rc.cmd("CLIENT", "SETNAME", "slowpoke"), '+', "OK")
	expectSimple(t, rc.cmd("SLOWLOG", "RESET"), '+', "OK")
	if r := rc.cmd("SLOWLOG", "LEN"); r.Kind != ':' || r.Int != 0 {
		t.Fatalf("SLOWLOG LEN after RESET: %s", showResp(r))
	}
	mget := []string{"MGET"}
	for i := range 20_000 {
		mget = append(mget, "k:"+strconv.Itoa(i))
	}
	if r := rc.cmd(mget...); len(r.Elems) != 20_000 {
		t.Fatalf("MGET: %d elements", len(r.Elems))
	}
	expectSimple(t, rc.cmd("PING"), '+', "PONG")
	if r := rc.cmd("SLOWLOG", "LEN"); r.Int != 1 {
		t.Fatalf("SLOWLOG LEN: %s, want 1 (the MGET)", showResp(r))
	}
	r := rc.cmd("SLOWLOG", "GET")
	if r.Kind != '*' || len(r.Elems) != 1 || len(r.Elems[0].Elems) != 6 {
		t.Fatalf("SLOWLOG GET: %s", showResp(r))
	}
	e := r.Elems[0].Elems
	args := e[3].Elems
	if e[0].Kind != ':' || e[1].Kind != ':' || e[1].Int < 1_700_000_000 || e[2].Int < 2000 {
		t.Fatalf("entry id %s, time %s, duration %s µs", showResp(e[0]), showResp(e[1]), showResp(e[2]))
	}
	if len(args) != 32 || string(args[0].Str) != "MGET" || string(args[1].Str) != "k:0" ||
		string(args[31].Str) != "... (19970 more arguments)" {
		t.Fatalf("entry's arguments: %d, first %q, last %q", len(args), args[0].Str, args[len(args)-1].Str)
	}
	if string(e[4].Str) != rc.c.LocalAddr().String() || string(e[5].Str) != "slowpoke" {
		t.Fatalf("entry's client %q, name %q; want %q, slowpoke", e[4].Str, e[5].Str, rc.c.LocalAddr())
	}
	runKV(t, rc, []kvStep{
		kv(`[]`, "SLOWLOG", "GET", "0"),
		kv(`-ERR count should be greater than or equal to -1`, "SLOWLOG", "GET", "-2"),
		kv(`-ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.`, "SLOWLOG", "GET", "1", "2"),
		kv(`-ERR unknown subcommand 'FOO'. Try SLOWLOG HELP.`, "SLOWLOG", "FOO"),
		kv(`-ERR wrong number of arguments for 'slowlog' command`, "SLOWLOG"),
		kv(`-ERR wrong number of arguments for 'slowlog|len' command`, "SLOWLOG", "LEN", "x"),
		kv(`+OK`, "SLOWLOG", "RESET"),
		kv(`:0`, "SLOWLOG", "LEN"),
		kv(`["slowlog-log-slower-than" "2000" "slowlog-max-len" "128"]`, "CONFIG", "GET", "slowlog*"),
	})
	if r := rc.cmd("SLOWLOG", "HELP"); len(r.Elems) != 12 {
		t.Fatalf("SLOWLOG HELP: %s", showResp(r))
	}
}

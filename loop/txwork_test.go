package loop

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/resp"
)

// multi sends MULTI, cmds and EXEC in one write and returns the replies to cmds and EXEC's.
func multi(t *testing.T, rc *respClient, cmds [][]string) ([]resp.Reply, resp.Reply) {
	t.Helper()
	b := resp.AppendCommand(nil, "MULTI")
	for _, c := range cmds {
		b = resp.AppendCommand(b, c...)
	}
	rc.write(resp.AppendCommand(b, "EXEC"))
	expectSimple(t, rc.reply(), '+', "OK")
	got := make([]resp.Reply, len(cmds))
	for i := range cmds {
		got[i] = rc.reply()
	}
	return got, rc.reply()
}

// Issue 21, item 1: MULTI with 20,000 HINCRBY on a 16k-field hash held the loop 14.9 s, and
// 2,000 KEYS inside MULTI 14.5 s. A MULTI queue is bounded in estimated work and in
// commands: past either, the command answers an error and EXEC aborts, running nothing.
func TestMultiQueueBounds(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MultiMaxCommands = 1000 })
	rc := dialResp(t, ts.slockAddr)
	hset := []string{"HSET", "h"}
	for i := range 16_000 {
		hset = append(hset, "field"+strconv.Itoa(i), "1")
	}
	if r := rc.cmd(hset...); r.Int != 16_000 {
		t.Fatalf("HSET of 16,000 fields: %s", showResp(r))
	}
	var cmds [][]string
	for range 900 {
		cmds = append(cmds, []string{"HINCRBY", "h", "field1", "1"})
	}
	got, exec := multi(t, rc, cmds)
	refused := -1
	for i, r := range got {
		if r.Kind == '-' {
			refused = i
			if !strings.Contains(string(r.Str), "--multi-max-work") {
				t.Fatalf("HINCRBY %d: %s", i, showResp(r))
			}
			break
		}
	}
	if refused < 1 || refused > 500 {
		t.Fatalf("900 HINCRBY on a 16k-field hash: first refused at %d", refused)
	}
	if exec.Kind != '-' || !strings.HasPrefix(string(exec.Str), "EXECABORT") {
		t.Fatalf("EXEC: %s", showResp(exec))
	}
	if r := rc.cmd("HGET", "h", "field1"); string(r.Str) != "1" {
		t.Fatalf("HGET after the aborted EXEC: %s, want 1", showResp(r))
	}

	// KEYS over many keys, the same.
	fillKeys(t, rc, 20_000)
	cmds = cmds[:0]
	for range 200 {
		cmds = append(cmds, []string{"KEYS", "zzz*"})
	}
	got, exec = multi(t, rc, cmds)
	refused = -1
	for i, r := range got {
		if r.Kind == '-' {
			refused = i
			break
		}
	}
	if refused < 1 || exec.Kind != '-' {
		t.Fatalf("200 KEYS over 20,000 keys inside MULTI: first refused %d, EXEC %s", refused, showResp(exec))
	}

	// And the count of commands, however cheap.
	cmds = cmds[:0]
	for range 1001 {
		cmds = append(cmds, []string{"INCR", "n"})
	}
	got, exec = multi(t, rc, cmds)
	if r := got[1000]; r.Kind != '-' || !strings.Contains(string(r.Str), "--multi-max-commands") || got[999].Kind != '+' {
		t.Fatalf("INCR 1,001 inside MULTI: %s (1,000th %s)", showResp(r), showResp(got[999]))
	}
	if exec.Kind != '-' {
		t.Fatalf("EXEC: %s", showResp(exec))
	}
	// Under the bounds a transaction runs.
	_, exec = multi(t, rc, cmds[:1000])
	if exec.Kind != '*' || len(exec.Elems) != 1000 || exec.Elems[999].Int != 1000 {
		t.Fatalf("EXEC of 1,000 INCR: %s", showResp(exec))
	}
}

package e2e

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRedisDifferentialLockScripts runs the scripts lock libraries send (redis-py's Lock,
// redsync, node-redlock: script/testdata/lock-scripts.json has their bodies) on
// redis-server, on tallyd, which runs them as native ops, and on tallyd with
// --lua-native-locks=false, which runs them on Lua, and compares each reply, and the key
// after, byte for byte (a PTTL within the time between the requests): keys missing, holding
// the token with and without a TTL, another's token, a hash; TTLs that are not integers;
// EVALSHA, EVALSHA_RO and EVAL; other counts of keys and arguments.
func TestRedisDifferentialLockScripts(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../script/testdata/lock-scripts.json")
	if err != nil {
		t.Fatal(err)
	}
	var scripts []struct{ Name, Body, SHA1 string }
	if err := json.Unmarshal(b, &scripts); err != nil {
		t.Fatal(err)
	}
	ref := rdDial(t, rdStartRedis(t))
	native := rdDial(t, rdStartTallyd(t))
	lua := rdDial(t, rdStartTallyd(t, "--lua-native-locks=false"))
	n := 0
	do := func(args ...string) {
		t.Helper()
		n++
		var got [3]string
		for i, c := range []*rdConn{ref, native, lua} {
			c.send(t, args)
			got[i] = c.reply(t)
		}
		for i, name := range []string{"tallyd (native)", "tallyd (Lua)"} {
			r, g := got[0], got[i+1]
			if strings.EqualFold(args[0], "PTTL") && r != g {
				a, ea := strconv.ParseInt(strings.TrimPrefix(r, ":"), 10, 64)
				b, eb := strconv.ParseInt(strings.TrimPrefix(g, ":"), 10, 64)
				if ea == nil && eb == nil && (a < 0) == (b < 0) && a-b < 2000 && b-a < 2000 {
					continue
				}
			}
			if r != g {
				t.Errorf("%s: DIFFERENCE\n  redis-server %s\n  %s %s", rdQuote(args), r, name, g)
			}
		}
	}
	setups := [][][]string{
		{},
		{{"SET", "k", "tok"}},
		{{"SET", "k", "tok", "PX", "30000"}},
		{{"SET", "k", "other", "PX", "30000"}},
		{{"HSET", "k", "f", "v"}},
		{{"SET", "k", "tok", "PX", "30000"}, {"SET", "k2", "tok"}},
		{{"SET", "k", "tok"}, {"SET", "k2", "other"}},
	}
	argsOf := map[string][][]string{
		"py-release":   {{"tok"}, {"other"}},
		"py-extend":    {{"tok", "5000", "0"}, {"tok", "5000", "1"}, {"tok", "x", "1"}, {"tok", "1.5", "0"}, {"other", "5000", "0"}},
		"py-reacquire": {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
		"rs-delete":    {{"tok"}, {"other"}},
		"rs-touch":     {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
		"rs-touch-nx":  {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
		"rl-lock":      {{"tok", "5000"}, {"tok", "x"}},
		"rl-unlock":    {{"tok"}, {"other"}},
		"rl-extend":    {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
	}
	if len(scripts) != len(argsOf) {
		t.Fatalf("%d scripts in testdata, %d here", len(scripts), len(argsOf))
	}
	for _, s := range scripts {
		do("SCRIPT", "LOAD", s.Body)
		for _, setup := range setups {
			for _, keys := range [][]string{{"k"}, {"k", "k2"}} {
				for ai, args := range argsOf[s.Name] {
					cmds := []string{"EVALSHA", "EVALSHA_RO", "EVAL"}
					if ai > 0 {
						cmds = cmds[:1] // EVALSHA_RO and EVAL with the first arguments
					}
					for _, cmd := range cmds {
						do("DEL", "k", "k2")
						for _, c := range setup {
							do(c...)
						}
						line := []string{cmd, s.SHA1, strconv.Itoa(len(keys))}
						if cmd == "EVAL" {
							line[1] = s.Body
						}
						do(append(append(line, keys...), args...)...)
						do("TYPE", "k")
						do("GET", "k")
						do("PTTL", "k")
						do("GET", "k2")
						do("PTTL", "k2")
					}
				}
			}
		}
		do("SET", "k", "tok")
		do("EVALSHA", s.SHA1, "1", "k")
		do("EVALSHA", s.SHA1, "1", "k", "tok", "5000", "0", "extra")
	}
	t.Logf("%d commands compared", n)
}

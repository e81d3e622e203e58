package script

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lockScript is a lock library's script, as testdata/lock-scripts.json keeps it: the exact
// body the library sends (read from its source: redis-py's redis/lock.py, redsync's
// scripts.go, node-redlock's redlock.js), its library and version, and its SHA1.
type lockScript struct {
	Name, Library, Body, SHA1 string
}

// lockScripts reads testdata/lock-scripts.json.
func lockScripts(t testing.TB) []lockScript {
	t.Helper()
	b, err := os.ReadFile("testdata/lock-scripts.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []lockScript
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	return list
}

// Every library body is recognised by its SHA1, as the op it is; a body one byte away is
// not.
func TestNativeRecognisesLockScripts(t *testing.T) {
	want := map[string]nativeOp{"py-release": pyRelease, "py-extend": pyExtend, "py-reacquire": pyReacquire,
		"rs-delete": rsDelete, "rs-touch": rsTouch, "rs-touch-nx": rsTouchNX, "rl-lock": rlLock,
		"rl-unlock": rlUnlock, "rl-extend": rlExtend}
	list := lockScripts(t)
	if len(list) != len(want) || len(natives) != len(want) {
		t.Fatalf("%d scripts in testdata, %d recognised, want %d", len(list), len(natives), len(want))
	}
	e := New(Limits{})
	for _, s := range list {
		if SHA1([]byte(s.Body)) != s.SHA1 {
			t.Errorf("%s: SHA1 %s, testdata says %s", s.Name, SHA1([]byte(s.Body)), s.SHA1)
		}
		if natives[s.SHA1] != want[s.Name] {
			t.Errorf("%s (%s): recognised as %d, want %d", s.Name, s.Library, natives[s.SHA1], want[s.Name])
		}
		sha, err := e.Load([]byte(s.Body), nil)
		if err != nil || e.scripts[sha].native != want[s.Name] {
			t.Errorf("%s: SCRIPT LOAD: %v, native %d", s.Name, err, e.scripts[sha].native)
		}
		if natives[SHA1([]byte(s.Body+" "))] != nativeNone {
			t.Errorf("%s with a space more is recognised", s.Name)
		}
	}
}

// miniStore is enough of a Redis for the lock scripts, behind a CallFunc: strings with a
// TTL, a hash (WRONGTYPE), and keys a user may read but not write (an ACL's error, as the
// loop's script checks answer it). It records every call.
type miniStore struct {
	vals  map[string]string
	ttl   map[string]int64 // ms; absent: none
	hash  map[string]bool
	ro    map[string]bool // the user may not write these
	calls []string
	out   []byte
}

func newMiniStore() *miniStore {
	return &miniStore{vals: map[string]string{}, ttl: map[string]int64{}, hash: map[string]bool{}, ro: map[string]bool{}}
}

func (m *miniStore) clone() *miniStore {
	c := newMiniStore()
	for k, v := range m.vals {
		c.vals[k] = v
	}
	for k, v := range m.ttl {
		c.ttl[k] = v
	}
	for k := range m.hash {
		c.hash[k] = true
	}
	for k := range m.ro {
		c.ro[k] = true
	}
	return c
}

func (m *miniStore) state() string {
	var b strings.Builder
	for _, k := range []string{"k", "k2", "h", "ro", "t"} {
		if v, ok := m.vals[k]; ok {
			b.WriteString(k + "=" + v)
			if ttl, ok := m.ttl[k]; ok {
				b.WriteString(" px " + strconv.FormatInt(ttl, 10))
			}
			b.WriteString("; ")
		}
	}
	return b.String()
}

const (
	wrongType = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	noKey     = "-ERR The user executing the script can't access at least one of the keys mentioned in the command arguments\r\n"
	notInt    = "-ERR value is not an integer or out of range\r\n"
)

func (m *miniStore) call(args [][]byte) []byte {
	var line []string
	for _, a := range args {
		line = append(line, string(a))
	}
	m.calls = append(m.calls, strings.Join(line, " "))
	cmd, k := strings.ToUpper(line[0]), ""
	if len(line) > 1 {
		k = line[1]
	}
	reply := func(s string) []byte { m.out = append(m.out[:0], s...); return m.out }
	write := cmd == "DEL" || cmd == "PEXPIRE" || cmd == "SET"
	switch {
	case write && m.ro[k]:
		return reply(noKey)
	case m.hash[k] && cmd != "DEL" && cmd != "EXISTS" && cmd != "PTTL" && cmd != "PEXPIRE" && cmd != "SET":
		return reply(wrongType)
	}
	_, exists := m.vals[k]
	exists = exists || m.hash[k]
	switch cmd {
	case "GET":
		if v, ok := m.vals[k]; ok {
			return reply("$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n")
		}
		return reply("$-1\r\n")
	case "EXISTS":
		if exists {
			return reply(":1\r\n")
		}
		return reply(":0\r\n")
	case "DEL":
		delete(m.vals, k)
		delete(m.ttl, k)
		delete(m.hash, k)
		if exists {
			return reply(":1\r\n")
		}
		return reply(":0\r\n")
	case "PTTL":
		if !exists {
			return reply(":-2\r\n")
		}
		if ttl, ok := m.ttl[k]; ok {
			return reply(":" + strconv.FormatInt(ttl, 10) + "\r\n")
		}
		return reply(":-1\r\n")
	case "PEXPIRE":
		ms, err := strconv.ParseInt(line[2], 10, 64)
		if err != nil {
			return reply(notInt)
		}
		if !exists {
			return reply(":0\r\n")
		}
		m.ttl[k] = ms
		return reply(":1\r\n")
	case "SET": // SET k v PX ms [NX]
		ms, err := strconv.ParseInt(line[4], 10, 64)
		if err != nil {
			return reply(notInt)
		}
		if len(line) == 6 && exists {
			return reply("$-1\r\n")
		}
		delete(m.hash, k)
		m.vals[k], m.ttl[k] = line[2], ms
		return reply("+OK\r\n")
	}
	return reply("-ERR Unknown Redis command called from script\r\n")
}

// Each library script, run natively and on Lua from the same state, answers the same
// bytes, makes the same calls in the same order and leaves the same state: tokens that
// match and do not, keys missing, with and without a TTL, a hash (the GET's WRONGTYPE,
// raised with the script's line), a key the user may not write (the write's error, raised),
// TTLs that are not integers, and counts of keys and arguments other than the library's
// (which run on Lua).
func TestNativeMatchesLua(t *testing.T) {
	base := newMiniStore()
	base.vals["k"], base.ttl["k"] = "tok", 30000
	base.vals["k2"] = "tok" // no TTL
	base.vals["t"] = "other"
	base.hash["h"] = true
	base.vals["ro"], base.ttl["ro"] = "tok", 5000
	base.ro["ro"] = true

	keys := [][]string{{"k"}, {"k2"}, {"t"}, {"missing"}, {"h"}, {"ro"}, {"k", "k2"}, {"k", "t"}, {"missing", "k"}, {"k", "ro"}, {}}
	argvs := [][]string{{"tok"}, {"nope"}, {"tok", "100"}, {"tok", "1.5"}, {"tok", "x"}, {"tok", "0"}, {"tok", "-5"},
		{"tok", "100", "0"}, {"tok", "100", "1"}, {"tok", "1.5", "0"}, {"tok", "1.5", "1"}, {"tok", "010", "0"},
		{"tok", " 7", "0"}, {"tok", "0x10", "0"}, {"tok", "-100000", "0"}, {"tok", "99999999999999999", "0"},
		{"tok", "999999999999999", "0"}, {"nope", "100", "0"}, {}, {"tok", "100", "0", "extra"}}
	for _, s := range lockScripts(t) {
		native, lua := New(Limits{}), New(Limits{LuaOnly: true})
		ran := 0
		for _, ks := range keys {
			for _, av := range argvs {
				mn, ml := base.clone(), base.clone()
				rest := [][]byte{}
				for _, a := range append(append([]string{}, ks...), av...) {
					rest = append(rest, []byte(a))
				}
				nk := []byte(strconv.Itoa(len(ks)))
				gotN := string(native.Eval(nil, &Run{Body: []byte(s.Body), NumKeys: nk, Rest: rest, Call: mn.call}))
				gotL := string(lua.Eval(nil, &Run{Body: []byte(s.Body), NumKeys: nk, Rest: rest, Call: ml.call}))
				what := s.Name + " KEYS " + strings.Join(ks, ",") + " ARGV " + strings.Join(av, ",")
				if gotN != gotL {
					t.Errorf("%s: native %q, Lua %q", what, gotN, gotL)
				}
				if a, b := strings.Join(mn.calls, " | "), strings.Join(ml.calls, " | "); a != b {
					t.Errorf("%s: native called %s\n Lua called %s", what, a, b)
				}
				if a, b := mn.state(), ml.state(); a != b {
					t.Errorf("%s: native left %s, Lua %s", what, a, b)
				}
			}
		}
		ran = int(native.NativeRuns())
		if ran == 0 || lua.NativeRuns() != 0 {
			t.Errorf("%s: %d native runs (Lua-only engine: %d)", s.Name, ran, lua.NativeRuns())
		}
	}
}

package rediscmd

import (
	"strings"
	"testing"
)

// Every command of the table is found by its name in any case, and arity follows Redis's
// convention.
func TestCommandTable(t *testing.T) {
	for _, c := range Commands() {
		for _, name := range []string{c.Name, strings.ToLower(c.Name)} {
			if got := Lookup([]byte(name)); got == nil || got.Name != c.Name {
				t.Fatalf("Lookup(%q) = %v", name, got)
			}
		}
		if c.Arity == 0 {
			t.Fatalf("%s: arity 0", c.Name)
		}
		if (c.Cmd == CmdKV) != (c.Op != OpNone) {
			t.Fatalf("%s: Cmd %d with Op %d", c.Name, c.Cmd, c.Op)
		}
	}
	for _, name := range []string{"", "NOSUCH", "GETX", strings.Repeat("A", 40)} {
		if got := Lookup([]byte(name)); got != nil {
			t.Fatalf("Lookup(%q) = %v", name, got)
		}
	}
	get, set, del := Lookup([]byte("get")), Lookup([]byte("SET")), Lookup([]byte("Del"))
	for _, c := range []struct {
		s    *Spec
		n    int
		want bool
	}{{get, 1, false}, {get, 2, true}, {get, 3, false}, {set, 2, false}, {set, 3, true}, {set, 7, true},
		{del, 1, false}, {del, 2, true}, {del, 9, true}} {
		if got := c.s.ArityOK(c.n); got != c.want {
			t.Fatalf("%s.ArityOK(%d) = %v", c.s.Name, c.n, got)
		}
	}
	if got := string(AppendTextError(nil, get.ArityError())); got != "-ERR wrong number of arguments for 'get' command\r\n" {
		t.Fatalf("arity error %q", got)
	}
	if Lookup([]byte("SET")).Flags&CmdMayWait == 0 || Lookup([]byte("GET")).Flags&CmdReadonly == 0 ||
		Lookup([]byte("MULTI")).Flags&CmdTx == 0 || Lookup([]byte("INCR")).Flags&CmdWrite == 0 {
		t.Fatal("flags")
	}
}

func TestParseRequest(t *testing.T) {
	parse := func(line string) (*Request, error) {
		args := argsOf(line)
		var r Request
		var n byte
		_, err := Parse(Lookup(args[0]), args, &Text{Timeout: 15}, 1e12, func() (id [16]byte) { n++; id[0] = n; return id }, &r, nil)
		return &r, err
	}
	for _, c := range []struct{ line, err string }{
		{"SELECT 3", ""}, {"SELECT 255", "-ERR DB index is out of range\r\n"}, {"SELECT x", "-ERR value is not an integer or out of range\r\n"},
		{"SELECT -1", "-ERR DB index is out of range\r\n"}, {"PING a b", "-ERR wrong number of arguments for 'ping' command\r\n"},
		{"TIMEOUT SET 5", ""}, {"TIMEOUT GET", ""}, {"TIMEOUT X", "-ERR Command Parse Args Error\r\n"},
		{"HELLO", ""}, {"HELLO 2", ""}, {"HELLO 2 SETNAME me", ""},
		{"HELLO 3", "-NOPROTO unsupported protocol version\r\n"},
		{"HELLO 1", "-NOPROTO unsupported protocol version\r\n"},
		{"HELLO x", "-ERR Protocol version is not an integer or out of range\r\n"},
		{"HELLO 2 BOGUS", "-ERR Syntax error in HELLO option 'BOGUS'\r\n"},
		{"LOCK k", ""}, {"LOCK k x", "-ERR Command Parse Args Count Error\r\n"},
		{"SET k v NX", ""}, {"SET k v BOGUS", "-ERR syntax error\r\n"},
	} {
		r, err := parse(c.line)
		got := ""
		if err != nil {
			got = string(AppendTextError(nil, err))
		}
		if got != c.err {
			t.Fatalf("%q: error %q, want %q", c.line, got, c.err)
		}
		if err == nil && r.Spec.Name != strings.ToUpper(strings.Fields(c.line)[0]) {
			t.Fatalf("%q: spec %s", c.line, r.Spec.Name)
		}
	}
	r, _ := parse("SELECT 7")
	if r.N != 7 {
		t.Fatalf("SELECT 7: N %d", r.N)
	}
	r, _ = parse("SET k v NX")
	if !r.KV.NX || r.KV.Op != OpSet || string(r.KV.Keys[0]) != "k" {
		t.Fatalf("SET k v NX: %+v", r.KV)
	}
}

func argsOf(line string) [][]byte {
	var args [][]byte
	for _, f := range strings.Fields(line) {
		args = append(args, []byte(f))
	}
	return args
}

// The table lookup allocates nothing.
func TestLookupAllocs(t *testing.T) {
	name := []byte("incrby")
	if n := testing.AllocsPerRun(100, func() { _ = Lookup(name) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzParseRequest: any command line parses to a request or a *TextError, never a panic.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"SET k v EX 10 NX", "HELLO 2 SETNAME x", "HELLO 3", "MSET a 1 b", "SELECT 300",
		"TIMEOUT SET 4294967296", "LOCK k SET v EXECUTE 1 LOCK k2", "MGET a b", "WATCH a", "INCRBY k 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := argsOf(line)
		if len(args) == 0 {
			return
		}
		spec := Lookup(args[0])
		if spec == nil || !spec.ArityOK(len(args)) {
			return
		}
		var r Request
		_, err := Parse(spec, args, &Text{Timeout: 15}, 1e12, func() (id [16]byte) { return id }, &r, nil)
		if err != nil {
			if _, ok := err.(*TextError); !ok {
				t.Fatalf("%q: error of type %T", line, err)
			}
			return
		}
		if r.Spec != spec {
			t.Fatalf("%q: spec %v", line, r.Spec)
		}
	})
}

// TestRoutes: where the commands that are not the data's run in a cluster.
func TestRoutes(t *testing.T) {
	want := map[string]Route{"PING": RouteConn, "ECHO": RouteConn, "QUIT": RouteConn, "SELECT": RouteConn,
		"TIMEOUT": RouteConn, "HELLO": RouteConn, "CONSISTENCY": RouteConn, "COMMAND": RouteConn, "CLIENT": RouteConn,
		"AUTH": RouteUser, "ACL": RouteUser, "INFO": RouteMember, "CONFIG": RouteMember, "CLUSTER": RouteLeader,
		"SUBSCRIBE": RouteMember, "UNSUBSCRIBE": RouteMember, "PSUBSCRIBE": RouteMember, "PUNSUBSCRIBE": RouteMember,
		"PUBSUB": RouteMember, "SNAPSHOT": RouteMember}
	for _, s := range Commands() {
		if s.Route != want[s.Name] { // RouteData when not listed
			t.Errorf("%s: route %d, want %d", s.Name, s.Route, want[s.Name])
		}
	}
}

package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// testTable is a small table of the shape tallyd's has: plain commands, containers with
// subcommands of other categories, a command of tallyd's own.
func testTable() *Table {
	return NewTable([]Command{
		{"get", Read | String | Fast},
		{"set", Write | String | Slow},
		{"del", Keyspace | Write | Slow},
		{"keys", Keyspace | Read | Slow | Dangerous},
		{"flushall", Keyspace | Write | Slow | Dangerous},
		{"config", Slow},
		{"config|get", Admin | Slow | Dangerous},
		{"config|set", Admin | Slow | Dangerous},
		{"client", Slow},
		{"client|setname", Slow | Connection},
		{"client|list", Admin | Slow | Dangerous | Connection},
		{"command", Slow | Connection},
		{"command|count", Slow | Connection},
		{"auth", Fast | Connection},
		{"lock", Write | Slow | Lock},
	})
}

func mustUser(t *testing.T, tab *Table, ops ...string) *User {
	t.Helper()
	u := NewUser("u", tab)
	for _, op := range ops {
		if err := u.Set(op); err != nil {
			t.Fatalf("Set(%q): %v", op, err)
		}
	}
	return u
}

func can(u *User, name string) bool {
	id, ok := u.t.Lookup(name)
	if !ok {
		panic(name)
	}
	return u.CanRun(id)
}

func TestPermissions(t *testing.T) {
	tab := testTable()
	for _, tc := range []struct {
		ops        []string
		yes, no    []string
		describeAs string // the rules part of Describe
	}{
		{nil, nil, []string{"get", "set", "config|get", "lock"}, "-@all"},
		{[]string{"+@all"}, []string{"get", "flushall", "config|set", "lock"}, nil, "+@all"},
		{[]string{"+@read"}, []string{"get", "keys"}, []string{"set", "del", "config|get"}, "-@all +@read"},
		{[]string{"+@all", "-@dangerous"}, []string{"get", "set", "del", "client|setname", "lock"},
			[]string{"flushall", "keys", "config|get", "config|set", "client|list"}, "+@all -@dangerous"},
		// A command of a category changes with all its subcommands (as Redis: CONFIG is @slow).
		{[]string{"+@slow"}, []string{"set", "config|get", "client|list", "command|count"}, []string{"get", "auth"}, "-@all +@slow"},
		// A subcommand of the category changes alone.
		{[]string{"+@connection"}, []string{"client|setname", "client|list", "command", "command|count", "auth"},
			[]string{"config|get", "get"}, "-@all +@connection"},
		{[]string{"+config"}, []string{"config|get", "config|set"}, []string{"client|setname"}, "-@all +config"},
		{[]string{"+config", "-config|set"}, []string{"config|get"}, []string{"config|set"}, "-@all +config -config|set"},
		// A rule on a command drops the earlier rules on it and its subcommands.
		{[]string{"+config|get", "-get", "+config"}, []string{"config|set"}, []string{"get"}, "-@all -get +config"},
		{[]string{"+GET", "+get"}, []string{"get"}, nil, "-@all +get"},
		{[]string{"+@all", "-@ALL", "+@Lock"}, []string{"lock"}, []string{"get"}, "-@all +@lock"},
		{[]string{"+@all", "-debug"}, []string{"get"}, nil, "+@all -debug"}, // a Redis command tallyd lacks
		{[]string{"allcommands", "nocommands", "+lock"}, []string{"lock"}, []string{"get"}, "-@all +lock"},
		{[]string{"+@all", "reset"}, nil, []string{"get"}, "-@all"},
	} {
		u := mustUser(t, tab, tc.ops...)
		for _, c := range tc.yes {
			if !can(u, c) {
				t.Errorf("%q: cannot run %s", tc.ops, c)
			}
		}
		for _, c := range tc.no {
			if can(u, c) {
				t.Errorf("%q: can run %s", tc.ops, c)
			}
		}
		d := u.Describe()
		if !strings.HasSuffix(d, " "+tc.describeAs) {
			t.Errorf("%q: Describe = %q, want rules %q", tc.ops, d, tc.describeAs)
		}
	}
}

// The ACL LIST lines of Redis 7.0.15 for the same rules (recorded from redis-server).
func TestDescribeAsRedis(t *testing.T) {
	tab := testTable()
	for _, tc := range []struct{ line, want string }{
		{"user default on nopass ~* &* +@all", "user default on nopass ~* &* +@all"},
		{"user ro on >ropass ~* +@read", "user ro on #968687300c3cde836623b2c5105f98150e9526fe76be4df211cadfea78e0b081 ~* resetchannels -@all +@read"},
		{"user app on >apppass ~app:* +@all -@dangerous", "user app on #46400f642c99584e51b14031f875ca9b7b33ccf94ff8d7657197a5bac06f4ffb ~app:* resetchannels +@all -@dangerous"},
		{"user off off >offpass +@all ~*", "user off off #c2fe42bd38bc24dd5db8b4152535ce71501d866cbd61bc8698e1df1faf601599 ~* resetchannels +@all"},
		{"user hashed on #5e884898da28047151d0e56f8dc6292773603d0d6aff26a1fa22ac4a5b6a1b0f ~* +@all", "user hashed on #5e884898da28047151d0e56f8dc6292773603d0d6aff26a1fa22ac4a5b6a1b0f ~* resetchannels +@all"},
		{"user x", "user x off resetchannels -@all"},
		{"user x on nopass reset", "user x off sanitize-payload resetchannels -@all"},
		{"user x on >a >b >a <b ~k1 ~k2 ~k1 &c1", "user x on #ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb ~k1 ~k2 resetchannels &c1 -@all"},
	} {
		us, err := Parse("f", []byte(tc.line), tab)
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		name := strings.Fields(tc.line)[1]
		if got := us.Get([]byte(name)).Describe(); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.line, got, tc.want)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	tab := testTable()
	sum := sha256.Sum256([]byte("password"))
	us, err := Parse("users.acl", []byte(strings.Join([]string{
		"user a on >one >two +@all",
		"user b on #" + hex.EncodeToString(sum[:]),
		"user c off >pw",
		"user d on nopass",
		"user e on",
		"user f on >pw resetpass",
		"user g on nopass >pw",
		"user h on >\"with space\" >'it\\'s' >\"\\x00\\n\"",
	}, "\n")), tab)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, pass string
		ok         bool
	}{
		{"a", "one", true}, {"a", "two", true}, {"a", "three", false}, {"a", "", false}, {"a", "ONE", false},
		{"b", "password", true}, {"b", "Password", false},
		{"c", "pw", false},
		{"d", "", true}, {"d", "anything", true},
		{"e", "", false}, {"e", "x", false},
		{"f", "pw", false},
		{"g", "pw", true}, {"g", "other", false},
		{"h", "with space", true}, {"h", "it's", true},
		{"h", "\x00", true}, {"h", "\x00\n", false}, // as Redis, each rule is trimmed of \t \r \n
	} {
		if got := us.Get([]byte(tc.user)).Authenticate([]byte(tc.pass)); got != tc.ok {
			t.Errorf("user %s password %q: %v, want %v", tc.user, tc.pass, got, tc.ok)
		}
	}
	// The default user, not in the file, is Redis's: every permission, no password.
	d := us.Default()
	if us.DefaultFromFile() || !d.Authenticate(nil) || !d.AllKeys() || !d.CanRunAll(^Category(0)) {
		t.Errorf("default user: %s", d.Describe())
	}
	if got := len(us.List()); got != 9 {
		t.Errorf("%d users, want 9", got)
	}
	if n := us.List()[0].Name; n != "a" {
		t.Errorf("first user %s, want a (sorted)", n)
	}
}

func TestOpen(t *testing.T) {
	tab := testTable()
	if d := Open(tab, "").Default(); d.Describe() != "user default on nopass ~* &* +@all" || !d.Authenticate(nil) {
		t.Errorf("no password: %s", d.Describe())
	}
	d := Open(tab, "s3cret").Default()
	if d.Describe() != "user default on #"+hashOf("s3cret")+" ~* &* +@all" {
		t.Errorf("requirepass: %s", d.Describe())
	}
	if d.Authenticate([]byte("s3cre")) || !d.Authenticate([]byte("s3cret")) || d.NoPass() {
		t.Error("requirepass: wrong password accepted or right one refused")
	}
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestParseErrors(t *testing.T) {
	tab := testTable()
	for _, tc := range []struct{ text, want string }{
		{"user a on +nosuch", "f:1: Error in applying operation '+nosuch': Unknown command or category name in ACL."},
		{"user a on -@nosuch", "f:1: Error in applying operation '-@nosuch': Unknown command or category name in ACL."},
		{"\n\nuser a on #abc", "f:3: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters."},
		{"user a #" + strings.ToUpper(hashOf("x")), "f:1: The password hash must be exactly 64 characters"},
		{"user a allkeys ~x", "f:1: Adding a pattern after the * pattern (or the 'allkeys' flag)"},
		{"user a &* &x", "f:1: Adding a pattern after the * pattern (or the 'allchannels' flag)"},
		{"user a <nopw", "f:1: The password you are trying to remove from the user does not exist."},
		{"user a on bogus", "f:1: Syntax error."},
		{"users a on", "f:1: should start with user keyword."},
		{"user", "f:1: should start with user keyword."},
		{"user \"a b\" on", "f:1: username 'a b' contains invalid characters."},
		{"user a on\nuser a off", "f:2: Duplicate user 'a' found."},
		{"user a on \"unbalanced", "f:1: unbalanced quotes in acl line."},
		{"user a on %R~x", "f:1: Error in applying operation '%R~x': not supported by tallyd"},
		{"user a on (+get ~x)", "not supported by tallyd"},
		{"user a on +select|0", "f:1: Error in applying operation '+select|0': not supported by tallyd"},
		{"user a on +config|nosuch", "f:1: Error in applying operation '+config|nosuch': Allowing first-arg of a subcommand is not supported."},
		{"user a on +nosuch|x", "Unknown command or category name in ACL"},
		// Every line's errors, as Redis: a command name is shown each time, a syntax error once.
		{"user a +x1 +x2\nuser b ~* ~y off bogus", "f:1: Error in applying operation '+x1': Unknown command or category name in ACL. f:1: Error in applying operation '+x2': Unknown command or category name in ACL. f:2: Adding a pattern"},
	} {
		_, err := Parse("f", []byte(tc.text), tab)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
	// No error repeats a password or a hash.
	for _, text := range []string{"user a on >secretpw bogus", "user a on #s3cr3tpwhash", "user a on >secretpw <secretpw2",
		"user a >secretpw \"unbalanced", "user a on '>secretpw' +nosuch"} {
		_, err := Parse("f", []byte(text), tab)
		if err == nil || strings.Contains(err.Error(), "secretpw") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: error %v", text, err)
		}
	}
}

func TestParseFile(t *testing.T) {
	tab := testTable()
	us, err := Parse("f", []byte("# a comment\n\n   \nuser default off\r\n\tuser ro on nopass ~app:* ~\"x y\" +@read  \n"), tab)
	if err != nil {
		t.Fatal(err)
	}
	if !us.DefaultFromFile() || us.Default().Enabled() {
		t.Error("the file's default user was not used")
	}
	ro := us.Get([]byte("ro"))
	if ro == nil || ro.AllKeys() || len(ro.Patterns()) != 2 || string(ro.Patterns()[1]) != "x y" {
		t.Fatalf("ro: %+v", ro)
	}
	if us.Get([]byte("nosuch")) != nil {
		t.Error("a user that is not there")
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"  a  b\tc ", []string{"a", "b", "c"}, true},
		{`"a b" 'c d'`, []string{"a b", "c d"}, true},
		{`"\x41\x4a\n\t\"\\z" 'it\'s'`, []string{"AJ\n\t\"\\z", "it's"}, true},
		{`a"b c"`, []string{"ab c"}, true},
		{`"ab"c`, nil, false},
		{`'ab'c`, nil, false},
		{`"ab`, nil, false},
		{`'ab`, nil, false},
		{`"a\`, nil, false},
		{`"\x4"`, []string{"x4"}, true},
		{"a\x00b c", []string{"a"}, true},
		{"a\vb", []string{"a\vb"}, true},
		{`""`, []string{""}, true},
	} {
		got, ok := SplitArgs(tc.line)
		if ok != tc.ok || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCategories(t *testing.T) {
	names := CategoryNames()
	if len(names) != numCategories || names[0] != "keyspace" || names[len(names)-1] != "cluster" {
		t.Fatalf("categories %q", names)
	}
	for i, n := range names {
		c, ok := LookupCategory(strings.ToUpper(n))
		if !ok || c != 1<<i {
			t.Errorf("LookupCategory(%s) = %v, %v", n, c, ok)
		}
	}
	if _, ok := LookupCategory("all"); ok {
		t.Error("all is not a category (ACL CAT does not list it)")
	}
	if got := strings.Join(testTable().InCategory(Dangerous), " "); got != "keys flushall config|get config|set client|list" {
		t.Errorf("InCategory(dangerous) = %s", got)
	}
}

// Checking a command and a key pattern allocates nothing: the loop does it for every command.
func TestCheckDoesNotAllocate(t *testing.T) {
	tab := testTable()
	us, err := Parse("f", []byte("user a on >pw ~app:* +@all -@dangerous"), tab)
	if err != nil {
		t.Fatal(err)
	}
	name := []byte("a")
	id, _ := tab.Lookup("get")
	if n := testing.AllocsPerRun(100, func() {
		u := us.Get(name)
		if !u.CanRun(id) || u.AllKeys() || len(u.Patterns()) != 1 {
			t.Fatal("wrong answer")
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

package rediscmd

import (
	"slices"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/acl"
)

// Every command and subcommand has categories, and the categories docs/security.md promises hold
// the commands it names.
func TestACLCategories(t *testing.T) {
	tab := ACLTable()
	for i := range tab.Len() {
		if tab.Name(i) == "" {
			t.Fatalf("command %d has no name", i)
		}
	}
	for _, s := range Commands() {
		if s.ACL&(acl.Fast|acl.Slow) == 0 {
			t.Errorf("%s is neither @fast nor @slow", s.Name)
		}
		if s.Flags&CmdWrite != 0 && s.ACL&acl.Write == 0 || s.Flags&CmdReadonly != 0 && s.ACL&acl.Read == 0 {
			t.Errorf("%s: flags %b but categories %b", s.Name, s.Flags, s.ACL)
		}
		for _, sub := range s.Subs {
			if sub.ACL&(acl.Fast|acl.Slow) == 0 {
				t.Errorf("%s %s is neither @fast nor @slow", s.Name, sub.Name)
			}
		}
	}
	for cat, want := range map[acl.Category][]string{
		acl.Dangerous: {"flushall", "flushdb", "keys", "config|get", "config|set", "config|resetstat", "cluster",
			"acl|load", "acl|list", "acl|users", "info", "client|list"},
		acl.Admin:       {"config|get", "cluster", "acl|load"},
		acl.Read:        {"get", "mget", "hget", "exists", "ttl", "keys", "scan", "token", "getfence"},
		acl.Write:       {"set", "del", "incr", "hset", "flushall", "lock", "unlock", "push"},
		acl.Lock:        {"lock", "unlock", "push", "token", "getfence"},
		acl.Cluster:     {"consistency", "cluster"},
		acl.Connection:  {"auth", "hello", "ping", "quit", "select", "client|setname", "command"},
		acl.Transaction: {"multi", "exec", "discard", "watch", "unwatch"},
		acl.Keyspace:    {"del", "exists", "keys", "scan", "flushall", "expire"},
		acl.String:      {"get", "set", "incr", "append", "mget"},
		acl.Hash:        {"hset", "hget", "hgetall"},
	} {
		got := tab.InCategory(cat)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("@%s lacks %s: %q", catName(cat), w, got)
			}
		}
	}
	for _, name := range []string{"get", "set", "lock", "acl|whoami", "acl|cat", "auth", "hello", "client|setname"} {
		id, _ := tab.Lookup(name)
		if tab.Name(id) != name {
			t.Fatal(name)
		}
		if slices.Contains(tab.InCategory(acl.Dangerous), name) {
			t.Errorf("%s is @dangerous", name)
		}
	}
	want := []string{"psubscribe", "publish", "pubsub|channels", "pubsub|numpat", "pubsub|numsub", "punsubscribe",
		"subscribe", "unsubscribe"} // as Redis 7.0's ACL CAT pubsub, less the shard commands tallyd does not have
	got := tab.InCategory(acl.PubSub)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("@pubsub: %q, want %q", got, want)
	}
}

func catName(c acl.Category) string {
	for i, n := range acl.CategoryNames() {
		if c == 1<<i {
			return n
		}
	}
	return "?"
}

func TestACLID(t *testing.T) {
	tab := ACLTable()
	for _, tc := range []struct {
		line string
		want string // the name checked; "" when the command answers its own error
	}{
		{"GET k", "get"}, {"get k", "get"},
		{"CONFIG GET dir", "config|get"}, {"config get", ""}, {"CONFIG nosuch", ""}, {"CONFIG RESETSTAT", "config|resetstat"},
		{"CONFIG RESETSTAT x", ""}, {"CLIENT SETNAME x", "client|setname"}, {"CLIENT LIST", "client|list"},
		{"CLIENT LIST ID 1", "client|list"}, {"COMMAND", "command"}, {"COMMAND COUNT", "command|count"},
		{"ACL WHOAMI", "acl|whoami"}, {"ACL WHOAMI x", ""}, {"ACL CAT", "acl|cat"}, {"ACL CAT read", "acl|cat"},
		{"ACL LOAD", "acl|load"}, {"acl users", "acl|users"}, {"ACL SETUSER x", ""},
		{"CLUSTER ADD 2 h:1", "cluster"}, {"AUTH pw", "auth"},
	} {
		args := split(tc.line)
		s := Lookup(args[0])
		id, ok := s.ACLID(args)
		got := ""
		if ok {
			got = tab.Name(id)
		}
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
	}
}

func split(line string) [][]byte {
	var args [][]byte
	for _, f := range strings.Fields(line) {
		args = append(args, []byte(f))
	}
	return args
}

// The keys a command line names, which ACL key patterns are checked against.
func TestKeys(t *testing.T) {
	for _, tc := range []struct{ line, keys string }{
		{"GET k", "k"}, {"SET k v NX", "k"}, {"DEL a b c", "a b c"}, {"EXISTS a", "a"},
		{"MGET a b", "a b"}, {"MSET a 1 b 2", "a b"}, {"MSETNX a 1 b 2 c 3", "a b c"},
		{"HSET h f v", "h"}, {"EXPIRE k 10", "k"}, {"WATCH a b", "a b"}, {"TOKEN k LOCK_ID x", "k"},
		{"GETFENCE k", "k"}, {"KEYS *", ""}, {"SCAN 0 MATCH a*", ""}, {"FLUSHALL", ""}, {"PING", ""},
		{"LOCK k TIMEOUT 5", "k"}, {"UNLOCK k", "k"}, {"PUSH k SET v", "k"},
		{"LOCK k EXECUTE UNLOCK LOCK other TIMEOUT 1", "k other"},
		{"LOCK k TIMEOUT 5 EXECUTE 0 LOCK a EXECUTE 0 UNLOCK b", "k a b"},
		{"LOCK k TIMEOUT", "k"}, {"LOCK k EXECUTE 0 LOCK", "k"}, {"LOCK k COUNT EXECUTE x LOCK y", "k"},
	} {
		args := split(tc.line)
		s := Lookup(args[0])
		var keys []string
		for i := s.FirstKey(args); i > 0; i = s.NextKey(args, i) {
			keys = append(keys, string(args[i]))
		}
		if got := strings.Join(keys, " "); got != tc.keys {
			t.Errorf("%q: keys %q, want %q", tc.line, got, tc.keys)
		}
	}
}

// HELLO's AUTH option is parsed for the server to check; its syntax errors are Redis's.
func TestHelloAuth(t *testing.T) {
	for _, tc := range []struct{ line, user, pass, err string }{
		{"HELLO 2 AUTH u p", "u", "p", ""},
		{"HELLO 2 SETNAME n AUTH u p", "u", "p", ""},
		{"HELLO 2", "", "", ""},
		{"HELLO 2 AUTH u", "", "", "Syntax error in HELLO option 'AUTH'"},
		{"HELLO 3 AUTH u p", "", "", "unsupported protocol version"},
	} {
		args := split(tc.line)
		var r Request
		_, err := Parse(Lookup(args[0]), args, &Text{}, 0, nil, &r, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || string(r.User) != tc.user || string(r.Pass) != tc.pass || (tc.user == "") != (r.User == nil) {
			t.Errorf("%q: %q %q %v", tc.line, r.User, r.Pass, err)
		}
	}
}

// Package acl is Redis 6+/7's access control for tallyd's Redis-text side: users with
// passwords, permissions by command and by category, and key patterns, read from an ACL
// file in Redis's syntax (the subset docs/security.md lists). It knows neither a wire
// format nor a server: proto/rediscmd's command table gives it the commands (Table), the loop
// asks a User what it may run, and ACL LIST's lines come from Describe.
//
// A user's command permissions are a bit set over the table, computed when its rules are
// applied, so that checking a command is one bit test.
package acl

import (
	"strings"
)

// Category is a set of ACL categories, a bit each.
type Category uint32

// The categories: Redis 7.0's, in the order ACL CAT lists them, then tallyd's own.
const (
	Keyspace Category = 1 << iota
	Read
	Write
	Set
	SortedSet
	List
	Hash
	String
	Bitmap
	HyperLogLog
	Geo
	Stream
	PubSub
	Admin
	Fast
	Slow
	Blocking
	Dangerous
	Connection
	Transaction
	Scripting
	Lock          // tallyd: the lock commands (LOCK, UNLOCK, PUSH, TOKEN, GETFENCE)
	Cluster       // tallyd: CONSISTENCY and CLUSTER
	numCategories = iota
)

var categoryNames = [numCategories]string{"keyspace", "read", "write", "set", "sortedset", "list", "hash",
	"string", "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
	"dangerous", "connection", "transaction", "scripting", "lock", "cluster"}

// CategoryNames returns the names of the categories, in ACL CAT's order.
func CategoryNames() []string { return append([]string(nil), categoryNames[:]...) }

// LookupCategory returns the category named name (any case, without the @).
func LookupCategory(name string) (Category, bool) {
	for i, n := range categoryNames {
		if strings.EqualFold(n, name) {
			return 1 << i, true
		}
	}
	return 0, false
}

// Command is a command or a subcommand as rules name it.
type Command struct {
	Name string // lower case; a subcommand is container|sub
	Cats Category
}

// Table is the commands a server serves, as rules name them. Each has an id, its index; a
// container (a command with subcommands) knows its subcommands' ids.
type Table struct {
	cmds []Command
	ids  map[string]int
	subs map[int][]int // a container's subcommands
}

// NewTable makes the table of cmds. A subcommand container|sub must come after its
// container. It panics on a duplicate or an orphan: the table is the program's own.
func NewTable(cmds []Command) *Table {
	t := &Table{cmds: append([]Command(nil), cmds...), ids: map[string]int{}, subs: map[int][]int{}}
	for i, c := range t.cmds {
		if c.Name != strings.ToLower(c.Name) || c.Name == "" {
			panic("acl: command name " + c.Name + " is not lower case")
		}
		if _, dup := t.ids[c.Name]; dup {
			panic("acl: command " + c.Name + " listed twice")
		}
		if parent, _, ok := strings.Cut(c.Name, "|"); ok {
			p, ok := t.ids[parent]
			if !ok {
				panic("acl: subcommand " + c.Name + " before its command")
			}
			t.subs[p] = append(t.subs[p], i)
		}
		t.ids[c.Name] = i
	}
	return t
}

// Len is the number of commands and subcommands.
func (t *Table) Len() int { return len(t.cmds) }

// Name is the name of command id, as NOPERM errors give it.
func (t *Table) Name(id int) string { return t.cmds[id].Name }

// Lookup returns the id of the command or subcommand name (lower case).
func (t *Table) Lookup(name string) (int, bool) {
	id, ok := t.ids[name]
	return id, ok
}

// InCategory lists the commands and subcommands in c, in table order (ACL CAT category).
func (t *Table) InCategory(c Category) []string {
	var out []string
	for _, cmd := range t.cmds {
		if cmd.Cats&c != 0 {
			out = append(out, cmd.Name)
		}
	}
	return out
}

// words is the length of a permission bit set over t.
func (t *Table) words() int { return (len(t.cmds) + 63) / 64 }

// top reports whether id is a command (not a subcommand).
func (t *Table) top(id int) bool { return !strings.Contains(t.cmds[id].Name, "|") }

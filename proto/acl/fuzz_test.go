package acl

import (
	"bytes"
	"strings"
	"testing"
)

// ruleWords are the rules FuzzRules draws from: every kind Set reads, on the names of
// testTable, its categories, a Redis command it lacks, and wrong ones.
var ruleWords = []string{
	"on", "off", "nopass", "resetpass", ">a", ">b", "<a", "#" + hashOf("a"), "!" + hashOf("b"),
	"~*", "allkeys", "resetkeys", "~app:*", "~x", "&*", "allchannels", "resetchannels", "&ch",
	"+@all", "-@all", "allcommands", "nocommands", "reset", "sanitize-payload", "skip-sanitize-payload",
	"+@read", "-@read", "+@write", "-@write", "+@slow", "-@slow", "+@dangerous", "-@dangerous",
	"+@connection", "-@connection", "+@admin", "-@admin", "+@lock", "-@lock", "+@fast", "-@fast",
	"+get", "-get", "+SET", "-set", "+config", "-config", "+config|get", "-config|get", "+config|set",
	"+client", "-client|list", "+client|setname", "+command", "-command|count", "+flushall", "-flushall",
	"+debug", "-debug", "+nosuch", "+@nosuch", "+select|0", "bogus", "",
}

// FuzzRules applies a sequence of rules (from ruleWords, or the input's own bytes) to a user
// and checks it against a plain model: for each command, replay the rules Set accepted in
// order and see which was the last to say something about it. ACL LIST's line read back
// must give the same user.
func FuzzRules(f *testing.F) {
	f.Add([]byte{18, 30}, "")
	f.Add([]byte{18, 31, 46}, "")
	f.Add([]byte{28, 48, 44, 47}, "+get")
	f.Add([]byte{255, 0, 9, 10, 255}, "~key\x00")
	f.Fuzz(func(t *testing.T, picks []byte, extra string) {
		if len(picks) > 64 {
			picks = picks[:64] // longer adds nothing but time (Describe at each step)
		}
		tab := testTable()
		u := NewUser("u", tab)
		var ops []string // the rules accepted
		for _, p := range picks {
			op := extra
			if int(p) < len(ruleWords) {
				op = ruleWords[p]
			}
			before := u.Describe()
			if err := u.Set(op); err != nil {
				if u.Describe() != before {
					t.Fatalf("Set(%q) failed (%v) but changed the user: %s -> %s", op, err, before, u.Describe())
				}
				continue
			}
			ops = append(ops, op)
		}
		for id := range tab.Len() {
			if got, want := u.CanRun(id), modelCanRun(tab, ops, id); got != want {
				t.Fatalf("rules %q: CanRun(%s) = %v, model %v", ops, tab.Name(id), got, want)
			}
		}
		// ACL LIST's line is the same user (unless a pattern holds a blank or a quote: Redis
		// does not quote them, nor does tallyd).
		d := u.Describe()
		for _, op := range ops {
			if (op[0] == '~' || op[0] == '&') && strings.ContainsAny(op, "\"' \t\n\v\f\r\x00") {
				return
			}
		}
		us, err := Parse("f", []byte(d), tab)
		if err != nil {
			t.Fatalf("rules %q: ACL LIST line %q does not load: %v", ops, d, err)
		}
		v := us.Get([]byte("u"))
		if v == nil || v.Describe() != d {
			t.Fatalf("rules %q: %q loads as %v", ops, d, v)
		}
		for id := range tab.Len() {
			if u.CanRun(id) != v.CanRun(id) {
				t.Fatalf("rules %q: %q loads with CanRun(%s) %v", ops, d, tab.Name(id), v.CanRun(id))
			}
		}
		for _, pw := range []string{"a", "b", extra} {
			if u.Authenticate([]byte(pw)) != v.Authenticate([]byte(pw)) {
				t.Fatalf("rules %q: password %q differs once loaded from %q", ops, pw, d)
			}
		}
		if u.AllKeys() != v.AllKeys() || len(u.Patterns()) != len(v.Patterns()) {
			t.Fatalf("rules %q: keys differ once loaded from %q", ops, d)
		}
	})
}

// modelCanRun is the model: the last rule that names command id, its container, or a
// category of either decides; at first nothing is allowed.
func modelCanRun(tab *Table, ops []string, id int) bool {
	cmd := tab.cmds[id]
	parent, _, isSub := strings.Cut(cmd.Name, "|")
	var pc Category
	if isSub {
		pc = tab.cmds[tab.ids[parent]].Cats
	}
	allowed := false
	for _, op := range ops {
		switch strings.ToLower(op) {
		case "+@all", "allcommands":
			allowed = true
			continue
		case "-@all", "nocommands", "reset":
			allowed = false
			continue
		}
		if op == "" || (op[0] != '+' && op[0] != '-') {
			continue
		}
		v, name := op[0] == '+', strings.ToLower(op[1:])
		if cat, ok := strings.CutPrefix(name, "@"); ok {
			c, _ := LookupCategory(cat)
			if cmd.Cats&c != 0 || pc&c != 0 {
				allowed = v
			}
		} else if name == cmd.Name || isSub && name == parent {
			allowed = v
		}
	}
	return allowed
}

// FuzzSplitArgs: any line splits without a panic, and arguments quoted as ACL LIST and a
// careful writer quote them split back to themselves.
func FuzzSplitArgs(f *testing.F) {
	f.Add("user a on >pw", []byte("a\xffb c\xff\x00\"'\\"))
	f.Add(`"\x4`, []byte{})
	f.Fuzz(func(t *testing.T, line string, tokens []byte) {
		if args, ok := SplitArgs(line); ok {
			for _, a := range args {
				if strings.ContainsRune(a, 0) && !strings.Contains(line, `\x00`) {
					t.Fatalf("SplitArgs(%q) = %q: a NUL from nowhere", line, args)
				}
			}
		}
		want := strings.Split(string(tokens), "\xff")
		var b bytes.Buffer
		for i, tok := range want {
			if i > 0 {
				b.WriteString(" \t ")
			}
			b.WriteString(quote(tok, i%2 == 1))
		}
		got, ok := SplitArgs(b.String())
		if !ok || len(got) != len(want) {
			t.Fatalf("SplitArgs(%q) = %q, %v; want %q", b.String(), got, ok, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("SplitArgs(%q)[%d] = %q, want %q", b.String(), i, got[i], want[i])
			}
		}
	})
}

// quote writes s as one argument: in double quotes with escapes, or (single) in single
// quotes when it has no NUL and no backslash.
func quote(s string, single bool) string {
	var b strings.Builder
	if single && !strings.ContainsAny(s, "\x00\\") { // in single quotes \' is a quote: no backslash there
		b.WriteByte('\'')
		for i := 0; i < len(s); i++ {
			if s[i] == '\'' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[i])
		}
		b.WriteByte('\'')
		return b.String()
	}
	const digits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			b.WriteString(`\x`)
			b.WriteByte(digits[c>>4])
			b.WriteByte(digits[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzParse: any file loads or is refused without a panic; a file that loads lists users
// whose ACL LIST lines load back to the same users.
func FuzzParse(f *testing.F) {
	f.Add([]byte("user default on nopass ~* &* +@all\nuser ro on >ro ~* +@read\n"))
	f.Add([]byte("user app on >apppass ~app:* +@all -@dangerous -config|get\n# c\n\nuser x reset"))
	f.Add([]byte("user \"a\\x20b\" on\nuser a on +nosuch"))
	f.Fuzz(func(t *testing.T, text []byte) {
		tab := testTable()
		us, err := Parse("f", text, tab)
		if err != nil {
			return
		}
		var lines []string
		for _, u := range us.List() {
			lines = append(lines, u.Describe())
		}
		for _, u := range us.List() {
			words := append([]string{u.Name}, u.channels...)
			for _, k := range u.keys {
				words = append(words, string(k))
			}
			for _, w := range words {
				if strings.ContainsAny(w, "\"' \t\n\v\f\r\x00") {
					return // a blank or a quote: ACL LIST does not quote them (neither does Redis)
				}
			}
		}
		again, err := Parse("f", []byte(strings.Join(lines, "\n")), tab)
		if err != nil {
			t.Fatalf("ACL LIST of %q does not load: %v\n%s", text, err, strings.Join(lines, "\n"))
		}
		for i, u := range again.List() {
			if u.Describe() != lines[i] {
				t.Fatalf("user %d: %q loads as %q", i, lines[i], u.Describe())
			}
		}
	})
}

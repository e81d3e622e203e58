package acl

import (
	"errors"
	"sort"
	"strconv"
	"strings"
)

// Users is a set of users, by name; it always has the user "default", whom a connection
// runs as until it authenticates.
type Users struct {
	t           *Table
	byName      map[string]*User
	names       []string // sorted, as Redis's rax lists them
	fileDefault bool     // the file defined the default user
}

// DefaultName is the name of the user a connection starts as.
const DefaultName = "default"

// Open returns the users of a server with no ACL file: the default user, who may run
// everything on every key, with password pass ("" for none: nopass).
func Open(t *Table, pass string) *Users {
	u := NewUser(DefaultName, t)
	for _, op := range []string{"on", "~*", "&*", "+@all"} {
		_ = u.Set(op)
	}
	if pass == "" {
		_ = u.Set("nopass")
	} else {
		_ = u.Set(">" + pass)
	}
	return &Users{t: t, byName: map[string]*User{DefaultName: u}, names: []string{DefaultName}}
}

// Get returns the user named name, nil if there is none.
func (us *Users) Get(name []byte) *User { return us.byName[string(name)] }

// Default returns the default user.
func (us *Users) Default() *User { return us.byName[DefaultName] }

// DefaultFromFile reports whether the ACL file defined the default user (else it may run
// everything without a password, as in Redis).
func (us *Users) DefaultFromFile() bool { return us.fileDefault }

// List returns the users in name order.
func (us *Users) List() []*User {
	out := make([]*User, len(us.names))
	for i, n := range us.names {
		out[i] = us.byName[n]
	}
	return out
}

// Table returns the command table the users' rules were applied to.
func (us *Users) Table() *Table { return us.t }

// Parse reads an ACL file (its name is for the errors), as Redis 7.0 loads one: a line
// `user NAME rule...` per user, the rules as Set reads them (tokens split as Redis splits
// arguments: "double" and 'single' quotes, \xHH escapes), blank lines skipped, and also
// (unlike Redis) lines starting with # skipped as comments. If the file does not define the
// user default, it is the default user of Open with no password. Every error is reported,
// each naming its line; none names a password.
func Parse(name string, text []byte, t *Table) (*Users, error) {
	us := &Users{t: t, byName: map[string]*User{}}
	var errs []string
	fail := func(line int, msg string) {
		errs = append(errs, name+":"+strconv.Itoa(line)+": "+msg+".")
	}
	for i, line := range strings.Split(string(text), "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		args, ok := SplitArgs(line)
		switch {
		case !ok:
			fail(n, "unbalanced quotes in acl line")
			continue
		case len(args) == 0:
			continue
		case args[0] != "user" || len(args) < 2:
			fail(n, "should start with user keyword")
			continue
		case args[1] == "" || strings.ContainsAny(args[1], " \t\n\v\f\r"): // Redis takes "": ACL LIST could not say it
			fail(n, "username '"+args[1]+"' contains invalid characters")
			continue
		case us.byName[args[1]] != nil:
			fail(n, "Duplicate user '"+args[1]+"' found")
			continue
		}
		u := NewUser(args[1], t)
		bad := false
		for _, op := range args[2:] {
			if err := u.Set(strings.Trim(op, "\t\r\n")); err != nil {
				var re *RuleError
				if errors.As(err, &re) && re.Op != "" {
					fail(n, err.Error())
				} else if !bad { // as Redis: only the first, which may spoil what follows
					fail(n, err.Error())
				}
				bad = true
			}
		}
		if bad {
			continue
		}
		us.byName[u.Name] = u
		us.names = append(us.names, u.Name)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, " "))
	}
	if d := us.byName[DefaultName]; d != nil {
		us.fileDefault = true
	} else {
		us.byName[DefaultName] = Open(t, "").Default()
		us.names = append(us.names, DefaultName)
	}
	sort.Strings(us.names)
	return us, nil
}

// SplitArgs splits a line into arguments as Redis's sdssplitargs does: blanks separate them;
// "double quotes" take \xHH and \n \r \t \b \a escapes (a backslash before anything else is
// that character); 'single quotes' take \'; a closing quote must end the argument. The line
// ends at a NUL byte. False if quotes are unbalanced.
func SplitArgs(line string) ([]string, bool) {
	if i := strings.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	var args []string
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return args, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			var c byte // 0 at the end of the line
			if p < len(line) {
				c = line[p]
			}
			switch {
			case inq:
				switch {
				case c == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					cur = append(cur, unhex(line[p+2])<<4|unhex(line[p+3]))
					p += 3
				case c == '\\' && p+1 < len(line):
					p++
					e := line[p]
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				case c == '"' || p == len(line):
					if !closes(line, p) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'' || p == len(line):
					if !closes(line, p) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, c)
				}
			default:
				switch {
				case p == len(line), c == ' ', c == '\n', c == '\r', c == '\t':
					done = true
				case c == '"':
					inq = true
				case c == '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, string(cur))
	}
}

// closes reports whether line[p] is a closing quote that ends its argument: one followed by
// a blank or the end of the line (and not the end of the line itself: an unclosed quote).
func closes(line string, p int) bool {
	return p < len(line) && (p+1 == len(line) || isSpace(line[p+1]))
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"slices"
	"strings"
)

// User is one user: whether it may log in and with which passwords, which commands it may
// run and which keys it may touch. Its rules are applied with Set, as ACL SETUSER and an
// ACL file line apply them in Redis 7.0.
type User struct {
	Name        string
	t           *Table
	enabled     bool
	nopass      bool
	sanitize    uint8 // 0, or 1 for sanitize-payload, 2 for skip-sanitize-payload (shown only)
	hashes      [][sha256.Size]byte
	allKeys     bool
	keys        [][]byte
	allChannels bool     // may use every pub/sub channel (&* or allchannels)
	channels    []string // else the channel patterns it may use (Redis globs)
	allBase     bool     // the command rules start from +@all (else -@all)
	rules       []string // the command rules since, compacted as Redis 7.0 does ("+get", "-@write")
	allowed     []uint64 // bit set over t: the commands it may run
}

// NewUser returns a user as Redis creates one: off, no password, no keys, no commands.
func NewUser(name string, t *Table) *User {
	return &User{Name: name, t: t, allowed: make([]uint64, t.words())}
}

// Errors of rules, as Redis 7.0 words them (ACLSetUserStringError).
const (
	msgUnknown     = "Unknown command or category name in ACL"
	msgSyntax      = "Syntax error"
	msgKeysAll     = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	msgChannelsAll = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	msgNoSuchPass  = "The password you are trying to remove from the user does not exist"
	msgHash        = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	msgFirstArg    = "Allowing first-arg of a subcommand is not supported"
	msgUnsupported = "not supported by tallyd (docs/security.md lists the ACL rules it reads)"
)

// RuleError is a rule Set refused. Op is the rule when it may be shown (a command or
// category name: never a password), else "".
type RuleError struct {
	Op  string
	Msg string
}

func (e *RuleError) Error() string {
	if e.Op != "" {
		return "Error in applying operation '" + e.Op + "': " + e.Msg
	}
	return e.Msg
}

// Set applies one rule: on off nopass resetpass >password <password #sha256 !sha256 ~pattern
// allkeys resetkeys &pattern allchannels resetchannels +command -command +@category
// -@category +command|sub -command|sub allcommands nocommands reset sanitize-payload
// skip-sanitize-payload. A refused rule changes nothing.
func (u *User) Set(op string) error {
	switch {
	case op == "":
		return &RuleError{Msg: msgSyntax}
	case strings.EqualFold(op, "on"):
		u.enabled = true
	case strings.EqualFold(op, "off"):
		u.enabled = false
	case strings.EqualFold(op, "sanitize-payload"):
		u.sanitize = 1
	case strings.EqualFold(op, "skip-sanitize-payload"):
		u.sanitize = 2
	case strings.EqualFold(op, "nopass"):
		u.nopass, u.hashes = true, nil
	case strings.EqualFold(op, "resetpass"):
		u.nopass, u.hashes = false, nil
	case strings.EqualFold(op, "allkeys"), op == "~*":
		u.allKeys, u.keys = true, nil
	case strings.EqualFold(op, "resetkeys"):
		u.allKeys, u.keys = false, nil
	case strings.EqualFold(op, "allchannels"), op == "&*":
		u.allChannels, u.channels = true, nil
	case strings.EqualFold(op, "resetchannels"):
		u.allChannels, u.channels = false, nil
	case strings.EqualFold(op, "allcommands"), strings.EqualFold(op, "+@all"):
		u.allBase, u.rules = true, nil
		for i := range u.allowed {
			u.allowed[i] = ^uint64(0)
		}
	case strings.EqualFold(op, "nocommands"), strings.EqualFold(op, "-@all"):
		u.allBase, u.rules = false, nil
		clear(u.allowed)
	case strings.EqualFold(op, "reset"):
		for _, o := range []string{"resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "-@all"} {
			_ = u.Set(o)
		}
	case op[0] == '>' || op[0] == '<':
		h := sha256.Sum256([]byte(op[1:]))
		return u.setHash(op[0] == '>', h)
	case op[0] == '#' || op[0] == '!':
		var h [sha256.Size]byte
		if len(op) != 1+2*sha256.Size || strings.ToLower(op[1:]) != op[1:] {
			return &RuleError{Msg: msgHash}
		}
		if _, err := hex.Decode(h[:], []byte(op[1:])); err != nil {
			return &RuleError{Msg: msgHash}
		}
		return u.setHash(op[0] == '#', h)
	case op[0] == '~':
		if u.allKeys {
			return &RuleError{Msg: msgKeysAll}
		}
		for _, k := range u.keys {
			if string(k) == op[1:] {
				return nil
			}
		}
		u.keys = append(u.keys, []byte(op[1:]))
	case op[0] == '&':
		if u.allChannels {
			return &RuleError{Msg: msgChannelsAll}
		}
		for _, c := range u.channels {
			if c == op[1:] {
				return nil
			}
		}
		u.channels = append(u.channels, op[1:])
	case op[0] == '+' || op[0] == '-':
		return u.setCommand(op)
	case op[0] == '%' || op[0] == '(' || strings.EqualFold(op, "clearselectors"):
		return &RuleError{Op: op, Msg: msgUnsupported}
	default:
		return &RuleError{Msg: msgSyntax}
	}
	return nil
}

// setHash adds (or removes) a password's hash; adding one ends nopass.
func (u *User) setHash(add bool, h [sha256.Size]byte) error {
	for i, x := range u.hashes {
		if x == h {
			if !add {
				u.hashes = append(u.hashes[:i:i], u.hashes[i+1:]...)
			}
			return nil
		}
	}
	if !add {
		return &RuleError{Msg: msgNoSuchPass}
	}
	u.hashes = append(u.hashes, h)
	u.nopass = false
	return nil
}

// setCommand applies +name, -name, +@category or -@category.
func (u *User) setCommand(op string) error {
	allow := op[0] == '+'
	name := strings.ToLower(op[1:])
	t := u.t
	if cat, ok := strings.CutPrefix(name, "@"); ok {
		c, ok := LookupCategory(cat)
		if !ok {
			return &RuleError{Op: op, Msg: msgUnknown}
		}
		// As Redis: a command in the category changes with all its subcommands, and a
		// subcommand in it changes alone.
		for id := range t.cmds {
			if t.cmds[id].Cats&c == 0 {
				continue
			}
			if t.top(id) {
				u.change(id, allow)
			} else {
				u.set(id, allow)
			}
		}
		u.addRule(name, allow)
		return nil
	}
	if id, ok := t.Lookup(name); ok {
		u.change(id, allow)
		u.addRule(name, allow)
		return nil
	}
	if redisNames[name] {
		u.addRule(name, allow) // a Redis command tallyd does not have: it permits nothing here
		return nil
	}
	parent, arg, ok := strings.Cut(name, "|")
	if _, known := t.Lookup(parent); ok && (known || redisNames[parent]) {
		if strings.Contains(arg, "|") || redisNames[name] || len(t.subs[t.ids[parent]]) > 0 {
			return &RuleError{Op: op, Msg: msgFirstArg}
		}
		return &RuleError{Op: op, Msg: msgUnsupported} // Redis's first-arg rules (+select|0)
	}
	return &RuleError{Op: op, Msg: msgUnknown}
}

// change sets command id's bit and those of its subcommands.
func (u *User) change(id int, allow bool) {
	u.set(id, allow)
	for _, s := range u.t.subs[id] {
		u.set(s, allow)
	}
}

func (u *User) set(id int, allow bool) {
	if allow {
		u.allowed[id/64] |= 1 << (id % 64)
	} else {
		u.allowed[id/64] &^= 1 << (id % 64)
	}
}

// addRule records a command rule as Redis 7.0 does (ACLUpdateCommandRules): earlier rules
// on the same name, or on one of its subcommands, are dropped, and the rule goes last.
func (u *User) addRule(name string, allow bool) {
	kept := u.rules[:0]
	for _, r := range u.rules {
		if n := r[1:]; n == name || strings.HasPrefix(n, name+"|") {
			continue
		}
		kept = append(kept, r)
	}
	sign := "-"
	if allow {
		sign = "+"
	}
	u.rules = append(kept, sign+name)
}

// Enabled reports whether the user may log in (on).
func (u *User) Enabled() bool { return u.enabled }

// NoPass reports whether any password logs the user in.
func (u *User) NoPass() bool { return u.nopass }

// Authenticate reports whether pass logs the user in: it is on, and nopass or pass is one
// of its passwords (compared by their SHA-256 in constant time).
func (u *User) Authenticate(pass []byte) bool {
	if !u.enabled {
		return false
	}
	if u.nopass {
		return true
	}
	h := sha256.Sum256(pass)
	ok := 0
	for i := range u.hashes {
		ok |= subtle.ConstantTimeCompare(h[:], u.hashes[i][:])
	}
	return ok == 1
}

// CanRun reports whether the user may run command id of its table.
func (u *User) CanRun(id int) bool { return u.allowed[id/64]&(1<<(id%64)) != 0 }

// CanRunAll reports whether the user may run every command and subcommand in c.
func (u *User) CanRunAll(c Category) bool {
	for id, cmd := range u.t.cmds {
		if cmd.Cats&c != 0 && !u.CanRun(id) {
			return false
		}
	}
	return true
}

// Unrestricted reports whether the user may run every command on every key.
func (u *User) Unrestricted() bool {
	for id := range u.t.cmds {
		if !u.CanRun(id) {
			return false
		}
	}
	return u.allKeys
}

// AllKeys reports whether the user may touch every key (~* or allkeys).
func (u *User) AllKeys() bool { return u.allKeys }

// Patterns are the user's key patterns (Redis globs) unless AllKeys. The caller must not
// change them.
func (u *User) Patterns() [][]byte { return u.keys }

// AllChannels reports whether the user may use every pub/sub channel (&* or allchannels).
func (u *User) AllChannels() bool { return u.allChannels }

// Channels are the user's channel patterns (Redis globs) unless AllChannels. The caller
// must not change them.
func (u *User) Channels() []string { return u.channels }

// Describe is the user as ACL LIST shows it, as Redis 7.0 writes it: user, name, flags,
// password hashes, key patterns, channels, command rules.
func (u *User) Describe() string {
	w := []string{"user", u.Name, pick(u.enabled, "on", "off")}
	if u.nopass {
		w = append(w, "nopass")
	}
	w = append(w, [...]string{"", "sanitize-payload", "skip-sanitize-payload"}[u.sanitize])
	for _, h := range u.hashes {
		w = append(w, "#"+hex.EncodeToString(h[:]))
	}
	w = append(w, pick(u.allKeys, "~*", ""))
	for _, k := range u.keys {
		w = append(w, "~"+string(k))
	}
	w = append(w, pick(u.allChannels, "&*", "resetchannels"))
	for _, c := range u.channels {
		w = append(w, "&"+c)
	}
	w = append(w, pick(u.allBase, "+@all", "-@all"))
	w = append(w, u.rules...)
	return strings.Join(slices.DeleteFunc(w, func(s string) bool { return s == "" }), " ")
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

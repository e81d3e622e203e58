package loop

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// Who may do what on the Redis-text side, as Redis 6+/7 decides it: a connection runs as
// the default user until AUTH (or HELLO ... AUTH) logs it in as another; the default user
// needs no password unless --requirepass or the ACL file (--aclfile) gives it one. Before a
// command runs, slockCommand asks permit: NOAUTH for a connection that has not logged in
// (AUTH, HELLO and QUIT aside), NOPERM for a command or a key its user may not touch. The
// errors are Redis 7.0's own texts, so that clients react as they do to Redis.
//
// The check is one bit test per command (and a glob per key for a user limited to some
// keys), with nothing allocated; with neither --requirepass nor --aclfile it is one branch.
// Who may connect at all (allow-lists, protected mode) is admit.go.

// authState is the users and what the loop derives from them.
type authState struct {
	users  *acl.Users
	file   string // --aclfile ("" when none): what ACL LOAD reads
	open   bool   // the default user is on and needs no password: a connection starts logged in
	checks bool   // some command may be refused: not everyone is the default user with every permission
	log    rateLog
}

// Redis 7.0's errors.
const (
	noAuthText      = "NOAUTH Authentication required."
	wrongPassText   = "WRONGPASS invalid username-password pair or user is disabled."
	noPermKeyText   = "NOPERM this user has no permissions to access one of the keys used as arguments"
	helloNoAuthText = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	authNoPassText  = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	noACLFileText   = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."
)

// LoadUsers returns the users tallyd runs with: those of the ACL file aclFile, or else the
// default user with the password requirePass (none if ""). Giving both is an error: the ACL
// file says the default user's password.
func LoadUsers(requirePass, aclFile string) (*acl.Users, error) {
	if aclFile == "" {
		return acl.Open(rediscmd.ACLTable(), requirePass), nil
	}
	if requirePass != "" {
		return nil, errors.New("--requirepass and --aclfile together: give the default user's password in the ACL file (user default on >password ~* +@all)")
	}
	text, err := os.ReadFile(aclFile)
	if err != nil {
		return nil, fmt.Errorf("--aclfile: %w", err)
	}
	us, err := acl.Parse(aclFile, text, rediscmd.ACLTable())
	if err != nil {
		return nil, fmt.Errorf("--aclfile: %w", err)
	}
	return us, nil
}

// setUsers makes us the users. A connection logged in as a user whose definition changed
// (password, rules, off) or who is gone is closed; one logged in as an unchanged user goes
// on. A connection that never logged in runs as the new default user (and must log in if
// that one now needs a password).
func (s *Server) setUsers(us *acl.Users) {
	old := s.auth.users
	d := us.Default()
	s.auth.users = us
	s.m.hot.users.Store(us) // the status page's basic auth reads them off the loop (ui.go)
	s.auth.open = d.Enabled() && d.NoPass()
	s.auth.checks = !s.auth.open || len(us.List()) > 1 || !d.Unrestricted()
	if old == nil {
		return
	}
	same := map[*acl.User]*acl.User{}
	for _, u := range old.List() {
		if v := us.Get([]byte(u.Name)); v != nil && v.Enabled() && v.Describe() == u.Describe() {
			same[u] = v
		}
	}
	closed := 0
	for _, cs := range s.ct.conns {
		sc := cs.slock
		if sc == nil || sc.user == nil || cs.closed {
			continue
		}
		if v := same[sc.user]; v != nil {
			sc.user = v
			continue
		}
		s.closeLater(cs)
		closed++
	}
	if closed > 0 {
		s.log.Info().Int("connections", closed).Msg("users reloaded: connections logged in as a user that changed or is gone are closed")
	}
}

// userOf is the user cs runs as.
func (s *Server) userOf(cs *conn) *acl.User {
	if u := cs.slock.user; u != nil {
		return u
	}
	return s.auth.users.Default()
}

// aclDenial is why a user may not run a command line (Redis's ACL_DENIED_*), or aclOK.
type aclDenial uint8

const (
	aclOK aclDenial = iota
	aclDeniedCmd
	aclDeniedKey
	aclDeniedChannel
)

// aclCheck is THE check of command line args of spec (known, arity right) against user u's
// permissions, as Redis 7.0's ACLCheckAllPerm: the command (or subcommand) first, then its
// keys, then its channels. Every path a command runs by asks it: the wire and MULTI
// (permit), a forwarded command on the leader (permit on a virtual connection), each
// redis.call of a script (scriptPermit); only the error text differs. id is the command's
// ACL id (its name for the error), -1 for an unknown subcommand, which the command answers.
func aclCheck(u *acl.User, spec *rediscmd.Spec, args [][]byte) (d aclDenial, id int) {
	id, ok := spec.ACLID(args)
	if !ok {
		return aclOK, -1 // an unknown subcommand, or its arity: the command answers that
	}
	if !u.CanRun(id) {
		return aclDeniedCmd, id
	}
	if !u.AllKeys() {
		for i := spec.FirstKey(args); i > 0; i = spec.NextKey(args, i) {
			if !keyAllowed(u, args[i]) {
				return aclDeniedKey, id
			}
		}
	}
	if !u.AllChannels() && !channelsAllowed(u, spec, args) { // pubsub_cmd.go
		return aclDeniedChannel, id
	}
	return aclOK, id
}

// permit checks the command line args of spec (nil: unknown) before it runs or is queued
// by MULTI: false if it is refused, and then the error is answered (and a transaction it
// would have joined will abort, as in Redis). A virtual connection (a command a follower
// forwarded) is checked again here, as the user the follower named (virtUser): this
// member's ACL is the one its store obeys, whatever the follower's said.
func (s *Server) permit(cs *conn, spec *rediscmd.Spec, args [][]byte) bool {
	if !s.auth.checks || spec == nil || !spec.ArityOK(len(args)) || spec.Flags&rediscmd.CmdNoAuth != 0 {
		return true // unknown commands and wrong arities answer their own errors first, as in Redis
	}
	sc := cs.slock
	u := sc.user
	if u == nil {
		if !s.auth.open && cs.virt == nil { // a follower logged its client in (or sent no name: the default user)
			s.refuseCommand(cs, resp.AppendError(s.scratchFor(cs), noAuthText))
			return false
		}
		u = s.auth.users.Default()
	}
	switch d, id := aclCheck(u, spec, args); d {
	case aclDeniedCmd:
		b := append(s.scratchFor(cs), "-NOPERM this user has no permissions to run the '"...)
		b = append(b, rediscmd.ACLTable().Name(id)...)
		s.refuseCommand(cs, append(b, "' command\r\n"...))
		return false
	case aclDeniedKey:
		s.refuseCommand(cs, resp.AppendError(s.scratchFor(cs), noPermKeyText))
		return false
	case aclDeniedChannel:
		s.refuseCommand(cs, resp.AppendError(s.scratchFor(cs), noPermChannelText))
		return false
	}
	return true
}

// virtUser makes virtual connection vc run as the user a follower named in its Forward
// frame (name; empty from members that do not send it: the default user), looked up in this
// member's own users (members share the ACL file). A name this member does not have, or has
// off, makes vc's commands refused (permitVirt).
func (a *authState) virtUser(vc *conn, name []byte) {
	sc := vc.slock
	if u := sc.user; u != nil && u.Name == string(name) || u == nil && len(name) == 0 && !sc.noUser {
		return // as for its last frame
	}
	sc.user, sc.noUser = nil, false
	if len(name) == 0 {
		return
	}
	u := a.users.Get(name)
	if u == nil || !u.Enabled() {
		sc.noUser = true
		return
	}
	sc.user = u
}

// permitVirt refuses the command of a virtual connection whose user this member does not
// know (virtUser), with the NOPERM error Redis gives a user that may not run it: the
// leader cannot check its scripts' commands, so it runs nothing of it.
func (s *Server) permitVirt(cs *conn, spec *rediscmd.Spec, args [][]byte) bool {
	if spec == nil || !spec.ArityOK(len(args)) {
		return true // answered unknown, or its arity
	}
	name := strings.ToLower(spec.Name)
	if id, ok := spec.ACLID(args); ok {
		name = rediscmd.ACLTable().Name(id)
	}
	b := append(s.scratchFor(cs), "-NOPERM this user has no permissions to run the '"...)
	b = append(b, name...)
	s.refuseCommand(cs, append(b, "' command\r\n"...))
	return false
}

// authLocal reports whether spec runs on the member the client is connected to, never
// forwarded to the leader: logging in, and the ACL, are each member's own.
func authLocal(spec *rediscmd.Spec) bool {
	return spec != nil && spec.Route == rediscmd.RouteUser
}

// keyAllowed reports whether one of u's patterns matches key.
func keyAllowed(u *acl.User, key []byte) bool {
	for _, p := range u.Patterns() {
		if rediscmd.Match(p, key) {
			return true
		}
	}
	return false
}

// refuseCommand answers a refused command with b (its error appended to cs's output).
func (s *Server) refuseCommand(cs *conn, b []byte) {
	if cs.slock.tx.active {
		cs.slock.tx.dirty = true // EXEC will abort
	}
	s.sendTo(cs, b)
}

// login logs cs in as u (nil: no such user) with pass; false (and a log line, rate-limited)
// if the user does not exist, is off, or pass is not its password.
func (s *Server) login(cs *conn, u *acl.User, pass []byte) bool {
	if u != nil && u.Authenticate(pass) {
		cs.slock.user = u
		if e := s.log.Debug(); e.Enabled() {
			e.Uint64("conn", uint64(cs.owner)).Str("user", u.Name).Msg("logged in")
		}
		return true
	}
	if missed, ok := s.auth.log.allow(s.now()); ok {
		ev := s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("remote", cs.slock.remote).
			Uint64("failed_since_last_line", missed)
		if u != nil { // an unknown name is not repeated: it may be a password sent in its place
			ev = ev.Str("user", u.Name)
		}
		ev.Msg("AUTH failed: no such user, user off or wrong password")
	}
	return false
}

// authCmd answers AUTH [user] password.
func (s *Server) authCmd(cs *conn, args [][]byte) {
	b := s.scratchFor(cs)
	users := s.auth.users
	switch {
	case len(args) > 3:
		b = resp.AppendError(b, "ERR syntax error")
	case len(args) == 2 && users.Default().NoPass():
		b = resp.AppendError(b, authNoPassText)
	case len(args) == 2 && s.login(cs, users.Default(), args[1]),
		len(args) == 3 && s.login(cs, users.Get(args[1]), args[2]):
		b = resp.AppendSimple(b, "OK")
	default:
		b = resp.AppendError(b, wrongPassText)
	}
	s.sendTo(cs, b)
}

// helloCmd answers HELLO [2 [AUTH user password] [SETNAME name]]: it logs in first if asked
// to, and answers only a connection that is logged in.
func (s *Server) helloCmd(cs *conn) {
	r := &cs.slock.req
	switch {
	case r.User != nil && !s.login(cs, s.auth.users.Get(r.User), r.Pass):
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), wrongPassText))
	case cs.slock.user == nil && !s.auth.open:
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), helloNoAuthText))
	default:
		s.hello(cs)
	}
}

// aclCmd answers ACL WHOAMI|LIST|USERS|CAT [category]|LOAD.
func (s *Server) aclCmd(cs *conn, args [][]byte) {
	sub := args[1]
	b := s.scratchFor(cs)
	users := s.auth.users
	switch {
	case resp.Is(sub, "WHOAMI") && len(args) == 2:
		b = resp.AppendBulkString(b, s.userOf(cs).Name)
	case resp.Is(sub, "LIST") && len(args) == 2:
		list := users.List()
		b = resp.AppendArray(b, len(list))
		for _, u := range list {
			b = resp.AppendBulkString(b, u.Describe())
		}
	case resp.Is(sub, "USERS") && len(args) == 2:
		list := users.List()
		b = resp.AppendArray(b, len(list))
		for _, u := range list {
			b = resp.AppendBulkString(b, u.Name)
		}
	case resp.Is(sub, "CAT") && len(args) == 2:
		names := acl.CategoryNames()
		b = resp.AppendArray(b, len(names))
		for _, n := range names {
			b = resp.AppendBulkString(b, n)
		}
	case resp.Is(sub, "CAT") && len(args) == 3:
		c, ok := acl.LookupCategory(string(args[2]))
		if !ok {
			b = resp.AppendError(b, "ERR Unknown category '"+clip(args[2])+"'")
			break
		}
		names := rediscmd.ACLTable().InCategory(c)
		b = resp.AppendArray(b, len(names))
		for _, n := range names {
			b = resp.AppendBulkString(b, n)
		}
	case resp.Is(sub, "CAT"):
		b = resp.AppendError(b, "ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.")
	case resp.Is(sub, "LOAD") && len(args) == 2:
		if s.auth.file == "" {
			b = resp.AppendError(b, noACLFileText)
			break
		}
		us, err := LoadUsers("", s.auth.file) // a small file, read on the loop as Redis does
		if err != nil {
			s.log.Error().Err(err).Msg("ACL LOAD: the users stay as they were")
			b = resp.AppendError(b, "ERR "+err.Error())
			break
		}
		s.setUsers(us)
		s.log.Info().Str("aclfile", s.auth.file).Int("users", len(us.List())).Msg("ACL LOAD: users reloaded")
		b = resp.AppendSimple(b, "OK")
	default:
		b = subcommandError(b, "ACL", sub, []string{"WHOAMI", "LIST", "USERS", "CAT", "LOAD"})
	}
	s.sendTo(cs, b)
}

// clip is an argument as an error may repeat it: at most 128 bytes.
func clip(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// usersSummary says who may connect to the Redis-text side, for the start-up log.
func (a *authState) usersSummary() string {
	us := a.users
	switch {
	case a.file != "":
		return strconv.Itoa(len(us.List())) + " users from " + a.file
	case !us.Default().NoPass():
		return "password (requirepass)"
	}
	return "none"
}

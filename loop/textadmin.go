package loop

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// This file is the Redis housekeeping commands a client sends on connect (CONFIG, CLIENT,
// COMMAND) on the Redis-text side (redis.go, slockkv.go).

// slockAdmin answers the Redis housekeeping commands clients send on connect (CONFIG GET,
// CLIENT, COMMAND), with Redis 7's errors for an unknown subcommand or a wrong count of
// arguments.
func (s *Server) slockAdmin(cs *conn, args [][]byte) {
	name := args[0]
	sub := argAt(args, 1)
	b := s.scratchFor(cs)
	n := len(args)
	switch {
	case resp.Is(name, "CONFIG"):
		switch {
		case resp.Is(sub, "GET") && n >= 3:
			var hits [][2]string
			admin := s.userOf(cs).CanRunAll(acl.Admin) // the data path is shown to administrators only
			for _, pat := range args[2:] {
				for _, kv := range s.configItems(admin) {
					if rediscmd.Match(lowerBytes(pat), []byte(kv[0])) {
						hits = append(hits, kv)
					}
				}
			}
			b = resp.AppendArray(b, 2*len(hits))
			for _, kv := range hits {
				b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
			}
		case resp.Is(sub, "SET") && n >= 4:
			b = s.ps.configSet(b, args) // notify-keyspace-events, client-output-buffer-limit (pubsub_config.go)
		case resp.Is(sub, "RESETSTAT") && n == 2:
			b = resp.AppendSimple(b, "OK")
		default:
			b = subcommandError(b, "CONFIG", sub, []string{"GET", "SET", "RESETSTAT"})
		}
	case resp.Is(name, "CLIENT"):
		switch {
		case resp.Is(sub, "SETNAME") && n == 3:
			if !clientName(args[2]) {
				b = resp.AppendError(b, "ERR Client names cannot contain spaces, newlines or special characters.")
				break
			}
			cs.slock.name = string(args[2])
			b = resp.AppendSimple(b, "OK")
		case resp.Is(sub, "GETNAME") && n == 2:
			if cs.slock.name == "" {
				b = resp.AppendNull(b)
			} else {
				b = resp.AppendBulkString(b, cs.slock.name)
			}
		case resp.Is(sub, "SLOCK") && n == 3 && (resp.Is(args[2], "ON") || resp.Is(args[2], "OFF")):
			cs.slock.text.Slock = resp.Is(args[2], "ON")
			b = resp.AppendSimple(b, "OK")
		case resp.Is(sub, "SETINFO") && n == 4, resp.Is(sub, "REPLY") && n == 3 && resp.Is(args[2], "ON"),
			(resp.Is(sub, "NO-EVICT") || resp.Is(sub, "NO-TOUCH")) && n == 3 && (resp.Is(args[2], "ON") || resp.Is(args[2], "OFF")):
			b = resp.AppendSimple(b, "OK")
		case resp.Is(sub, "REPLY") && n == 3:
			b = resp.AppendError(b, "ERR CLIENT REPLY OFF and SKIP are not supported")
		case (resp.Is(sub, "NO-EVICT") || resp.Is(sub, "NO-TOUCH") || resp.Is(sub, "SLOCK")) && n == 3:
			b = resp.AppendError(b, "ERR syntax error")
		case resp.Is(sub, "ID") && n == 2:
			b = resp.AppendInt(b, int64(cs.owner))
		case resp.Is(sub, "LIST") && n == 2, resp.Is(sub, "INFO") && n == 2:
			line := "id=" + strconv.FormatUint(uint64(cs.owner), 10) + " addr=" + remoteAddr(cs.c).String() +
				" name=" + cs.slock.name + " db=" + strconv.Itoa(int(cs.slock.text.DB)) + "\n"
			b = resp.AppendBulkString(b, line)
		case resp.Is(sub, "LIST"):
			b = resp.AppendError(b, "ERR syntax error")
		default:
			b = subcommandError(b, "CLIENT", sub, []string{"SETNAME", "GETNAME", "SLOCK", "SETINFO", "REPLY",
				"NO-EVICT", "NO-TOUCH", "ID", "LIST", "INFO"})
		}
	default: // COMMAND
		switch {
		case n == 1, (resp.Is(sub, "DOCS") || resp.Is(sub, "INFO") || resp.Is(sub, "LIST")):
			b = resp.AppendArray(b, 0) // no command docs: clients fall back to plain use
		case resp.Is(sub, "COUNT") && n == 2:
			b = resp.AppendInt(b, 0)
		default:
			b = subcommandError(b, "COMMAND", sub, []string{"COUNT"})
		}
	}
	s.sendTo(cs, b)
}

// subcommandError appends Redis 7's error for subcommand sub of cmd: a wrong number of
// arguments if it is one of known, else an unknown subcommand.
func subcommandError(b []byte, cmd string, sub []byte, known []string) []byte {
	for _, k := range known {
		if resp.Is(sub, k) {
			return rediscmd.AppendTextError(b, &rediscmd.TextError{Msg: "wrong number of arguments for '" +
				strings.ToLower(cmd+"|"+k) + "' command"})
		}
	}
	if len(sub) > 128 {
		sub = sub[:128]
	}
	return rediscmd.AppendTextError(b, &rediscmd.TextError{Msg: "unknown subcommand '" + string(sub) + "'. Try " + cmd + " HELP."})
}

// clientName reports whether a CLIENT SETNAME name is one Redis accepts: printable ASCII
// without spaces (or empty: no name).
func clientName(name []byte) bool {
	for _, c := range name {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// configItems are the CONFIG GET parameters tallyd answers (redis-benchmark asks for save
// and appendonly before it starts); dir is empty unless admin. No secret is ever one of them
// (requirepass is not).
func (s *Server) configItems(admin bool) [][2]string {
	dir := ""
	if admin {
		dir = s.cfg.DataDir
	}
	ao := "no"
	if s.persist.w != nil {
		ao = "yes"
	}
	return [][2]string{
		{"save", ""}, {"appendonly", ao}, {"appendfsync", s.cfg.AppendFsync.String()},
		{"databases", strconv.Itoa(store.MaxLockDB + 1)}, {"dir", dir},
		{"maxclients", strconv.Itoa(s.ct.fdCap)}, {"timeout", strconv.FormatInt(int64(s.cfg.IdleTimeout/time.Second), 10)},
		{"slowlog-log-slower-than", strconv.FormatInt(s.cfg.SlowlogSlowerThan, 10)},
		{"slowlog-max-len", strconv.Itoa(s.cfg.SlowlogMaxLen)},
		{"lua-time-limit", strconv.FormatInt(s.luaTimeLimit().Milliseconds(), 10)},
		{"notify-keyspace-events", s.ps.notify.String()}, {"client-output-buffer-limit", s.ps.obufLimits()},
	}
}

func lowerBytes(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// nameClash refuses a text command on a hashed key name (rediscmd.Keys) whose LockKey id
// holds the value of another name: a value record carries its key's name (its KEY
// property), and a value belongs to that name only. Distinct hashed names share a LockKey
// only by a 128-bit hash collision; even then the two keys are never merged. A value
// without a name (a binary client's) is the name's. A short name's LockKey is no other
// name's, so its values are not looked at (a binary client's value there is the name's,
// whatever KEY property it carries).
func (s *Server) nameClash(db uint8, id [16]byte, name []byte) error {
	if !rediscmd.Hashed(name) {
		return nil
	}
	v := s.st.locks.Value(db, id)
	if v == nil {
		return nil
	}
	if other, ok := rediscmd.KeyName(v); ok && !bytes.Equal(other, name) {
		return &rediscmd.TextError{Msg: "key " + strconv.Quote(string(name)) + " maps to the LockKey of key " +
			strconv.Quote(string(other)) + ", which holds a value: refused"}
	}
	return nil
}

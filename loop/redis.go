package loop

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// This file is slock's Redis-text side: the commands of a connection that speaks RESP,
// looked up in proto/rediscmd's command table and dispatched by their typed form. Key/value
// commands are in slockkv.go.

// textHandler serves Redis-text commands on the slock port. A LOCK or UNLOCK (or a
// key/value command run as one) that has not resolved holds the commands behind it back.
type textHandler struct {
	s        *Server
	dec      resp.Decoder
	args     [][]byte
	raw      []byte   // the line args came from
	execArgs [][]byte // the arguments of a queued command EXEC runs
	execDec  resp.Decoder
	newID    func() [16]byte // textID, made once: the parse calls it through the command table
}

func (h *textHandler) parse(cs *conn, in []byte) (int, error) {
	h.dec = textDecoder(h.s.cfg.MaxInput)                          // --max-input may change at a reload
	h.dec.Unauthenticated = cs.slock.user == nil && !h.s.auth.open // Redis's smaller limits before AUTH
	args, n, err := h.dec.Parse(in, h.args[:0])
	h.args = args
	if n == 0 && err == nil {
		cs.need = h.dec.Need // a large argument: wait for all of it (conn.need)
	}
	if err != nil {
		if errors.Is(err, resp.ErrInline) {
			return 0, fmt.Errorf("inline text command: %w", err)
		}
		h.s.protocolError(cs, err)
		return 0, fmt.Errorf("bad RESP request: %w", err)
	}
	h.raw = in[:n]
	if h.s.cl != nil && n > 0 && len(args) > 0 && h.s.holdText(cs, args) {
		h.args, h.raw = h.args[:0], nil
		return 0, nil // it waits in the input (cluster_fwd.go)
	}
	return n, nil
}

func (h *textHandler) exec(cs *conn, now int64) {
	args := h.args
	h.args = keepArgs(args)
	if len(args) == 0 {
		return
	}
	if h.s.slockCommand(cs, args, h.raw, now) {
		cs.quit = true
	}
	h.raw = nil
	cs.busy = cs.slock.waiting || cs.slock.contActive() || cs.slock.repl.active
}

func (h *textHandler) more(cs *conn, now int64) {
	h.s.contMore(cs, now) // a command going on across turns (textcont.go)
	cs.busy = cs.slock.waiting || cs.slock.contActive() || cs.slock.repl.active
}
func (h *textHandler) closed(cs *conn, now int64) {
	h.s.slockClose(cs, now)
}

// flushAt is the size of the replies an EXEC builds for one connection past which they are
// written before it goes on: a transaction runs whole in one turn, however much it answers.
const flushAt = 256 << 10

// textDiscard drops the replies not yet written to cs (it is being closed).
func (s *Server) textDiscard(cs *conn) {
	cs.out, cs.gates = cs.out[:0], cs.gates[:0]
}

// textFlush writes the replies an EXEC built so far for cs once they are many, so that what
// waits in memory stays bounded; false means the connection is closed or must be.
func (s *Server) textFlush(cs *conn) bool {
	if len(cs.out) >= flushAt {
		s.write(cs)
	}
	return !cs.closed && !cs.closing && !cs.quit
}

// slockCommand runs one text command line (raw: its bytes as they came); true means close
// the connection after the reply.
func (s *Server) slockCommand(cs *conn, args [][]byte, raw []byte, now int64) (quit bool) {
	sc := cs.slock
	sc.text.Keys = s.st.keys
	spec := rediscmd.Lookup(args[0])
	if sc.noUser && !s.permitVirt(cs, spec, args) {
		return false // forwarded for a user this member does not know (auth.go)
	}
	if !s.permit(cs, spec, args) {
		return false // NOAUTH or NOPERM (auth.go); a forwarded command is checked again here
	}
	if spec != nil && !sc.tx.exec && spec.ArityOK(len(args)) && sc.subscribed() && !subscribedAllows(spec) {
		s.subscribedError(cs, spec, args) // as Redis 7.0 over RESP2 (pubsub_cmd.go)
		return false
	}
	if sc.tx.active && (spec == nil || spec.Flags&rediscmd.CmdTx == 0) {
		s.txQueue(cs, spec, args, raw)
		return false
	}
	if s.cl != nil && cs.virt == nil && !s.cl.serving() && !authLocal(spec) && s.clusterText(cs, spec, raw) {
		return false // forwarded to the leader, or answered CLUSTERDOWN
	}
	start := s.textClock() // SLOWLOG, and the connection's slice (slowlog.go)
	s.advance(now)         // a key that an earlier command of this batch expired is gone for this one
	t := s.m.textBegin(cs, args[0])
	sc.local = s.cl != nil && connLocal(spec)
	changes := s.st.locks.Changes()
	quit = s.runCommand(cs, spec, args, now)
	if s.cl != nil && s.st.locks.Changes() != changes {
		s.noteWrite(cs) // what WAIT counts (wait.go)
	}
	sc.local = false
	sc.req.Args, sc.req.Arg = nil, nil // views into the input: gone once served
	s.m.textDone(t)
	s.textRan(cs, args, start)
	return quit
}

// runCommand runs one text command whose spec (nil: unknown) slockCommand looked up; true
// means close the connection after the reply. (No defers here: it returns from many places.)
func (s *Server) runCommand(cs *conn, spec *rediscmd.Spec, args [][]byte, now int64) (quit bool) {
	sc := cs.slock
	if spec == nil {
		s.sendTo(cs, rediscmd.AppendUnknown(s.scratchFor(cs), args))
		return false
	}
	if !spec.ArityOK(len(args)) {
		if spec.Cmd == rediscmd.CmdExec { // as Redis: EXEC with arguments aborts the transaction
			if sc.tx.active {
				s.txReset(cs)
			}
			s.sendTo(cs, resp.AppendError(s.scratchFor(cs),
				"EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"))
			return false
		}
		s.textError(cs, spec.ArityError())
		return false
	}
	if !sc.tx.exec && diskGuarded(spec) { // EXEC checked its queue once, before it began
		if why := s.logFailing(); why != "" {
			s.sendTo(cs, resp.AppendError(s.scratchFor(cs), misconf(why)))
			return false
		}
	}
	if spec.Flags&rediscmd.CmdDenyOOM != 0 && s.overBudget() {
		s.refuseOOM(cs, spec.Name)
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), oomText))
		return false
	}
	r := &sc.req
	h := &s.h.slockText
	if h.newID == nil { // a closure passed on through a func value escapes: made once
		h.newID = s.st.ids.Next // what textID answers, for any connection
	}
	var err error
	sc.text.Keyspace = s.cfg.RedisKeyspace // the keyspace's rows build no lock frame
	s.sl.dataBuf, err = rediscmd.Parse(spec, args, &sc.text, now/1e6, h.newID, r, s.sl.dataBuf[:0])
	if err != nil {
		s.textError(cs, err)
		return false
	}
	if sc.tx.exec && spec.Flags&rediscmd.CmdMayWait != 0 {
		r.Frame.Timeout, r.KV.Frame.Timeout = 0, 0 // nothing waits inside EXEC
	}
	if s.cfg.RedisKeyspace {
		if f := ksExecs[spec.Index]; f != nil {
			return f(s, cs, r, now) // the row's handler on store.Keyspace (ksredis.go)
		}
	}
	return execs[spec.Index](s, cs, r, now)
}

// execFn runs a parsed text command for cs; true means close the connection after the reply.
type execFn func(s *Server, cs *conn, r *rediscmd.Request, now int64) (quit bool)

// execs are the text commands' handlers, indexed by rediscmd.Spec.Index: the other half of
// proto/rediscmd's command table (spec and parse there, exec here), as Redis's server.c.
// init fills it (a handler may run a command itself: EVAL).
var execs []execFn

func init() {
	execs = make([]execFn, len(rediscmd.Commands()))
	for _, spec := range rediscmd.Commands() {
		f := execByName[spec.Name]
		if f == nil {
			panic("loop: no handler for text command " + spec.Name)
		}
		execs[spec.Index] = f
	}
	if len(execByName) != len(execs) {
		panic("loop: a text command handler for a name not in the table")
	}
}

// execByName are the handlers by command name, one entry for each command of the table.
var execByName = map[string]execFn{
	"LOCK": execLock, "UNLOCK": execLock, "PUSH": execLock,
	"PING": execPing,
	"ECHO": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.sendTo(cs, resp.AppendBulk(s.scratchFor(cs), r.Args[1]))
		return false
	},
	"QUIT": func(s *Server, cs *conn, _ *rediscmd.Request, _ int64) bool {
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		return true
	},
	"SELECT": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		cs.slock.text.DB = uint8(r.N)
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		return false
	},
	"TIMEOUT": execTimeout,
	"INFO": func(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
		s.sendTo(cs, resp.AppendBulk(s.scratchFor(cs), resp.InfoSections(s.slockInfo(now), r.Args[1:])))
		return false
	},
	"CONFIG": execAdmin, "CLIENT": execAdmin, "COMMAND": execAdmin,
	"HELLO":   func(s *Server, cs *conn, _ *rediscmd.Request, _ int64) bool { s.helloCmd(cs); return false },
	"MULTI":   execMulti,
	"EXEC":    func(s *Server, cs *conn, _ *rediscmd.Request, now int64) bool { return s.txExec(cs, now) },
	"DISCARD": execDiscard,
	"WATCH":   func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.txWatch(cs, r.Args[1:]); return false },
	"UNWATCH": func(s *Server, cs *conn, _ *rediscmd.Request, _ int64) bool {
		s.unwatchAll(cs)
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		return false
	},
	"CONSISTENCY": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.consistency(cs, r.Args); return false },
	"CLUSTER":     func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.clusterCmd(cs, r.Args); return false },
	"TOKEN":       func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.token(cs, r.Args); return false },
	"GETFENCE": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		sc := cs.slock
		f := s.st.locks.KeyFence(sc.text.DB, sc.text.KeyID(r.Args[1]))
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(f)))
		return false
	},
	"AUTH": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.authCmd(cs, r.Args); return false },
	"ACL":  func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.aclCmd(cs, r.Args); return false },
	"SLOWLOG": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.put(cs, s.slow.command(s.out(cs), r.Args))
		return false
	},
	"WAIT": func(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
		s.waitCmd(cs, r.Args, now)
		return false
	},
	"EVAL": execEval, "EVALSHA": execEval, "EVAL_RO": execEval, "EVALSHA_RO": execEval,
	"SCRIPT": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.scriptCmd(cs, r.Args); return false },
	"SNAPSHOT": func(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
		s.snapshotCmd(cs, r.Args, now)
		return false
	},

	"SUBSCRIBE": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.ps.subscribe(cs, r.Args[1:], false)
		return false
	},
	"PSUBSCRIBE": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.ps.subscribe(cs, r.Args[1:], true)
		return false
	},
	"UNSUBSCRIBE": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.unsubscribe(cs, r.Args[1:], false)
		return false
	},
	"PUNSUBSCRIBE": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.unsubscribe(cs, r.Args[1:], true)
		return false
	},
	"PUBLISH": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.publishCmd(cs, r.Args[1], r.Args[2])
		return false
	},
	"PUBSUB": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool { s.ps.command(cs, r.Args); return false },
	"RESET":  func(s *Server, cs *conn, _ *rediscmd.Request, _ int64) bool { s.resetCmd(cs); return false },

	"SET": execKV, "SETEX": execKV, "PSETEX": execKV, "GETSET": execKV, "SETNX": execKV,
	"GET": execKV, "EXISTS": execKV, "TYPE": execKV, "STRLEN": execKV,
	"INCR": execKV, "DECR": execKV, "INCRBY": execKV, "DECRBY": execKV, "APPEND": execKV,
	"DEL": execKV, "UNLINK": execKV, "EXPIRE": execKV, "PEXPIRE": execKV, "EXPIREAT": execKV,
	"PEXPIREAT": execKV, "PERSIST": execKV, "TTL": execKV, "PTTL": execKV, "KEYS": execKV,
	"DBSIZE": execKV, "FLUSHDB": execKV, "FLUSHALL": execKV,
	"DELEX": execKV, "DELIFEQ": execKV, "DIGEST": execKV, "GETDEL": execKV, "GETEX": execKV,
	"SCAN": func(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
		s.kvScan(cs, cs.slock.text.DB, &r.Scan)
		return false
	},
	"MGET": func(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
		s.kvMGet(cs, r.Args, now)
		return false
	},
	"MSET": func(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
		s.kvMSet(cs, r.Args, false, now)
		return false
	},
	"MSETNX": func(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
		s.kvMSet(cs, r.Args, true, now)
		return false
	},

	"HSET": execHash, "HMSET": execHash, "HDEL": execHash, "HINCRBY": execHash, "HGET": execHash,
	"HMGET": execHash, "HGETALL": execHash, "HLEN": execHash, "HEXISTS": execHash, "HKEYS": execHash,
	"HVALS": execHash,
}

// execLock runs LOCK, UNLOCK and PUSH.
func execLock(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	s.textLock(cs, r, now)
	return false
}

// execKV runs a key/value command (slockkv.go).
func execKV(s *Server, cs *conn, _ *rediscmd.Request, now int64) bool {
	s.slockKV(cs, now)
	return false
}

// execHash runs a hash command (slockkv.go).
func execHash(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	s.kvHash(cs, &r.Hash, now)
	return false
}

// execEval runs EVAL, EVALSHA, EVAL_RO and EVALSHA_RO (script.go).
func execEval(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	s.evalCmd(cs, r.Spec, r.Args, now)
	return false
}

// execAdmin runs CONFIG, CLIENT and COMMAND (textadmin.go).
func execAdmin(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
	s.slockAdmin(cs, r.Args)
	return false
}

// execPing answers PING [text]; in subscribed mode, as Redis, a pong push.
func execPing(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
	args := r.Args
	if cs.slock.subscribed() {
		b := resp.AppendBulkString(resp.AppendArray(s.scratchFor(cs), 2), "pong")
		s.sendTo(cs, resp.AppendBulk(b, argAt(args, 1)))
		return false
	}
	if len(args) > 1 {
		s.sendTo(cs, resp.AppendBulk(s.scratchFor(cs), args[1]))
	} else {
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "PONG"))
	}
	return false
}

// execTimeout answers TIMEOUT SET n and TIMEOUT GET: the connection's lock timeout.
func execTimeout(s *Server, cs *conn, r *rediscmd.Request, _ int64) bool {
	t := &cs.slock.text
	if resp.Is(r.Arg, "SET") {
		t.Timeout, t.TimeoutFlag = uint16(r.N), uint16(r.N>>16)
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	} else {
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(t.TimeoutFlag)<<16|int64(t.Timeout)))
	}
	return false
}

// execMulti answers MULTI: the commands after it are queued until EXEC.
func execMulti(s *Server, cs *conn, _ *rediscmd.Request, _ int64) bool {
	sc := cs.slock
	if sc.tx.active {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR MULTI calls can not be nested"))
		return false
	}
	sc.tx.active = true
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	return false
}

// execDiscard answers DISCARD: the queued commands are dropped.
func execDiscard(s *Server, cs *conn, _ *rediscmd.Request, _ int64) bool {
	if !cs.slock.tx.active {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR DISCARD without MULTI"))
		return false
	}
	s.txReset(cs)
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	return false
}

// textError answers the command being served with err (rediscmd.AppendTextError).
func (s *Server) textError(cs *conn, err error) {
	s.sendTo(cs, rediscmd.AppendTextError(s.scratchFor(cs), err))
}

// textLock runs a text LOCK, UNLOCK or PUSH; LOCK and UNLOCK answer when it resolves.
func (s *Server) textLock(cs *conn, r *rediscmd.Request, now int64) {
	sc := cs.slock
	cmd := frameCommand(&r.Frame)
	if r.Will {
		if why := s.willRefusal(cs, willCost+len(cmd.Data)); why != "" {
			if why != oomText {
				why = "ERR " + why
			}
			s.sendTo(cs, resp.AppendError(s.scratchFor(cs), why))
			s.willLog(cs, why)
			return
		}
		s.queueWill(cs, cmd)
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		return
	}
	if s.textUnlockOOM(cs, &cmd) {
		return
	}
	if r.Spec.Cmd == rediscmd.CmdPush {
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK")) // PUSH does not wait for the result
		sc.pushID = cmd.RequestID                               // its reply is published as a lock event (notify.go)
		s.runLock(cs, &cmd, now)
		sc.pushID = [16]byte{}
		return
	}
	sc.waiting, sc.waitID, sc.waitLock = true, cmd.RequestID, slock.Type(cmd.Kind) == slock.TypeLock
	s.runLock(cs, &cmd, now)
}

// textID makes a RequestId or LockId for a text command: unique per server run and
// unguessable (store.IDs), so that no client can compute another's LockId from its own.
func (s *Server) textID(cs *conn) [16]byte { return s.st.ids.Next() }

// randomKey draws a key for store.IDs from the system's random source (once per process).
func randomKey() (k [16]byte) {
	if _, err := rand.Read(k[:]); err != nil { // cannot fail on Linux (getrandom)
		panic("loop: no random source: " + err.Error())
	}
	return k
}

func argAt(args [][]byte, i int) []byte {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// hello answers HELLO [2]: the connection's properties, as Redis 6+ does for protocol 2
// (a flat array of names and values). HELLO 3 was refused by the parse.
func (s *Server) hello(cs *conn) {
	b := resp.AppendArray(s.scratchFor(cs), 14)
	b = resp.AppendBulkString(resp.AppendBulkString(b, "server"), "redis")
	b = resp.AppendBulkString(resp.AppendBulkString(b, "version"), resp.RedisVersion)
	b = resp.AppendInt(resp.AppendBulkString(b, "proto"), 2)
	b = resp.AppendInt(resp.AppendBulkString(b, "id"), int64(cs.owner))
	b = resp.AppendBulkString(resp.AppendBulkString(b, "mode"), "standalone")
	b = resp.AppendBulkString(resp.AppendBulkString(b, "role"), "master")
	b = resp.AppendArray(resp.AppendBulkString(b, "modules"), 0)
	s.sendTo(cs, b)
}

package loop

import (
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/script"
)

// This file is the loop's side of scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT):
// a script runs whole inside one command, on the loop, with nothing of other connections in
// between. Each redis.call goes through the same command table and runCommand as the wire,
// as EXEC's commands do (nothing waits: timeout 0), after the checks Redis makes for a
// script (commands not allowed in scripts, the ACL of the calling user, read-only scripts,
// a failing log). Its reply is appended to the connection's output by the one output path
// and taken back out at once, so nothing of it reaches the client; reply gates (persist.go,
// cluster.go) that the inner commands set are moved to where the script's own reply begins,
// so that the reply waits for every change the script made.

// scriptState is the script engine and the run in progress.
type scriptState struct {
	eng     *script.Engine
	run     script.Run
	call    script.CallFunc // s.scriptCall, bound once
	logf    script.LogFunc  // s.scriptLog, bound once
	room    script.RoomFunc // s.scriptRoom, bound once
	buf     []byte          // the script's reply, built before it is appended to the output
	cs      *conn           // the connection whose script runs
	now     int64
	running bool
	ro      bool
	log     rateLog
	logged  uint64 // redis.log lines written
}

// scriptKeep is the largest reply buffer kept between scripts.
const scriptKeep = 64 << 10

// engine returns the script engine, made at the first script.
func (s *Server) scriptEngine() *script.Engine {
	ss := &s.scr
	if ss.eng == nil {
		ss.eng = script.New(s.scriptLimits())
		ss.call, ss.logf, ss.room = s.scriptCall, s.scriptLog, s.scriptRoom
	}
	return ss.eng
}

// scriptMem is what the cached scripts take compiled: the memory budget counts it.
func (s *Server) scriptMem() int64 {
	if s.scr.eng == nil {
		return 0
	}
	return s.scr.eng.Memory()
}

// scriptRoom reports whether a newly compiled script of need bytes fits the memory budget
// (--max-memory), once what no client is owed has given way: the engine forgets EVAL-only
// scripts while it does not, then refuses SCRIPT LOAD with -OOM (an EVAL runs uncached).
func (s *Server) scriptRoom(need int64) bool {
	max := s.cfg.MaxMemory
	if max <= 0 || s.memUsed()+need <= max {
		return true
	}
	s.makeRoom()
	return s.memUsed()+need <= max
}

// scriptLimits are the limits the configuration gives the scripts.
func (s *Server) scriptLimits() script.Limits {
	return script.Limits{Time: s.cfg.LuaTimeLimit, MaxMemory: s.cfg.LuaMaxMemory, MaxScripts: s.cfg.LuaScriptsMax,
		MaxBytes: s.cfg.LuaScriptsMaxBytes, LuaOnly: s.cfg.LuaOnly}
}

// reloadScripts takes the script limits of a reload (the cache shrinks at the next EVAL).
func (s *Server) reloadScripts(c *Config) {
	s.cfg.LuaTimeLimit, s.cfg.LuaMaxMemory = c.LuaTimeLimit, c.LuaMaxMemory
	s.cfg.LuaScriptsMax, s.cfg.LuaScriptsMaxBytes = c.LuaScriptsMax, c.LuaScriptsMaxBytes
	s.cfg.LuaOnly = c.LuaOnly
	if s.scr.eng != nil {
		s.scr.eng.SetLimits(s.scriptLimits())
	}
}

// luaTimeLimit is the lua-time-limit in force.
func (s *Server) luaTimeLimit() time.Duration {
	if s.cfg.LuaTimeLimit > 0 {
		return s.cfg.LuaTimeLimit
	}
	return script.DefaultLimits.Time
}

// evalCmd answers EVAL, EVALSHA, EVAL_RO and EVALSHA_RO.
func (s *Server) evalCmd(cs *conn, spec *rediscmd.Spec, args [][]byte, now int64) {
	ss := &s.scr
	eng := s.scriptEngine()
	r := &ss.run
	r.Body, r.SHA = nil, nil
	if spec.Name == "EVALSHA" || spec.Name == "EVALSHA_RO" {
		r.SHA = args[1]
	} else {
		r.Body = args[1]
	}
	r.NumKeys, r.Rest = args[2], args[3:]
	r.ReadOnly = spec.Name == "EVAL_RO" || spec.Name == "EVALSHA_RO" // Redis gives them no @read: not flagged read-only
	r.Call, r.Log, r.Room = ss.call, ss.logf, ss.room
	sc := cs.slock
	db, exec := sc.text.DB, sc.tx.exec
	ss.cs, ss.now, ss.running, ss.ro = cs, now, true, r.ReadOnly
	sc.tx.exec = true // nothing waits inside a script
	ss.buf = eng.Eval(ss.buf[:0], r)
	sc.tx.exec, sc.text.DB = exec, db // as Redis 7: a script's SELECT is its own
	ss.cs, ss.running = nil, false
	r.Body, r.SHA, r.NumKeys, r.Rest = nil, nil, nil, nil
	s.sendTo(cs, append(s.scratchFor(cs), ss.buf...))
	if cap(ss.buf) > scriptKeep {
		ss.buf = nil
	}
}

// Redis 7.0's errors for a command a script may not run.
var (
	scriptUnknown  = []byte("-ERR Unknown Redis command called from script\r\n")
	scriptArity    = []byte("-ERR Wrong number of args calling Redis command from script\r\n")
	scriptNotHere  = []byte("-ERR This Redis command is not allowed from script\r\n")
	scriptReadOnly = []byte("-ERR Write commands are not allowed from read-only scripts.\r\n")
	scriptNoCmd    = []byte("-ERR The user executing the script can't run this command or subcommand\r\n")
	scriptNoKey    = []byte("-ERR The user executing the script can't access at least one of the keys mentioned in the command arguments\r\n")
	scriptNoChan   = []byte("-ERR The user executing the script can't publish to the channel mentioned in the command\r\n")
	scriptWait     = []byte("-ERR the command would wait inside a script\r\n")
)

// scriptCall runs one redis.call of the running script and returns its reply: a view of
// the connection's output past its end, read by the engine before the next call.
func (s *Server) scriptCall(args [][]byte) []byte {
	ss := &s.scr
	cs := ss.cs
	sc := cs.slock
	spec := rediscmd.Lookup(args[0])
	switch {
	case spec == nil:
		return scriptUnknown
	case !spec.ArityOK(len(args)):
		return scriptArity
	case noScript(spec):
		return scriptNotHere
	}
	if b := s.scriptPermit(cs, spec, args); b != nil {
		return b
	}
	if ss.ro && spec.Flags&(rediscmd.CmdWrite|rediscmd.CmdMayReplicate) != 0 {
		return scriptReadOnly // as Redis 7.0: PUBLISH is a write for a read-only script
	}
	if spec.Flags&rediscmd.CmdWrite != 0 {
		if why := s.logFailing(); why != "" {
			return resp.AppendError(nil, misconf(why))
		}
	}
	mark := len(cs.out)
	s.advance(ss.now)
	sc.local = s.cl != nil && connLocal(spec)
	s.runCommand(cs, spec, args, ss.now)
	sc.local = false
	sc.req.Args, sc.req.Arg = nil, nil
	if sc.waiting { // the store queued a command despite its timeout 0: never wait here
		sc.waiting, sc.kvActive, sc.kvMulti = false, false, false
		cs.out = cs.out[:mark]
		s.moveGates(cs, mark)
		return scriptWait
	}
	reply := cs.out[mark:]
	cs.out = cs.out[:mark]
	s.moveGates(cs, mark)
	return reply
}

// moveGates moves cs's reply gates past at back to at, where the script's reply will
// begin: it then waits for what the inner commands' replies waited for.
func (s *Server) moveGates(cs *conn, at int) {
	for i := range cs.gates {
		if cs.gates[i].at > at {
			cs.gates[i].at = at
		}
	}
}

// scriptPermit checks a script's command against the ACL of the user running the script,
// with the wire's own check (aclCheck): nil if allowed, else Redis 7.0's error for a script.
// A virtual connection (a script a follower forwarded) runs as the user the follower named
// (virtUser).
func (s *Server) scriptPermit(cs *conn, spec *rediscmd.Spec, args [][]byte) []byte {
	if !s.auth.checks {
		return nil
	}
	switch d, _ := aclCheck(s.userOf(cs), spec, args); d {
	case aclDeniedCmd:
		return scriptNoCmd
	case aclDeniedKey:
		return scriptNoKey
	case aclDeniedChannel:
		return scriptNoChan
	}
	return nil
}

// noScript reports whether a script may not run spec (Redis's noscript flag): transactions,
// connection state, administration of users and of the server, scripts themselves, and
// what waits or subscribes (named, as other files add them).
func noScript(spec *rediscmd.Spec) bool {
	switch spec.Cmd {
	case rediscmd.CmdQuit, rediscmd.CmdMulti, rediscmd.CmdExec, rediscmd.CmdDiscard, rediscmd.CmdWatch, rediscmd.CmdUnwatch,
		rediscmd.CmdHello, rediscmd.CmdAuth, rediscmd.CmdACL, rediscmd.CmdClient, rediscmd.CmdConfig, rediscmd.CmdEval,
		rediscmd.CmdScript, rediscmd.CmdCluster, rediscmd.CmdConsistency, rediscmd.CmdTimeout:
		return true
	}
	switch spec.Name {
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "WAIT",
		"WAITAOF", "MONITOR", "SNAPSHOT", "RESET", "FCALL", "FCALL_RO", "FUNCTION", "SHUTDOWN", "SYNC", "PSYNC":
		return true
	}
	return false
}

// scriptLog writes a redis.log line to the server's log, at most one a second (the others
// are counted and their number logged with the next).
func (s *Server) scriptLog(level int, msg string) {
	ss := &s.scr
	missed, ok := ss.log.allow(s.now())
	if !ok {
		return
	}
	ss.logged++
	ev := s.log.Info()
	switch level {
	case script.LogDebug, script.LogVerbose:
		ev = s.log.Debug()
	case script.LogWarning:
		ev = s.log.Warn()
	}
	if ss.cs != nil {
		ev = ev.Uint64("conn", uint64(ss.cs.owner))
	}
	ev.Uint64("dropped_since_last_line", missed).Str("from", "script").Msg(msg)
}

// scriptHelp is SCRIPT HELP's answer: Redis 7.0's, without SCRIPT DEBUG (tallyd has no Lua
// debugger).
var scriptHelp = []string{
	"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"EXISTS <sha1> [<sha1> ...]",
	"    Return information about the existence of the scripts in the script cache.",
	"FLUSH [ASYNC|SYNC]",
	"    Flush the Lua scripts cache. Very dangerous on replicas.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the scripts cache.",
	"    * SYNC: Synchronously flush the scripts cache.",
	"KILL",
	"    Kill the currently executing Lua script.",
	"LOAD <script>",
	"    Load a script into the scripts cache without executing it.",
	"HELP",
	"    Prints this help.",
}

// scriptCmd answers SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP.
func (s *Server) scriptCmd(cs *conn, args [][]byte) {
	b := s.scratchFor(cs)
	sub := args[1]
	n := len(args)
	switch {
	case resp.Is(sub, "LOAD") && n == 3:
		eng := s.scriptEngine()
		sha, err := eng.Load(args[2], s.scr.room)
		if err == script.ErrOOM {
			s.refuseOOM(cs, "SCRIPT LOAD")
		}
		if err != nil {
			b = resp.AppendError(b, err.Error())
		} else {
			b = resp.AppendBulkString(b, sha)
		}
	case resp.Is(sub, "EXISTS") && n >= 3:
		b = resp.AppendArray(b, n-2)
		for _, sha := range args[2:] {
			ok := s.scr.eng != nil && s.scr.eng.Exists(sha)
			if ok {
				b = resp.AppendInt(b, 1)
			} else {
				b = resp.AppendInt(b, 0)
			}
		}
	case resp.Is(sub, "FLUSH") && n <= 3:
		if n == 3 && !resp.Is(args[2], "SYNC") && !resp.Is(args[2], "ASYNC") {
			b = resp.AppendError(b, "ERR SCRIPT FLUSH only support SYNC|ASYNC option")
			break
		}
		if s.scr.eng != nil {
			s.scr.eng.Flush()
		}
		b = resp.AppendSimple(b, "OK")
	case resp.Is(sub, "FLUSH"):
		b = resp.AppendError(b, "ERR SCRIPT FLUSH only support SYNC|ASYNC option")
	case resp.Is(sub, "KILL") && n == 2:
		b = resp.AppendError(b, "NOTBUSY No scripts in execution right now.") // a script never outlives its command
	case resp.Is(sub, "HELP") && n == 2:
		b = resp.AppendArray(b, len(scriptHelp))
		for _, l := range scriptHelp {
			b = resp.AppendSimple(b, l)
		}
	default:
		b = subcommandError(b, "SCRIPT", sub, []string{"LOAD", "EXISTS", "FLUSH", "KILL", "HELP"})
	}
	s.sendTo(cs, b)
}

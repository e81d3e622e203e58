package loop

import (
	"errors"
	"strconv"

	"tallyd/proto/resp"
	"tallyd/proto/slock"
	"tallyd/store"
)

// slockKV serves a Redis key/value command on a text connection: most run as a Lock or
// Unlock on the key (slock-protocol.md §8.2) and answer when it resolves; TTL, KEYS,
// SCAN, DBSIZE and FLUSHDB read or reset the store directly.
func (s *Server) slockKV(cs *conn, args [][]byte, op slock.Op, name string, now int64) {
	sc := cs.slock
	kv := &sc.kv
	var err error
	s.sl.dataBuf, err = slock.ParseKV(args, op, name, &sc.text, now/1e6, func() [16]byte { return s.textID(cs) }, kv, s.sl.dataBuf[:0])
	if err != nil {
		s.kvError(cs, err)
		return
	}
	db := sc.text.DB
	switch op {
	case slock.OpTTL, slock.OpPTTL:
		id := slock.TextID(kv.Keys[0])
		ms := s.locks.TTL(db, id, now)
		if ms >= 0 {
			ms = min(ms, s.locks.TTLAsked(db, id)) // never more than was asked, as in Redis
		}
		if ms >= 0 && op == slock.OpTTL {
			ms = (ms + 500) / 1000 // rounded, as Redis does
		}
		s.put(cs, resp.AppendInt(s.out(cs), ms))
		return
	case slock.OpKeys, slock.OpScan:
		s.kvKeys(cs, db, kv.Value, op == slock.OpScan)
		return
	case slock.OpDBSize:
		n := 0
		s.locks.EachValue(db, func([16]byte, []byte) bool { n++; return true })
		s.put(cs, resp.AppendInt(s.out(cs), int64(n)))
		return
	case slock.OpFlushDB, slock.OpFlushAll:
		lo, hi := int(db), int(db)
		if op == slock.OpFlushAll {
			lo, hi = 0, store.MaxLockDB
		}
		for d := lo; d <= hi; d++ {
			s.sl.replies, s.sl.execs, _ = s.locks.Flush(uint8(d), now, s.sl.replies[:0], s.sl.execs[:0])
			s.drainLocks(now)
		}
		s.put(cs, resp.AppendSimple(s.out(cs), "OK"))
		return
	case slock.OpIncr:
		old, err := slock.Int(s.locks.Value(db, kv.Frame.Key))
		if err == nil {
			sc.kvInt, err = slock.Add(old, kv.Delta)
		}
		if err == nil {
			s.sl.dataBuf, err = kv.SetNumber(s.sl.dataBuf, sc.kvInt)
		}
		if err != nil {
			s.kvError(cs, err)
			return
		}
	case slock.OpDel, slock.OpExists:
		if len(kv.Keys) > 1 {
			sc.kvMulti, sc.kvN = true, 0
			for i := range kv.Keys {
				kv.KeyFrame(&sc.text, func() [16]byte { return s.textID(cs) }, i)
				s.runKV(cs, now)
			}
			sc.kvMulti = false
			s.put(cs, resp.AppendInt(s.out(cs), sc.kvN))
			kv.Keys = nil
			return
		}
	}
	if n := s.kvSize(kv, db); n > int(s.cfg.SlockMaxData) {
		s.kvError(cs, &slock.TextError{Msg: "value too long: " + strconv.Itoa(n) + " bytes with its key name, limit " +
			strconv.Itoa(int(s.cfg.SlockMaxData)) + " (--slock-max-data)"})
		return
	}
	s.runKV(cs, now)
	kv.Keys, kv.Value = nil, nil // views into the request: gone once it is served
}

// kvSize is the length of the value record kv would leave (for APPEND, with the value it
// appends to), which the store keeps only up to --slock-max-data.
func (s *Server) kvSize(kv *slock.KV, db uint8) int {
	if kv.Frame.Data == nil {
		return 0
	}
	if kv.Op == slock.OpAppend {
		if old := s.locks.Value(db, kv.Frame.Key); len(old) > 4 {
			return len(old) - 4 + len(kv.Value)
		}
	}
	return len(kv.Frame.Data) - 4
}

// runKV runs kv.Frame for cs, which waits for its reply (kvReply renders it).
func (s *Server) runKV(cs *conn, now int64) {
	sc := cs.slock
	cmd := frameCommand(&sc.kv.Frame)
	sc.waiting, sc.waitID, sc.waitLock, sc.kvActive = true, cmd.RequestID, false, true
	s.runLock(cs.owner, &cmd, now)
}

// kvReply answers the key/value command cs waited for with the reply to its lock command.
func (s *Server) kvReply(cs *conn, r *slock.LockReply) {
	sc := cs.slock
	if sc.kvMulti {
		if slock.KVCount(sc.kv.Op, r.Result, r.Value) {
			sc.kvN++
		}
		return
	}
	sc.kvActive = false
	s.sendTo(cs, slock.AppendKVReply(s.scratchFor(cs), &sc.kv, r.Result, r.Value, sc.kvInt))
}

// kvError answers a key/value command that could not run.
func (s *Server) kvError(cs *conn, err error) {
	var te *slock.TextError
	if errors.As(err, &te) {
		s.put(cs, resp.AppendError(s.out(cs), "ERR "+te.Msg))
		return
	}
	s.put(cs, resp.AppendError(s.out(cs), "ERR "+err.Error()))
}

// kvKeys answers KEYS pattern, or SCAN (one pass: cursor 0 and every match), with the
// names of db's keys that have a value, sorted by nothing.
func (s *Server) kvKeys(cs *conn, db uint8, pattern []byte, scan bool) {
	names := s.sl.names[:0]
	all := len(pattern) == 1 && pattern[0] == '*'
	s.locks.EachValue(db, func(_ [16]byte, v []byte) bool {
		if name, ok := slock.KeyName(v); ok && (all || slock.Match(pattern, name)) {
			names = append(names, name)
		}
		return true
	})
	if scan {
		s.put(cs, resp.AppendArray(s.out(cs), 2))
		s.put(cs, resp.AppendBulkString(s.out(cs), "0"))
	}
	s.put(cs, resp.AppendArray(s.out(cs), len(names)))
	for _, n := range names {
		s.put(cs, resp.AppendBulk(s.out(cs), n))
	}
	clear(names)
	s.sl.names = names[:0]
}

// slockAdmin answers the Redis housekeeping commands clients send on connect (CONFIG GET,
// CLIENT, COMMAND), reporting false for anything else.
func (s *Server) slockAdmin(cs *conn, args [][]byte) bool {
	name := args[0]
	sub := argAt(args, 1)
	switch {
	case resp.Is(name, "CONFIG"):
		switch {
		case resp.Is(sub, "GET") && len(args) >= 3:
			var hits [][2]string
			for _, pat := range args[2:] {
				for _, kv := range s.configItems() {
					if slock.Match(lowerBytes(pat), []byte(kv[0])) {
						hits = append(hits, kv)
					}
				}
			}
			s.put(cs, resp.AppendArray(s.out(cs), 2*len(hits)))
			for _, kv := range hits {
				s.put(cs, resp.AppendBulkString(resp.AppendBulkString(s.out(cs), kv[0]), kv[1]))
			}
		case resp.Is(sub, "SET"):
			s.put(cs, resp.AppendError(s.out(cs), "ERR CONFIG SET is not supported: restart tallyd with other flags"))
		case resp.Is(sub, "RESETSTAT"):
			s.put(cs, resp.AppendSimple(s.out(cs), "OK"))
		default:
			s.put(cs, resp.AppendError(s.out(cs), "ERR unknown subcommand or wrong number of arguments for 'config' command"))
		}
	case resp.Is(name, "CLIENT"):
		switch {
		case resp.Is(sub, "SETNAME") && len(args) == 3, resp.Is(sub, "SETINFO") && len(args) == 4,
			resp.Is(sub, "NO-EVICT"), resp.Is(sub, "NO-TOUCH"), resp.Is(sub, "REPLY") && len(args) == 3:
			s.put(cs, resp.AppendSimple(s.out(cs), "OK"))
		case resp.Is(sub, "GETNAME"):
			s.put(cs, resp.AppendNull(s.out(cs)))
		case resp.Is(sub, "ID"):
			s.put(cs, resp.AppendInt(s.out(cs), int64(cs.owner)))
		case resp.Is(sub, "LIST"), resp.Is(sub, "INFO"):
			line := "id=" + strconv.FormatUint(uint64(cs.owner), 10) + " addr=" + cs.c.RemoteAddr().String() +
				" db=" + strconv.Itoa(int(cs.slock.text.DB)) + "\n"
			s.put(cs, resp.AppendBulkString(s.out(cs), line))
		default:
			s.put(cs, resp.AppendError(s.out(cs), "ERR unknown subcommand or wrong number of arguments for 'client' command"))
		}
	case resp.Is(name, "COMMAND"):
		if resp.Is(sub, "COUNT") {
			s.put(cs, resp.AppendInt(s.out(cs), 0))
		} else {
			s.put(cs, resp.AppendArray(s.out(cs), 0)) // no command table: clients fall back to plain use
		}
	default:
		return false
	}
	return true
}

// configItems are the CONFIG GET parameters tallyd answers (redis-benchmark asks for save
// and appendonly before it starts).
func (s *Server) configItems() [][2]string {
	ao := "no"
	if s.persist.w != nil {
		ao = "yes"
	}
	return [][2]string{
		{"save", ""}, {"appendonly", ao}, {"appendfsync", s.cfg.AppendFsync.String()},
		{"databases", strconv.Itoa(store.MaxLockDB + 1)}, {"dir", s.cfg.DataDir},
		{"maxclients", strconv.Itoa(s.fdCap)},
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

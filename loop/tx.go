package loop

import (
	"math"
	"strconv"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// This file is MULTI/EXEC and WATCH on the Redis-text side (redis.go): a connection's queued
// commands, its watched keys, and EXEC's run of them (its work bound: txwork.go).

// txState is a connection's MULTI/EXEC transaction and its WATCHed keys.
type txState struct {
	active  bool   // between MULTI and EXEC or DISCARD: commands are queued
	dirty   bool   // a command was refused while queueing: EXEC aborts
	exec    bool   // EXEC is running the queue: commands that could wait do not
	guarded bool   // a queued command is refused while the log cannot be written (diskGuarded)
	n       int    // commands queued
	work    int64  // their estimated work, ns (txwork.go)
	queue   []byte // their command lines as they came, copied out of the input buffer
	watches map[watchKey]uint64
	kwatch  map[ksWatchKey]uint64 // with Config.RedisKeyspace: the keyspace's watches, by name
}

// ksWatchKey is a WATCHed key of the keyspace: its database and name.
type ksWatchKey struct {
	db   uint8
	name string
}

// watchKey is a WATCHed key: its database and id.
type watchKey struct {
	db  uint8
	key [16]byte
}

// Bounds of a connection's transaction.
const (
	maxWatches    = 1 << 16 // keys one connection may WATCH
	txKeepQueue   = 64 << 10
	execAbortText = "EXECABORT Transaction discarded because of previous errors."
)

// txQueue answers a command sent between MULTI and EXEC: it is queued (copied: the input
// buffer is only valid during this call), up to --max-input bytes of queue. As in Redis, only
// a command's name and arity are checked now, the rest when EXEC runs it. An unknown
// command, a wrong arity or a queue over its limit answers an error and makes EXEC abort.
func (s *Server) txQueue(cs *conn, spec *rediscmd.Spec, args [][]byte, raw []byte) {
	tx := &cs.slock.tx
	b := s.scratchFor(cs)
	switch {
	case spec == nil:
		tx.dirty = true
		b = rediscmd.AppendUnknown(b, args)
	case !spec.ArityOK(len(args)):
		tx.dirty = true
		b = rediscmd.AppendTextError(b, spec.ArityError())
	case diskGuarded(spec) && s.logFailing() != "":
		tx.dirty = true
		b = resp.AppendError(b, misconf(s.logFailing()))
	case len(tx.queue)+len(raw) > s.cfg.MaxInput:
		tx.dirty = true
		tx.queue, tx.n = nil, 0
		s.noteTx(cs)
		b = resp.AppendError(b, "ERR MULTI queue over "+strconv.Itoa(s.cfg.MaxInput)+
			" bytes (--max-input): the transaction will be discarded")
	default:
		if tx.dirty { // EXEC will abort anyway: keep nothing
			b = resp.AppendSimple(b, "QUEUED")
			break
		}
		work := s.txWork(cs, spec, args) // bounded in commands and work too (txwork.go)
		if why := s.txLimit(cs, work); why != "" {
			b = s.txRefuse(cs, b, why)
			break
		}
		tx.queue = append(tx.queue, raw...)
		tx.n++
		tx.work += work
		tx.guarded = tx.guarded || diskGuarded(spec)
		s.noteTx(cs)
		b = resp.AppendSimple(b, "QUEUED")
	}
	s.sendTo(cs, b)
}

// txExec answers EXEC: the queued commands run one after another with nothing in between,
// none of them waiting, and their replies go out as one array; a null array if a WATCHed
// key changed since it was watched. True means close the connection: its replies are not
// read (max-output); the transaction still runs whole.
func (s *Server) txExec(cs *conn, now int64) (closeConn bool) {
	sc := cs.slock
	tx := &sc.tx
	if !tx.active {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR EXEC without MULTI"))
		return false
	}
	defer s.txReset(cs)
	if why := s.logFailing(); why != "" && tx.guarded { // as Redis: the whole transaction is refused
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "EXECABORT Transaction discarded because of: "+misconf(why)))
		return false
	}
	if tx.dirty {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), execAbortText))
		return false
	}
	for w, ver := range tx.watches {
		if s.st.locks.WatchVersion(w.db, w.key) != ver {
			s.sendTo(cs, resp.AppendNullArray(s.scratchFor(cs)))
			return false
		}
	}
	for w, ver := range tx.kwatch {
		if s.st.store.Keyspace.WatchVersion(w.db, []byte(w.name)) != ver {
			s.sendTo(cs, resp.AppendNullArray(s.scratchFor(cs)))
			return false
		}
	}
	s.sendTo(cs, resp.AppendArray(s.scratchFor(cs), tx.n))
	tx.active, tx.exec = false, true
	defer func() { tx.exec = false }()
	for q := tx.queue; len(q) > 0; {
		h := &s.h.slockText
		h.execDec = textDecoder(math.MaxInt) // each line was parsed once already, whatever --max-input is now
		args, n, err := h.execDec.Parse(q, h.execArgs[:0])
		h.execArgs = keepArgs(args)
		if err != nil || n == 0 || len(args) == 0 { // cannot be: each line parsed once already
			break
		}
		s.slockCommand(cs, args, q[:n], now) // QUIT is never queued
		q = q[n:]
		if sc.waiting { // the store queued a command despite its timeout 0: never wait here
			sc.waiting, sc.kvActive, sc.kvMulti = false, false, false
			s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR the command would wait inside EXEC"))
		}
		if !closeConn && (cs.closed || !s.textFlush(cs)) {
			closeConn = true // the client does not read (or is gone): close once all have run
		}
		if closeConn {
			s.textDiscard(cs) // the rest still runs, all or nothing, unanswered
		}
	}
	return closeConn
}

// txReset ends cs's transaction (EXEC, DISCARD) and its WATCHes.
func (s *Server) txReset(cs *conn) {
	tx := &cs.slock.tx
	tx.active, tx.dirty, tx.guarded, tx.n, tx.work = false, false, false, 0, 0
	tx.queue = tx.queue[:0]
	if cap(tx.queue) > txKeepQueue {
		tx.queue = nil
	}
	if !cs.closed {
		s.noteTx(cs)
	}
	s.unwatchAll(cs)
}

// txWatch answers WATCH key...: each key of the current database is watched until EXEC,
// DISCARD, UNWATCH or the close of the connection.
func (s *Server) txWatch(cs *conn, keys [][]byte) {
	tx := &cs.slock.tx
	if tx.active {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR WATCH inside MULTI is not allowed"))
		return
	}
	db := cs.slock.text.DB
	if s.cfg.RedisKeyspace {
		s.ksWatch(cs, db, keys)
		return
	}
	for _, k := range keys {
		w := watchKey{db, cs.slock.text.KeyID(k)}
		if _, ok := tx.watches[w]; ok {
			continue
		}
		if len(tx.watches) >= maxWatches {
			s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR more than "+strconv.Itoa(maxWatches)+
				" keys watched by one connection"))
			return
		}
		if tx.watches == nil {
			tx.watches = make(map[watchKey]uint64)
		}
		tx.watches[w] = s.st.locks.Watch(w.db, w.key)
	}
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
}

// unwatchAll ends every WATCH of cs.
func (s *Server) unwatchAll(cs *conn) {
	tx := &cs.slock.tx
	for w := range tx.watches {
		s.st.locks.Unwatch(w.db, w.key)
	}
	tx.watches = nil
	for w := range tx.kwatch {
		s.st.store.Keyspace.Unwatch(w.db, []byte(w.name))
	}
	tx.kwatch = nil
}

// ksWatch is WATCH on the keyspace (Config.RedisKeyspace): by name.
func (s *Server) ksWatch(cs *conn, db uint8, keys [][]byte) {
	tx := &cs.slock.tx
	for _, k := range keys {
		w := ksWatchKey{db, string(k)}
		if _, ok := tx.kwatch[w]; ok {
			continue
		}
		if len(tx.kwatch) >= maxWatches {
			s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR more than "+strconv.Itoa(maxWatches)+
				" keys watched by one connection"))
			return
		}
		if tx.kwatch == nil {
			tx.kwatch = make(map[ksWatchKey]uint64)
		}
		tx.kwatch[w] = s.st.store.Keyspace.Watch(db, k)
	}
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
}

package loop

import (
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// Redis-text commands that go on across turns (issue 21, item 1), as Redis's SCAN and
// lazyfree do: the connection's later commands wait behind them (cs.busy), other connections
// are served between their steps (fair.go), and their replies keep their place.
//
//   - KEYS over more than keysStep keys walks them keysStep at a time (the store's value table,
//     as SCAN), collecting the names that match, and answers once the walk is over. A key
//     that has a value for the whole walk is listed once; one set or deleted meanwhile may
//     or may not be, as with SCAN (Redis's KEYS sees one instant). Past rediscmd.KeysLimit keys
//     KEYS is refused as before: its reply would be too big.
//   - MGET of more than mgetStep keys answers its keys in order as its slice and the socket
//     allow: a reader gets every value however many megabytes they make, and what waits in
//     memory is about half of --max-output. The values are each key's at the time its turn
//     came (a small MGET reads them all at one instant, as Redis's does).
//
// Inside EXEC, and for a follower's forwarded commands, both run whole: a transaction is
// never cut, and its work is bounded when it is queued (txwork.go).

// Steps: about 80 ns a key for KEYS, 300 ns for MGET.
const (
	keysStep = 4096
	mgetStep = 512
)

// Kinds of textCont.
const (
	contKeys = iota + 1
	contMGet
	contSnapshot    // SNAPSHOT's reply (backup.go)
	contPublish     // a PUBLISH testing many patterns (pubsub_cmd.go)
	contUnsubscribe // an UNSUBSCRIBE or PUNSUBSCRIBE of many (pubsub_cmd.go)
)

// textCont is a Redis-text command going on across turns.
type textCont struct {
	active bool
	kind   uint8
	spent  int64    // ns run so far, for SLOWLOG
	slow   [][]byte // its command line as SLOWLOG keeps it

	// KEYS.
	db       uint8
	pattern  []byte
	cursor   uint64
	names    []byte // the names found, one after another
	ends     []int  // where each ends in names
	removals uint64 // the store's value removals when the walk began: if they change, names may repeat

	// MGET.
	args    [][]byte // the request's keys (args[1:]) during the turn it arrived in
	keys    []byte   // after it, copies of the keys from base on, one after another
	keyEnds []int
	base    int       // the index of the first key copied
	next    int       // the next key to check, then to answer
	checked bool      // every key was checked (nameClash) and the array header is out
	one     [2][]byte // the GET being run: a name and its key

	// PUBLISH: the channel and the message (views during the turn it arrived in, copies in
	// keys after), the last pattern tested (psPattern.seq), the patterns that matched.
	pubCh, pubMsg []byte
	seq           uint64
	matched       []*psPattern

	// UNSUBSCRIBE (PUNSUBSCRIBE: unsubPat) of all: next is the place in the connection's
	// patterns.
	unsubPat bool

	// SNAPSHOT: how far it is (snapWaits, snapEncoding, snapSending: the file is in
	// Server.bk). On a member that does not lead, before the file: the member read it waits
	// for (0: not asked yet), the leader it was asked of, when SNAPSHOT arrived and when the
	// read was asked (backup.go).
	stage uint8
	read  uint64
	lead  uint64
	since int64
	asked int64
}

// contActive reports whether a command of sc goes on in a later turn.
func (sc *slockConn) contActive() bool { return sc.cont != nil && sc.cont.active }

// contBegin makes cs's continuation of kind.
func (s *Server) contBegin(cs *conn, kind uint8) *textCont {
	sc := cs.slock
	if sc.cont == nil {
		sc.cont = &textCont{}
	}
	c := sc.cont
	*c = textCont{active: true, kind: kind, slow: c.slow[:0],
		names: c.names[:0], ends: c.ends[:0], keys: c.keys[:0], keyEnds: c.keyEnds[:0], pattern: c.pattern[:0],
		matched: c.matched[:0]}
	return c
}

// suspend keeps, for SLOWLOG, the command line args of a command that goes on in a later
// turn (args are views into the input, gone once the turn is over).
func (c *textCont) suspend(args [][]byte) {
	if c.active {
		clear(c.slow)
		c.slow = resp.AppendSlowlogArgs(c.slow[:0], args)
	}
}

// contMore goes on with cs's command in a new slice (handler.more).
func (s *Server) contMore(cs *conn, now int64) {
	c := cs.slock.cont
	if c == nil || !c.active {
		return
	}
	start := nanotime()
	s.contStep(cs, c, now)
	end := nanotime()
	s.fair.clockRead(end)
	c.spent += end - start
	if !c.active {
		s.slow.note(cs, c.slow, c.spent)
	}
}

// contStep runs steps of c while cs's slice lasts and its output has room; then either the
// command is over (c.active false), or cs yields (slice spent) or waits for its socket.
func (s *Server) contStep(cs *conn, c *textCont, now int64) {
	for c.active {
		if s.full(cs) {
			s.kick(cs)       // goes on once the socket has taken some (resume, park)
			s.watchStall(cs) // unless it does not read (output.go)
			return
		}
		switch c.kind {
		case contKeys:
			s.keysStep(cs, c)
		case contMGet:
			s.mgetStep(cs, c, now)
		case contPublish:
			s.publishStep(cs, c)
		case contUnsubscribe:
			s.unsubscribeAllStep(cs, c)
		case contSnapshot:
			if !s.snapshotStep(cs, c, now) {
				return // it waits for its read (snapshotPoll serves it again)
			}
		}
		if c.active && !s.sliceLeft(cs) {
			s.yield(cs)
			return
		}
	}
}

// keysStep looks at the next keysStep keys of a KEYS; the last step answers.
func (s *Server) keysStep(cs *conn, c *textCont) {
	q := rediscmd.Scan{Match: c.pattern}
	if len(c.pattern) == 1 && c.pattern[0] == '*' {
		q.Match = nil
	}
	cursor := c.cursor
	if s.cfg.RedisKeyspace { // the keyspace's walk (ksredis.go), with SCAN's cursor
		c.cursor = s.st.store.Keyspace.Scan(c.db, cursor, keysStep, s.now().UnixMilli(), func(key []byte, _ store.ValueKind) {
			if q.Match == nil || rediscmd.Match(q.Match, key) {
				c.names = append(c.names, key...)
				c.ends = append(c.ends, len(c.names))
			}
		})
		c.removals-- // a key deleted meanwhile moves the last one down: dedupe at the end
	} else {
		c.cursor = s.st.locks.ScanValues(c.db, cursor, keysStep, func(_ [16]byte, v []byte) {
			if name, ok := q.Wants(v); ok {
				c.names = append(c.names, name...)
				c.ends = append(c.ends, len(c.names))
			}
		})
	}
	if c.cursor != 0 {
		return
	}
	c.active = false
	names := s.sl.names[:0]
	from := 0
	for _, end := range c.ends {
		names = append(names, c.names[from:end])
		from = end
	}
	if s.st.locks.ValueRemovals() != c.removals {
		names = dedupe(names) // a key moved down the table while it was walked: listed twice
	}
	s.keysReply(cs, names)
	s.contRelease(c)
}

// dedupe drops the repeats of names, keeping the first of each.
func dedupe(names [][]byte) [][]byte {
	seen := make(map[string]struct{}, len(names))
	out := names[:0]
	for _, n := range names {
		if _, ok := seen[string(n)]; ok {
			continue
		}
		seen[string(n)] = struct{}{}
		out = append(out, n)
	}
	return out
}

// mgetStep checks, then answers, the next keys of an MGET, stopping early when the output is
// full. The keys are the request's own (c.args) in the turn it arrived in, copies after.
func (s *Server) mgetStep(cs *conn, c *textCont, now int64) {
	sc := cs.slock
	n := c.nkeys()
	if !c.checked {
		for end := min(c.next+4*mgetStep, n); c.next < end; c.next++ {
			k := c.key(c.next)
			if err := s.nameClash(sc.text.DB, sc.text.KeyID(k), k); err != nil {
				c.active = false
				s.textError(cs, err)
				s.contRelease(c)
				return
			}
		}
		if c.next < n {
			return
		}
		c.checked, c.next = true, 0
		s.put(cs, resp.AppendArray(s.out(cs), n))
	}
	for end := min(c.next+mgetStep, n); c.next < end; {
		c.one[1] = c.key(c.next)
		c.next++
		sc.req.KV.GetKey(c.one[:], 1, &sc.text, func() [16]byte { return s.textID(cs) })
		s.runKV(cs, now) // a probe: answered at once
		if s.full(cs) {
			break
		}
	}
	sc.req.KV.Keys, c.one[1] = nil, nil
	if c.next == n {
		c.active = false
		s.contRelease(c)
	}
}

// nkeys is the number of keys of an MGET continuation.
func (c *textCont) nkeys() int {
	if c.args != nil {
		return len(c.args) - 1
	}
	return c.base + len(c.keyEnds)
}

// key is key i of an MGET continuation (0: the first).
func (c *textCont) key(i int) []byte {
	if c.args != nil {
		return c.args[i+1]
	}
	i -= c.base
	from := 0
	if i > 0 {
		from = c.keyEnds[i-1]
	}
	return c.keys[from:c.keyEnds[i]]
}

// keepKeys copies the keys an MGET has still to look at out of the request, which is gone
// once the turn is over: all of them while it checks them, those it has still to answer
// after.
func (c *textCont) keepKeys() {
	if c.args == nil {
		return
	}
	c.base = 0
	if c.checked {
		c.base = c.next
	}
	for _, k := range c.args[1+c.base:] {
		c.keys = append(c.keys, k...)
		c.keyEnds = append(c.keyEnds, len(c.keys))
	}
	c.args = nil
}

// contRelease drops what a finished continuation holds beyond what is worth keeping.
func (s *Server) contRelease(c *textCont) {
	const keep = 64 << 10
	if cap(c.names) > keep {
		c.names, c.ends = nil, nil
	}
	if cap(c.keys) > keep {
		c.keys, c.keyEnds = nil, nil
	}
}

// keysBegin starts a KEYS over db that goes on across turns.
func (s *Server) keysBegin(cs *conn, db uint8, pattern []byte) {
	c := s.contBegin(cs, contKeys)
	c.db = db
	c.pattern = append(c.pattern, pattern...)
	c.removals = s.st.locks.ValueRemovals()
	s.contStep(cs, c, 0)
	c.suspend(cs.slock.req.Args)
}

// mgetBegin answers an MGET: at once if its slice and the output allow (then, as Redis's, it
// reads every key at one instant), else across turns.
func (s *Server) mgetBegin(cs *conn, args [][]byte, now int64) {
	c := s.contBegin(cs, contMGet)
	c.args = args
	s.contStep(cs, c, now)
	if c.active {
		c.keepKeys()
		c.suspend(args)
	}
	c.args = nil
}

// runsWhole reports whether a command of cs must run whole: inside EXEC, or forwarded by a
// follower.
func (s *Server) runsWhole(cs *conn) bool {
	return cs.slock.tx.exec || cs.virt != nil || cs.peer != nil
}

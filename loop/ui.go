package loop

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/stats"
	"github.com/tallyd/tallyd/store"
)

// What the loop keeps for the status page (/ui, stats/ui.go): small lists of the keys that
// saw waits, acquires or Redis locks lately, updated as those happen, and looked up one key
// at a time when a snapshot is published while a page is open (never a walk of the store).
//
// Each list holds hotLen keys, ranked by hits with the space-saving rule: a key not on a full
// list takes the place of the one with the fewest hits, with its hits plus one. Keys are kept
// in buffers each slot reuses, so keeping the lists allocates nothing once they are warm.
// Waits on slock keys and PoolCounter queues are always counted (a wait is far rarer than a
// request); acquires of yrmcds counters and pools and Redis lock SETs are counted only while
// a page has asked in the last seconds (hot.on, one branch per request otherwise).

const hotLen = 16

// hotEntry is one key of a list: key is the list's own encoding of it.
type hotEntry struct {
	key  []byte
	tag  uint64 // hash of key: compared first
	hits uint64
	full uint64 // PoolCounter: QUEUE_FULL answers since it entered the list
	max  uint32 // yrmcds: the maximum (or initial value) its latest acquire gave
}

type hotList struct {
	e      [hotLen]hotEntry
	n      int
	miss   uint64 // keys not listed that came while it was full
	window uint64 // acquires offered since the last publication (sampled)
}

// A list counts every acquire until hotBusy of them came in one publication window, then one
// of every hotSample: a key acquired now and then is always seen, and a stream of a million
// acquires a second costs the loop about 1/hotSample of a bump each (a bump is 16-29 ns:
// BenchmarkUIHot*), which keeps an open page under 1% of the loop. The hits of a busy window
// undercount every key alike, so the ranking holds.
const (
	hotBusy   = 1024
	hotSample = 8
)

// hotReset starts a new publication window for the sampled lists.
func (h *hotState) hotReset() {
	h.pools.window, h.redis.window = 0, 0
	for p := range h.counters {
		h.counters[p].window = 0
	}
}

// sampled says whether this acquire is to be counted (and counts it as offered).
func (l *hotList) sampled() bool {
	l.window++
	return l.window <= hotBusy || l.window%hotSample == 0
}

// hotAdmit is how many newcomers to a full list it takes for one to replace a key.
const hotAdmit = 8

// bump counts a hit of key and returns its entry; nil when the list is full and key was not
// let in.
func (l *hotList) bump(key []byte) *hotEntry {
	tag := hotTag(key)
	for i := range l.n {
		if e := &l.e[i]; e.tag == tag && string(e.key) == string(key) {
			e.hits++
			return e
		}
	}
	var e *hotEntry
	if l.n < hotLen {
		e = &l.e[l.n]
		l.n++
		e.hits = 0
	} else {
		// A full list lets one newcomer in of every hotAdmit: a stream of new keys (a
		// Redis lock per request) costs the loop the search, not a replacement each time.
		if l.miss++; l.miss%hotAdmit != 0 {
			return nil
		}
		e = &l.e[0]
		for i := 1; i < l.n; i++ {
			if l.e[i].hits < e.hits {
				e = &l.e[i]
			}
		}
	}
	e.key = append(e.key[:0], key...)
	e.tag = tag
	e.hits++
	e.full, e.max = 0, 0
	return e
}

// hotTag is a cheap fingerprint of key (its length and first and last 8 bytes): a list
// compares it before the bytes.
func hotTag(key []byte) uint64 {
	n := len(key)
	if n < 8 {
		var b [8]byte
		copy(b[:], key)
		return binary.LittleEndian.Uint64(b[:]) ^ uint64(n)<<56
	}
	return binary.LittleEndian.Uint64(key[n-8:]) ^ binary.LittleEndian.Uint64(key)*0x9e3779b97f4a7c15 ^ uint64(n)
}

// drop takes entry i off the list.
func (l *hotList) drop(i int) {
	l.n--
	l.e[i], l.e[l.n] = l.e[l.n], l.e[i]
}

// hotState is the loop's lists.
type hotState struct {
	on       bool                      // a page asked lately (set at each tick from the Publisher)
	locks    hotList                   // db + key: slock keys a request waited on
	pools    hotList                   // PoolCounter keys
	counters [numProtos]hotList        // yrmcds names, by protocol (counter, semaphore)
	redis    hotList                   // db + key + name: Redis-text keys SET NX with a TTL
	scratch  [1 + 16 + 64]byte         // the key being encoded
	users    atomic.Pointer[acl.Users] // the users, for the page's basic auth (set on the loop, read anywhere)
}

// lockKey encodes db and key for the lists (into scratch).
func (h *hotState) lockKey(db uint8, key [16]byte) []byte {
	h.scratch[0] = db
	copy(h.scratch[1:17], key[:])
	return h.scratch[:17]
}

// waited counts a wait on an slock key.
func (h *hotState) waited(db uint8, key [16]byte) { h.locks.bump(h.lockKey(db, key)) }

// pool counts a PoolCounter acquire of key that ended with o.
func (h *hotState) pool(key []byte, o store.Outcome) {
	wait := o == store.Waiting || o == store.QueueFull // always counted
	if !wait && (!h.on || !h.pools.sampled()) {
		return
	}
	if e := h.pools.bump(key); e != nil && o == store.QueueFull {
		e.full++
	}
}

// counter counts an acquire of a yrmcds counter or semaphore.
func (h *hotState) counter(p Proto, name []byte, max uint32) {
	if !h.on || p >= numProtos || !h.counters[p].sampled() {
		return
	}
	if e := h.counters[p].bump(name); e != nil {
		e.max = max
	}
}

// redisLock counts a Redis-text SET NX with a TTL that set key.
func (h *hotState) redisLock(db uint8, key [16]byte, name []byte) {
	if !h.on || !h.redis.sampled() {
		return
	}
	b := append(h.lockKey(db, key), name[:min(len(name), 64)]...)
	h.redis.bump(b)
}

// hotSnapshot looks up each listed key (on the loop, at publication) and drops those gone.
func (s *Server) hotSnapshot(now int64) *stats.Hot {
	h := &s.m.hot
	h.hotReset()
	out := &stats.Hot{}
	var hs []store.HolderPeek
	for i := h.locks.n - 1; i >= 0; i-- {
		e := &h.locks.e[i]
		db, key := e.key[0], [16]byte(e.key[1:17])
		p, ok := s.st.locks.Peek(db, key, now, hs[:0], 4)
		if !ok || len(p.Holders) == 0 && p.Waiters == 0 {
			h.locks.drop(i)
			continue
		}
		hl := stats.HotLock{DB: db, Key: keyText(key[:]), MoreHolders: p.MoreHolders, Waiters: p.Waiters,
			LongestWait: float64(p.LongestWait) / 1e9, Waits: e.hits}
		for _, hd := range p.Holders {
			hl.Holders = append(hl.Holders, stats.LockHolder{LockID: keyText(hd.LockID[:]), Token: hd.Token,
				Lease: leaseSeconds(hd.TTL), Levels: uint32(hd.Levels)})
		}
		hs = p.Holders
		out.Locks = append(out.Locks, hl)
	}
	sort.SliceStable(out.Locks, func(i, j int) bool {
		a, b := &out.Locks[i], &out.Locks[j]
		if a.Waiters != b.Waiters {
			return a.Waiters > b.Waiters
		}
		return a.Waits > b.Waits
	})
	for i := h.pools.n - 1; i >= 0; i-- {
		e := &h.pools.e[i]
		k, ok := s.st.pools.Key(e.key)
		if !ok {
			h.pools.drop(i)
			continue
		}
		out.Pools = append(out.Pools, stats.HotPool{Name: k.Name, Processing: k.Processing, Waiting: k.Waiting,
			Workers: k.Workers, MaxQueue: k.MaxQueue, QueueFull: e.full})
	}
	sort.Slice(out.Pools, func(i, j int) bool {
		a, b := &out.Pools[i], &out.Pools[j]
		if a.Waiting != b.Waiting {
			return a.Waiting > b.Waiting
		}
		return a.Name < b.Name
	})
	for _, p := range []Proto{ProtoCounter, ProtoSemaphore} {
		l := &h.counters[p]
		for i := l.n - 1; i >= 0; i-- {
			e := &l.e[i]
			v, ok := s.st.family(p).Get(e.key)
			if !ok {
				l.drop(i)
				continue
			}
			out.Counters = append(out.Counters, stats.HotCounter{Proto: p.String(), Name: string(e.key),
				Consumption: uint64(v), Max: uint64(e.max)})
		}
	}
	sort.Slice(out.Counters, func(i, j int) bool {
		a, b := &out.Counters[i], &out.Counters[j]
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.Name < b.Name
	})
	for i := h.redis.n - 1; i >= 0; i-- {
		e := &h.redis.e[i]
		db, key := e.key[0], [16]byte(e.key[1:17])
		v := s.st.locks.Value(db, key)
		ttl := s.st.locks.TTL(db, key, now)
		if v == nil || ttl < 0 {
			h.redis.drop(i) // gone, or no longer a lease (PERSIST, or set again without a TTL)
			continue
		}
		out.RedisLocks = append(out.RedisLocks, stats.RedisLock{Key: printable(e.key[17:]), Value: printable(recordValue(v)),
			Lease: float64(ttl) / 1e3})
	}
	sort.Slice(out.RedisLocks, func(i, j int) bool { return out.RedisLocks[i].Lease < out.RedisLocks[j].Lease })
	return out
}

// recordValue is a value record's value as GET shows it (a number in decimal, an array's
// first element), cut for the page; nil for none.
func recordValue(rec []byte) []byte {
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return nil
	}
	v := d.Value
	switch {
	case d.Flag&slock.DataNumber != 0:
		v = strconv.AppendInt(nil, slock.Number(d.Value), 10)
	case d.Flag&slock.DataArray != 0:
		v, _, _ = slock.NextElem(d.Value)
	}
	return v[:min(len(v), 64)]
}

func leaseSeconds(ms int64) float64 {
	if ms < 0 {
		return -1
	}
	return float64(ms) / 1e3
}

// keyText shows a 16-byte key or lock id: a short text name (right-aligned, zero-padded) as
// its text, anything else in hex.
func keyText(b []byte) string {
	i := 0
	for i < len(b) && b[i] == 0 {
		i++
	}
	if t := b[i:]; len(t) > 0 && isPrintable(t) {
		return string(t)
	}
	return hex.EncodeToString(b)
}

func isPrintable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// printable shows client bytes as text when they are, else quoted.
func printable(b []byte) string {
	if utf8.Valid(b) && isPrintable(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// UIAccess is who may see the status page: when the default user needs a password, or there
// are other users (--requirepass, --aclfile), a user allowed every command of @admin, by
// HTTP basic auth with its password (the ACL checker of the Redis side).
func (s *Server) UIAccess() stats.UIAccess { return uiAccess{&s.m.hot.users} }

type uiAccess struct{ users *atomic.Pointer[acl.Users] }

func (a uiAccess) Required() bool {
	us := a.users.Load()
	if us == nil {
		return true
	}
	d := us.Default()
	return !(d.Enabled() && d.NoPass() && len(us.List()) == 1)
}

func (a uiAccess) Allowed(user, pass string) bool {
	us := a.users.Load()
	if us == nil {
		return false
	}
	u := us.Get([]byte(user))
	return u != nil && u.Enabled() && u.Authenticate([]byte(pass)) && u.CanRunAll(acl.Admin)
}

// SearchKey looks key up on the loop (handed over as a tick is): every namespace that has
// it, a few map lookups. It waits until ctx is done.
func (s *Server) SearchKey(ctx context.Context, key string) (*stats.KeyReport, error) {
	el, ok := s.run.el.Load().(gnet.EventLoop)
	if !ok || s.run.stopping.Load() {
		return nil, errors.New("the event loop is not running")
	}
	done := make(chan *stats.KeyReport, 1)
	if err := el.Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
		done <- s.searchKey([]byte(key), s.now().UnixNano())
		return nil
	})); err != nil {
		return nil, err
	}
	select {
	case r := <-done:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("the event loop did not answer in time: %w", ctx.Err())
	}
}

// searchKey runs on the loop.
func (s *Server) searchKey(key []byte, now int64) *stats.KeyReport {
	r := &stats.KeyReport{}
	name := printable(key)
	if k, ok := s.st.pools.Key(key); ok {
		r.Items = append(r.Items, stats.KeyItem{Kind: "PoolCounter pool", Key: name,
			State: fmt.Sprintf("%d of %d workers busy, %d queued (queue of %d)", k.Processing, k.Workers, k.Waiting, k.MaxQueue)})
	}
	for _, p := range []Proto{ProtoCounter, ProtoSemaphore} {
		if v, ok := s.st.family(p).Get(key); ok {
			what := "consumption"
			if p == ProtoSemaphore {
				what = "value"
			}
			r.Items = append(r.Items, stats.KeyItem{Kind: "yrmcds " + p.String(), Key: name, State: fmt.Sprintf("%s %d", what, v)})
		}
	}
	if len(key) == 0 {
		return r
	}
	id := s.st.keys.KeyID(key)
	var hs []store.HolderPeek
	for db := 0; db <= store.MaxLockDB; db++ {
		if _, ok := s.st.locks.State(uint8(db)); !ok {
			continue
		}
		p, ok := s.st.locks.Peek(uint8(db), id, now, hs[:0], 4)
		if !ok {
			continue
		}
		hs = p.Holders
		state := fmt.Sprintf("%d waiting", p.Waiters)
		if p.Waiters > 0 {
			state += fmt.Sprintf(" (longest %s)", time.Duration(p.LongestWait).Round(time.Millisecond))
		}
		for _, hd := range p.Holders {
			lease := "no expiry"
			if hd.TTL >= 0 {
				lease = (time.Duration(hd.TTL) * time.Millisecond).String() + " left"
			}
			state = fmt.Sprintf("held by %s, token %d, %s; %s", keyText(hd.LockID[:]), hd.Token, lease, state)
		}
		if p.MoreHolders > 0 {
			state += fmt.Sprintf("; %d more holders", p.MoreHolders)
		}
		if p.Value != nil {
			state += "; value " + printable(recordValue(p.Value))
		}
		r.Items = append(r.Items, stats.KeyItem{Kind: fmt.Sprintf("lock key (db %d)", db), Key: name, State: state})
	}
	return r
}

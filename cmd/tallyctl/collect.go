package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/slock"
)

// maxLockDetails is how many of the busiest slock keys top asks LIST_LOCKED
// and LIST_WAIT about each refresh (the others show their levels only).
const maxLockDetails = 60

// snapshot is what top shows: one reading of every protocol.
type snapshot struct {
	at        time.Time
	protos    [4]protoSnap // counter, semaphore, pool, slock
	counters  []dumpEntry
	pools     []poolRow  // nil when the server has no STATS KEYS (a reference PoolCounter)
	locks     []lockRow  // keys locked, without a value
	lockTotal int        // keys locked in every database, values aside
	values    []valueRow // keys with a durable value: not locks, though slock holds them as such
}

// Indexes of snapshot.protos.
const (
	pCounter = iota
	pSemaphore
	pPool
	pSlock
)

// protoSnap is one protocol's header line. Counts are cumulative; -1 is unknown.
type protoSnap struct {
	name     string
	port     int
	err      error
	conns    int64 // connections, not counting top's own
	acquires int64
	releases int64
	objects  int64
	extra    []stat // protocol-specific gauges, shown as "name value"
	full     int64  // PoolCounter full_queues (cumulative), -1 elsewhere
	off      bool   // err is a refused connection while another port answers: off by configuration
}

// answered says whether any protocol answered: a server is there.
func (s *snapshot) answered() bool {
	for i := range s.protos {
		var ae *authError
		if p := &s.protos[i]; p.err == nil || errors.As(p.err, &ae) {
			return true
		}
	}
	return false
}

// note is what a list of p's says when p has no reading: "the counter port is off", ...
func (p *protoSnap) note(what string) string {
	var ae *authError
	switch {
	case p.off:
		return "(the " + what + " port is off: nothing listens on " + strconv.Itoa(p.port) + ")"
	case errors.As(p.err, &ae):
		return "(auth failed on the " + what + " port: give --user and --password or TALLYD_USER and TALLYD_PASSWORD)"
	}
	return "(the " + what + " port is unreachable)"
}

// poolRow is one live PoolCounter key, from STATS KEYS.
type poolRow struct {
	name                                   string
	processing, workers, waiting, maxqueue int64
}

type stat struct {
	name string
	v    int64
}

// lockRow is one locked slock key.
type lockRow struct {
	db      int
	key     [16]byte
	levels  uint32
	holders int
	max     int // holders admitted (first holder's Count + 1); 0 unknown or unlimited
	waiting int
}

// valueRow is one slock key with a durable value (Redis-text SET, INCR, HSET, ... on the
// slock port). The store keeps a value as a lock that never expires, so LIST_LOCK lists
// it with the locks, with its value as lock data; top shows it apart.
type valueRow struct {
	db    int
	name  string // the key as keyText shows it
	value string
}

// collector keeps one connection per protocol open between refreshes and
// redials one that failed.
type collector struct {
	a       *app
	counter *yrmcds
	sem     *yrmcds
	pool    *poolConn
	slock   *slockConn
	resp    *respConn
}

func (c *collector) close() {
	if c.counter != nil {
		c.counter.Close()
	}
	if c.sem != nil {
		c.sem.Close()
	}
	if c.pool != nil {
		c.pool.Close()
	}
	if c.slock != nil {
		c.slock.Close()
	}
	if c.resp != nil {
		c.resp.Close()
	}
}

// collect reads every protocol, in parallel: one that hangs or is down
// does not hold up the others.
func (c *collector) collect() *snapshot {
	s := &snapshot{at: time.Now()}
	a := c.a
	s.protos[pCounter] = protoSnap{name: "counter", port: a.counterPort}
	s.protos[pSemaphore] = protoSnap{name: "semaphore", port: a.semaphorePort}
	s.protos[pPool] = protoSnap{name: "pool", port: a.poolPort}
	s.protos[pSlock] = protoSnap{name: "slock", port: a.slockPort}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		c.collectYrmcds(counter.Counter, &c.counter, &s.protos[pCounter], &s.counters)
	}()
	go func() { defer wg.Done(); c.collectYrmcds(counter.Semaphore, &c.sem, &s.protos[pSemaphore], nil) }()
	go func() { defer wg.Done(); c.collectPool(&s.protos[pPool], &s.pools) }()
	go func() { defer wg.Done(); c.collectSlock(s) }()
	wg.Wait()
	// One tallyd serves all its listeners or none: while one protocol answers, a port that
	// refuses connections is one its configuration turned off (the semaphore port is by
	// default), not a failure.
	if s.answered() {
		for i := range s.protos {
			if p := &s.protos[i]; errors.Is(p.err, syscall.ECONNREFUSED) {
				p.off = true
			}
		}
	}
	return s
}

func statMap(st []counter.StatText) map[string]int64 {
	m := make(map[string]int64, len(st))
	for _, s := range st {
		if v, err := strconv.ParseInt(s.Value, 10, 64); err == nil {
			m[s.Name] = v
		}
	}
	return m
}

func get(m map[string]int64, k string) int64 {
	if v, ok := m[k]; ok {
		return v
	}
	return -1
}

func (c *collector) collectYrmcds(d counter.Dialect, yp **yrmcds, p *protoSnap, dump *[]dumpEntry) {
	p.conns, p.acquires, p.releases, p.objects, p.full = -1, -1, -1, -1, -1
	if *yp == nil {
		y, err := c.a.dialYrmcds(d)
		if err != nil {
			p.err = err
			return
		}
		*yp = y
	}
	y := *yp
	fail := func(err error) {
		p.err = err
		y.Close()
		*yp = nil
	}
	st, err := y.stats()
	if err != nil {
		fail(err)
		return
	}
	m := statMap(st)
	p.conns = get(m, "curr_connections")
	if p.conns > 0 {
		p.conns-- // top's own
	}
	p.acquires, p.releases, p.objects = get(m, "command:acquire"), get(m, "command:release"), get(m, "objects")
	if dump == nil {
		return
	}
	list, err := y.dump(true)
	if err != nil {
		fail(err)
		return
	}
	*dump = list
}

func (c *collector) collectPool(p *protoSnap, rows *[]poolRow) {
	p.conns, p.acquires, p.releases, p.objects, p.full = -1, -1, -1, -1, -1
	if c.pool == nil {
		pc, err := c.a.dialPool()
		if err != nil {
			p.err = err
			return
		}
		c.pool = pc
	}
	st, err := c.pool.stats("FULL")
	if err != nil {
		p.err = err
		c.pool.Close()
		c.pool = nil
		return
	}
	m := map[string]int64{}
	for _, s := range st {
		if v, err := strconv.ParseInt(s.value, 10, 64); err == nil {
			m[s.name] = v
		}
	}
	p.acquires, p.releases, p.objects = get(m, "total_acquired"), get(m, "total_releases"), get(m, "hashtable_entries")
	p.full = get(m, "full_queues")
	p.extra = []stat{{"processing", get(m, "processing_workers")}, {"waiting", get(m, "waiting_workers")}}
	keys, err := c.pool.stats("KEYS")
	if err != nil {
		var r *refusal
		if !errors.As(err, &r) { // a broken connection, not a server without STATS KEYS
			c.pool.Close()
			c.pool = nil
		}
		return
	}
	list := make([]poolRow, 0, len(keys))
	for _, k := range keys {
		row := poolRow{name: k.name}
		f := strings.Fields(k.value)
		for i := 0; i+1 < len(f); i += 2 {
			v, _ := strconv.ParseInt(f[i+1], 10, 64)
			switch f[i] {
			case "processing":
				row.processing = v
			case "workers":
				row.workers = v
			case "waiting":
				row.waiting = v
			case "maxqueue":
				row.maxqueue = v
			}
		}
		list = append(list, row)
	}
	*rows = list
}

func (c *collector) collectSlock(s *snapshot) {
	p := &s.protos[pSlock]
	p.conns, p.acquires, p.releases, p.objects, p.full = -1, -1, -1, -1, -1
	if c.resp == nil {
		r, err := c.a.dialRESP()
		if err != nil {
			p.err = err
			return
		}
		c.resp = r
	}
	own := int64(1) // this INFO connection, and the binary one if it is open
	if c.slock != nil {
		own++
	}
	text, err := c.resp.info()
	if err != nil {
		p.err = err
		c.resp.Close()
		c.resp = nil
		return
	}
	info := infoFields(text)
	if v, err := strconv.ParseInt(info["connected_clients"], 10, 64); err == nil {
		p.conns = max(v-own, 0)
	}
	var dbs []int
	var locked, waiting int64
	p.acquires, p.releases, p.objects = 0, 0, 0
	for k, v := range info {
		db, err := strconv.Atoi(strings.TrimPrefix(k, "db"))
		if !strings.HasPrefix(k, "db") || err != nil {
			continue
		}
		f := map[string]int64{}
		for _, kv := range strings.Split(v, ",") {
			if name, val, ok := strings.Cut(kv, "="); ok {
				n, _ := strconv.ParseInt(val, 10, 64)
				f[name] = n
			}
		}
		p.acquires += f["lock_count"]
		p.releases += f["unlock_count"]
		p.objects += f["keys"]
		locked += f["locked"]
		waiting += f["waiting"]
		if f["keys"] > 0 {
			dbs = append(dbs, db)
		}
	}
	sort.Ints(dbs)
	// INFO counts a key with a value as locked: the listing below tells them apart.
	p.extra = []stat{{"locked", locked}, {"values", -1}, {"waiting", waiting}}
	if len(dbs) == 0 {
		p.extra[1].v = 0
		return
	}
	if c.slock == nil {
		sc, err := c.a.dialSlock()
		if err != nil {
			p.err = err
			return
		}
		c.slock = sc
	}
	if err := c.slockLocks(s, dbs); err != nil {
		p.err = err
		c.slock.Close()
		c.slock = nil
		return
	}
	p.extra[0].v, p.extra[1].v = int64(s.lockTotal), int64(len(s.values))
}

// slockLocks lists every database's locked keys, then asks who holds and
// who waits for the busiest of them, pipelined.
func (c *collector) slockLocks(s *snapshot, dbs []int) error {
	sc := c.slock
	for _, db := range dbs {
		list, err := sc.listLocks(uint8(db))
		if err != nil {
			if _, ok := err.(*refusal); ok {
				continue // the database went away meanwhile
			}
			return err
		}
		for _, l := range list {
			if l.Data != nil {
				s.values = append(s.values, valueRow{db: db, name: keyText(l.Key), value: valueText(l.Data)})
				continue
			}
			s.locks = append(s.locks, lockRow{db: db, key: l.Key, levels: l.LockedCount})
		}
	}
	s.lockTotal = len(s.locks)
	sortStable(s.values, func(x, y valueRow) bool {
		return x.db < y.db || x.db == y.db && x.name < y.name
	})
	sortStable(s.locks, func(x, y lockRow) bool {
		return x.levels > y.levels || x.levels == y.levels && string(x.key[:]) < string(y.key[:])
	})
	n := min(len(s.locks), maxLockDetails)
	var req []byte
	ids := make(map[[16]byte]int, 2*n) // RequestId -> 2*row (+1 for LIST_WAIT)
	for i := range n {
		l := &s.locks[i]
		body := slock.AppendListRequest(nil, uint32(l.db), l.key[:])
		id := sc.newID()
		ids[id] = 2 * i
		req = slock.AppendCallRequest(req, id, slock.MethodListLocked, body)
		id = sc.newID()
		ids[id] = 2*i + 1
		req = slock.AppendCallRequest(req, id, slock.MethodListWait, body)
	}
	if err := sc.send(req); err != nil {
		return err
	}
	for left := len(ids); left > 0; {
		var r slock.Reply
		err := sc.recv(0, func(b []byte) (int, error) { return slock.ParseReply(b, maxReply, &r) })
		if err != nil {
			return err
		}
		at, ok := ids[r.RequestID]
		if !ok || r.Type != slock.TypeCall {
			continue
		}
		delete(ids, r.RequestID)
		left--
		if r.Result != slock.ResultOK {
			continue // unlocked since LIST_LOCK
		}
		l := &s.locks[at/2]
		if at%2 == 0 {
			lr, err := slock.ParseListLockedResponse(r.Body)
			if err != nil {
				return fmt.Errorf("%s: LIST_LOCKED reply: %w", sc.what, err)
			}
			l.holders = len(lr.Locks)
			if len(lr.Locks) > 0 && lr.Locks[0].Command.Count != 0xffff {
				l.max = int(lr.Locks[0].Command.Count) + 1
			}
		} else {
			wr, err := slock.ParseListWaitResponse(r.Body)
			if err != nil {
				return fmt.Errorf("%s: LIST_WAIT reply: %w", sc.what, err)
			}
			l.waiting = len(wr.Waits)
		}
	}
	// Fullest first among the detailed rows: waiters, then load.
	sortStable(s.locks[:n], func(x, y lockRow) bool {
		if x.waiting != y.waiting {
			return x.waiting > y.waiting
		}
		return lockLoad(x) > lockLoad(y)
	})
	return nil
}

// lockLoad is a key's holders as a share of what it admits (0 unknown).
func lockLoad(l lockRow) float64 {
	if l.max == 0 {
		return 0
	}
	return float64(l.holders) / float64(l.max)
}

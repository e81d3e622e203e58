package store_test

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// The keyspace's model-based test: seeded random operations run against a Keyspace and
// against a model written from Redis's rules with plain maps, comparing every result and,
// after every operation, the whole visible state and Check. Along the way backups are
// taken a slice at a time while operations go on, restored into a fresh keyspace and
// compared with the model as it was when they began; at the end the log of every change
// is replayed into a fresh keyspace and compared with the model.

type ksmKey struct {
	hash  map[string]string // nil: a string
	s     string
	at    int64 // Unix ms; 0: none
	fence uint64
}

type ksModel struct {
	dbs [3]map[string]*ksmKey
}

func newKsModel() *ksModel {
	m := &ksModel{}
	for i := range m.dbs {
		m.dbs[i] = map[string]*ksmKey{}
	}
	return m
}

func (m *ksModel) clone() *ksModel {
	c := newKsModel()
	for i, d := range m.dbs {
		for k, v := range d {
			nv := *v
			if v.hash != nil {
				nv.hash = maps.Clone(v.hash)
			}
			c.dbs[i][k] = &nv
		}
	}
	return c
}

// get returns key's value at now, deleting it if expired.
func (m *ksModel) get(db int, k string, now int64) *ksmKey {
	v := m.dbs[db][k]
	if v != nil && v.at != 0 && v.at <= now {
		delete(m.dbs[db], k)
		return nil
	}
	return v
}

// ksRig is one run: the keyspace, the model, the clock.
type ksRig struct {
	t   testing.TB
	r   *rand.Rand
	ks  *store.Keyspace
	m   *ksModel
	now int64
	buf []byte

	// A backup in progress.
	saving   bool
	saveNow  int64
	saveWant *ksModel
	saved    []byte
	restores int
}

var ksNames = func() []string {
	n := []string{"a", "b", "c", "d", "", "\x00x", "counter", "a-key-name-longer-than-sixteen-bytes"}
	for i := range 12 {
		n = append(n, "k"+strconv.Itoa(i))
	}
	return n
}()

func (g *ksRig) key() string { return ksNames[g.r.IntN(len(ksNames))] }

func (g *ksRig) val() string {
	switch g.r.IntN(6) {
	case 0:
		return strconv.Itoa(g.r.IntN(2000) - 1000)
	case 1:
		return ""
	case 2:
		return string(bytes.Repeat([]byte{'v'}, g.r.IntN(100)))
	case 3:
		return []string{"9223372036854775807", "-9223372036854775808", "01", "+1", " 1", "1.5", "abc"}[g.r.IntN(7)]
	}
	return string(rune('a'+g.r.IntN(26))) + strconv.Itoa(g.r.IntN(10))
}

func (g *ksRig) field() string {
	if g.r.IntN(4) == 0 {
		return "f" + strconv.Itoa(g.r.IntN(150)) // enough to outgrow a packed hash
	}
	return "f" + strconv.Itoa(g.r.IntN(4))
}

func (g *ksRig) fail(op string, got, want any) {
	g.t.Helper()
	g.t.Fatalf("at %d: %s: got %v, want %v", g.now, op, got, want)
}

// step runs one random operation on both and compares.
func (g *ksRig) step() string {
	t := g.t
	t.Helper()
	ks, m, r := g.ks, g.m, g.r
	db := r.IntN(3)
	k := g.key()
	kb := []byte(k)
	now := g.now
	cur := m.get(db, k, now)
	op := r.IntN(26)
	desc := fmt.Sprintf("op %d db %d key %q", op, db, k)
	isStr := cur != nil && cur.hash == nil
	switch op {
	case 0: // GET
		out, st := ks.Get(uint8(db), kb, now, g.buf[:0])
		switch {
		case cur == nil:
			if st != store.KeyspaceMissing {
				g.fail(desc+" GET", st, "missing")
			}
		case !isStr:
			if st != store.KeyspaceWrongType {
				g.fail(desc+" GET", st, "wrongtype")
			}
		case st != store.KeyspaceOK || string(out) != cur.s:
			g.fail(desc+" GET", fmt.Sprintf("%v %q", st, out), cur.s)
		}
	case 1, 2: // SET
		v := g.val()
		o := store.SetOpts{Cond: store.SetCond(r.IntN(5)), Get: r.IntN(3) == 0, KeepTTL: r.IntN(4) == 0}
		if o.Cond >= store.SetIfEq {
			o.Match = []byte(g.val())
			if cur != nil && isStr && r.IntN(2) == 0 {
				o.Match = []byte(cur.s)
			}
		}
		if !o.KeepTTL && r.IntN(3) == 0 {
			o.At = now + int64(r.IntN(60)) - 5
		}
		desc += fmt.Sprintf(" SET %q %+v", v, o)
		res, out := ks.Set(uint8(db), kb, []byte(v), &o, now, g.buf[:0])
		if cur != nil && !isStr && (o.Get || o.Cond >= store.SetIfEq) {
			if res.St != store.KeyspaceWrongType || res.Done {
				g.fail(desc, res, "wrongtype")
			}
			break
		}
		if o.Get && (res.Had != (cur != nil) || cur != nil && string(out) != cur.s) {
			g.fail(desc+" GET", fmt.Sprintf("%v %q", res.Had, out), cur)
		}
		ok := true
		switch o.Cond {
		case store.SetNX:
			ok = cur == nil
		case store.SetXX:
			ok = cur != nil
		case store.SetIfEq:
			ok = cur != nil && cur.s == string(o.Match)
		case store.SetIfNe:
			ok = cur == nil || cur.s != string(o.Match)
		}
		if res.Done != ok || res.St != store.KeyspaceOK {
			g.fail(desc, res, ok)
		}
		if ok {
			nk := &ksmKey{s: v}
			if cur != nil {
				nk.fence = cur.fence
				if o.KeepTTL {
					nk.at = cur.at
				}
			}
			if o.At != 0 {
				nk.at = o.At
			}
			m.dbs[db][k] = nk
			m.get(db, k, now)
		}
	case 3: // INCRBY
		delta := int64(r.IntN(200) - 100)
		if r.IntN(10) == 0 {
			delta = math.MaxInt64 - int64(r.IntN(3))
		}
		n, st := ks.IncrBy(uint8(db), kb, delta, now)
		want, wst := int64(0), store.KeyspaceOK
		if cur != nil {
			if !isStr {
				wst = store.KeyspaceWrongType
			} else if v, ok := store.ParseInt([]byte(cur.s)); !ok {
				wst = store.KeyspaceNotInt
			} else if delta > 0 && v > math.MaxInt64-delta || delta < 0 && v < math.MinInt64-delta {
				wst = store.KeyspaceOverflow
			} else {
				want = v
			}
		}
		want += delta
		if st != wst || st == store.KeyspaceOK && n != want {
			g.fail(desc+fmt.Sprintf(" INCRBY %d (was %+v)", delta, cur), fmt.Sprintf("%v %d", st, n), fmt.Sprintf("%v %d", wst, want))
		}
		if st == store.KeyspaceOK {
			if cur == nil {
				cur = &ksmKey{}
				m.dbs[db][k] = cur
			}
			cur.s = strconv.FormatInt(want, 10)
		}
	case 4: // APPEND
		v := g.val()
		n, st := ks.Append(uint8(db), kb, []byte(v), now)
		if cur != nil && !isStr {
			if st != store.KeyspaceWrongType {
				g.fail(desc+" APPEND", st, "wrongtype")
			}
			break
		}
		if cur == nil {
			cur = &ksmKey{}
			m.dbs[db][k] = cur
		}
		cur.s += v
		if st != store.KeyspaceOK || n != int64(len(cur.s)) {
			g.fail(desc+" APPEND", n, len(cur.s))
		}
	case 5: // DEL
		if got := ks.Del(uint8(db), kb, now); got != (cur != nil) {
			g.fail(desc+" DEL", got, cur != nil)
		}
		delete(m.dbs[db], k)
	case 6: // EXPIRE family
		at := now + int64(r.IntN(80)) - 10
		cond := store.ExpireCond(r.IntN(5))
		got := ks.Expire(uint8(db), kb, at, cond, now)
		want := cur != nil
		if want {
			switch cond {
			case store.ExpireNX:
				want = cur.at == 0
			case store.ExpireXX:
				want = cur.at != 0
			case store.ExpireGT:
				want = cur.at != 0 && at > cur.at
			case store.ExpireLT:
				want = cur.at == 0 || at < cur.at
			}
		}
		if got != want {
			g.fail(desc+fmt.Sprintf(" EXPIRE %d %d", at, cond), got, want)
		}
		if want {
			cur.at = at
			m.get(db, k, now)
		}
	case 7: // PERSIST
		got := ks.Persist(uint8(db), kb, now)
		if want := cur != nil && cur.at != 0; got != want {
			g.fail(desc+" PERSIST", got, want)
		}
		if cur != nil {
			cur.at = 0
		}
	case 8, 9: // HSET
		var pairs [][]byte
		for range 1 + r.IntN(3) {
			v := g.val()
			if r.IntN(8) == 0 {
				v = string(bytes.Repeat([]byte{'w'}, 70)) // too long to stay packed
			}
			pairs = append(pairs, []byte(g.field()), []byte(v))
		}
		n, st := ks.HSet(uint8(db), kb, pairs, now)
		if isStr {
			if st != store.KeyspaceWrongType {
				g.fail(desc+" HSET", st, "wrongtype")
			}
			break
		}
		if cur == nil {
			cur = &ksmKey{hash: map[string]string{}}
			m.dbs[db][k] = cur
		}
		added := 0
		for i := 0; i < len(pairs); i += 2 {
			if _, ok := cur.hash[string(pairs[i])]; !ok {
				added++
			}
			cur.hash[string(pairs[i])] = string(pairs[i+1])
		}
		if st != store.KeyspaceOK || n != added {
			g.fail(desc+" HSET", fmt.Sprintf("%v %d", st, n), added)
		}
	case 10: // HDEL
		fields := [][]byte{[]byte(g.field()), []byte(g.field())}
		n, st := ks.HDel(uint8(db), kb, fields, now)
		if isStr {
			if st != store.KeyspaceWrongType {
				g.fail(desc+" HDEL", st, "wrongtype")
			}
			break
		}
		want := 0
		if cur != nil {
			for _, f := range fields {
				if _, ok := cur.hash[string(f)]; ok {
					delete(cur.hash, string(f))
					want++
				}
			}
			if len(cur.hash) == 0 {
				delete(m.dbs[db], k)
			}
		}
		if st != store.KeyspaceOK || n != want {
			g.fail(desc+" HDEL", n, want)
		}
	case 11: // HINCRBY
		f := g.field()
		delta := int64(r.IntN(20) - 10)
		n, st := ks.HIncrBy(uint8(db), kb, []byte(f), delta, now)
		var want int64
		wst := store.KeyspaceOK
		if isStr {
			wst = store.KeyspaceWrongType
		} else if cur != nil {
			if v, ok := cur.hash[f]; ok {
				x, ok := store.ParseInt([]byte(v))
				switch {
				case !ok:
					wst = store.KeyspaceNotInt
				case delta < 0 && x < math.MinInt64-delta || delta > 0 && x > math.MaxInt64-delta:
					wst = store.KeyspaceOverflow
				default:
					want = x
				}
			}
		}
		want += delta
		if st != wst || st == store.KeyspaceOK && n != want {
			g.fail(desc+" HINCRBY", fmt.Sprintf("%v %d", st, n), fmt.Sprintf("%v %d", wst, want))
		}
		if st == store.KeyspaceOK {
			if cur == nil {
				cur = &ksmKey{hash: map[string]string{}}
				m.dbs[db][k] = cur
			}
			cur.hash[f] = strconv.FormatInt(want, 10)
		}
	case 12: // HGET, HEXISTS, HLEN
		f := g.field()
		out, st := ks.HGet(uint8(db), kb, []byte(f), now, g.buf[:0])
		ex, _ := ks.HExists(uint8(db), kb, []byte(f), now)
		n, _ := ks.HLen(uint8(db), kb, now)
		switch {
		case isStr:
			if st != store.KeyspaceWrongType {
				g.fail(desc+" HGET", st, "wrongtype")
			}
		case cur == nil:
			if st != store.KeyspaceMissing || ex || n != 0 {
				g.fail(desc+" HGET", st, "missing")
			}
		default:
			v, ok := cur.hash[f]
			if ok != (st == store.KeyspaceOK) || string(out) != v || ex != ok || n != len(cur.hash) {
				g.fail(desc+" HGET/HEXISTS/HLEN", fmt.Sprintf("%v %q %v %d", st, out, ex, n), v)
			}
		}
	case 13: // GETDEL
		out, st := ks.GetDel(uint8(db), kb, now, g.buf[:0])
		switch {
		case cur == nil:
			if st != store.KeyspaceMissing {
				g.fail(desc+" GETDEL", st, "missing")
			}
		case !isStr:
			if st != store.KeyspaceWrongType {
				g.fail(desc+" GETDEL", st, "wrongtype")
			}
		default:
			if st != store.KeyspaceOK || string(out) != cur.s {
				g.fail(desc+" GETDEL", string(out), cur.s)
			}
			delete(m.dbs[db], k)
		}
	case 14: // GETEX
		mode := store.GetExMode(r.IntN(3))
		at := now + int64(r.IntN(60)) - 5
		out, st := ks.GetEx(uint8(db), kb, mode, at, now, g.buf[:0])
		switch {
		case cur == nil:
			if st != store.KeyspaceMissing {
				g.fail(desc+" GETEX", st, "missing")
			}
		case !isStr:
			if st != store.KeyspaceWrongType {
				g.fail(desc+" GETEX", st, "wrongtype")
			}
		default:
			if st != store.KeyspaceOK || string(out) != cur.s {
				g.fail(desc+" GETEX", string(out), cur.s)
			}
			switch mode {
			case store.GetExAt:
				cur.at = at
				m.get(db, k, now)
			case store.GetExPersist:
				cur.at = 0
			}
		}
	case 15: // DELEX IFEQ/IFNE
		cond := store.SetIfEq + store.SetCond(r.IntN(2))
		match := g.val()
		if isStr && r.IntN(2) == 0 {
			match = cur.s
		}
		got, st := ks.DelIf(uint8(db), kb, cond, []byte(match), now)
		switch {
		case cur == nil:
			if got || st != store.KeyspaceOK {
				g.fail(desc+" DELEX", got, false)
			}
		case !isStr:
			if st != store.KeyspaceWrongType {
				g.fail(desc+" DELEX", st, "wrongtype")
			}
		default:
			want := (cur.s == match) == (cond == store.SetIfEq)
			if got != want {
				g.fail(desc+" DELEX", got, want)
			}
			if want {
				delete(m.dbs[db], k)
			}
		}
	case 16: // MSET, MSETNX
		k2 := g.key()
		v1, v2 := g.val(), g.val()
		kv := [][]byte{kb, []byte(v1), []byte(k2), []byte(v2)}
		if r.IntN(2) == 0 {
			ok, _ := ks.MSetNX(uint8(db), kv, now)
			want := cur == nil && m.get(db, k2, now) == nil
			if ok != want {
				g.fail(desc+" MSETNX", ok, want)
			}
			if !ok {
				break
			}
		} else if st := ks.MSet(uint8(db), kv, now); st != store.KeyspaceOK {
			g.fail(desc+" MSET", st, "OK")
		}
		for i := 0; i < 4; i += 2 {
			nk := &ksmKey{s: string(kv[i+1])}
			if old := m.get(db, string(kv[i]), now); old != nil {
				nk.fence = old.fence
			}
			m.dbs[db][string(kv[i])] = nk
		}
	case 17: // FLUSHDB (rare)
		if r.IntN(20) == 0 {
			ks.Flush(uint8(db))
			m.dbs[db] = map[string]*ksmKey{}
		}
	case 18, 19: // time passes; active expiry
		g.now += int64(r.IntN(15))
		budget := 1 + r.IntN(4)
		for {
			_, more := ks.Advance(g.now, budget)
			if !more {
				break
			}
		}
		if at, ok := ks.NextDeadline(); ok && at <= g.now {
			g.fail("NextDeadline after Advance", at, "> now")
		}
	case 20: // STRLEN, TYPE, EXISTS, TTL
		n, st := ks.StrLen(uint8(db), kb, now)
		typ := ks.Type(uint8(db), kb, now)
		ex := ks.Exists(uint8(db), [][]byte{kb, kb}, now)
		ttl := ks.TTL(uint8(db), kb, now)
		switch {
		case cur == nil:
			if n != 0 || st != store.KeyspaceOK || typ != store.KindNone || ex != 0 || ttl != -2 {
				g.fail(desc+" STRLEN/TYPE/EXISTS/TTL", fmt.Sprint(n, st, typ, ex, ttl), "none")
			}
		default:
			wt, wn, wst := store.KindString, int64(len(cur.s)), store.KeyspaceOK
			if !isStr {
				wt, wn, wst = store.KindHash, 0, store.KeyspaceWrongType
			}
			wttl := int64(-1)
			if cur.at != 0 {
				wttl = cur.at - now
			}
			if n != wn || st != wst || typ != wt || ex != 2 || ttl != wttl {
				g.fail(desc+" STRLEN/TYPE/EXISTS/TTL", fmt.Sprint(n, st, typ, ex, ttl), fmt.Sprint(wn, wst, wt, 2, wttl))
			}
		}
	case 21: // fences
		tok := uint64(r.IntN(10))
		ks.RaiseFence(uint8(db), kb, tok, now)
		if cur != nil && tok > cur.fence {
			cur.fence = tok
		}
		got := ks.KeyFence(uint8(db), kb, now)
		want := uint64(0)
		if cur != nil {
			want = cur.fence
		}
		if got != want {
			g.fail(desc+" fence", got, want)
		}
	case 22: // INCRBYFLOAT, computed as Redis does: a long double (64-bit mantissa), %.17Lf
		delta := []string{"0.1", "-2.5", "3.0e3", "1e20", "0.333333333333333333", "x", "-0.1"}[r.IntN(7)]
		out, st := ks.IncrByFloat(uint8(db), kb, []byte(delta), now, g.buf[:0])
		ld := func(s string) (*big.Float, bool) {
			if s == "" || strings.ContainsAny(s, " xXnNiI_pP") {
				return nil, false
			}
			f, _, err := big.ParseFloat(s, 10, 64, big.ToNearestEven)
			return f, err == nil
		}
		f := new(big.Float).SetPrec(64)
		wst := store.KeyspaceOK
		inc, ok := ld(delta)
		switch {
		case !ok:
			wst = store.KeyspaceNotInt
		case cur == nil:
		case !isStr:
			wst = store.KeyspaceWrongType
		default:
			if f, ok = ld(cur.s); !ok {
				wst = store.KeyspaceNotInt
			}
		}
		want := ""
		if wst == store.KeyspaceOK {
			f.Add(f, inc)
			want = strings.TrimSuffix(strings.TrimRight(f.Text('f', 17), "0"), ".")
			if want == "-0" {
				want = "0"
			}
		}
		if st != wst || st == store.KeyspaceOK && string(out) != want {
			g.fail(desc+" INCRBYFLOAT "+delta, fmt.Sprintf("%v %q", st, out), fmt.Sprintf("%v %q", wst, want))
		}
		if st == store.KeyspaceOK {
			if cur == nil {
				cur = &ksmKey{}
				m.dbs[db][k] = cur
			}
			cur.s = want
		}
	case 23, 24: // a backup: begin, go on, or end and compare
		if !g.saving {
			g.saving, g.saveNow, g.saveWant, g.saved = true, now, m.clone(), g.saved[:0]
			for i := range g.saveWant.dbs {
				for k := range g.saveWant.dbs[i] {
					g.saveWant.get(i, k, now)
				}
			}
			ks.BeginSave(now, func(rec *store.Record) { g.saved = rec.Append(g.saved) })
			break
		}
		if ks.SaveNext(1 + r.IntN(4)) {
			g.saving = false
			g.restores++
			fresh := store.NewKeyspace(store.KeyspaceConfig{})
			if err := fresh.Restore(g.saved); err != nil {
				t.Fatalf("restore of a backup begun at %d: %v", g.saveNow, err)
			}
			compareKs(t, "backup begun at "+strconv.FormatInt(g.saveNow, 10), fresh, g.saveWant, g.saveNow)
		}
	case 25: // SCAN by small steps: every key there for the whole walk, at least once
		want := map[string]bool{}
		for k := range m.dbs[db] {
			if m.get(db, k, now) != nil {
				want[k] = true
			}
		}
		var c uint64
		for {
			c = ks.Scan(uint8(db), c, 1+r.IntN(3), now, func(key []byte, _ store.ValueKind) { delete(want, string(key)) })
			if c == 0 {
				break
			}
		}
		if len(want) > 0 {
			g.fail(desc+" SCAN", "missed", want)
		}
	}
	return desc
}

// compareKs checks that ks holds exactly m's keys (live at now), values, expiries and
// fences.
func compareKs(t testing.TB, what string, ks *store.Keyspace, m *ksModel, now int64) {
	t.Helper()
	if err := ks.Check(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for db := range m.dbs {
		var got []string
		var c uint64
		for {
			c = ks.Scan(uint8(db), c, 1000, now, func(key []byte, _ store.ValueKind) { got = append(got, string(key)) })
			if c == 0 {
				break
			}
		}
		var want []string
		for k, v := range m.dbs[db] {
			if v.at == 0 || v.at > now {
				want = append(want, k)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: db %d keys %q, want %q", what, db, got, want)
		}
		for _, k := range want {
			v := m.dbs[db][k]
			kb := []byte(k)
			if v.hash == nil {
				out, st := ks.Get(uint8(db), kb, now, nil)
				if st != store.KeyspaceOK || string(out) != v.s {
					t.Fatalf("%s: db %d %q = %v %q, want %q", what, db, k, st, out, v.s)
				}
			} else {
				h := map[string]string{}
				ks.HRange(uint8(db), kb, now, func(f, val []byte) { h[string(f)] = string(val) })
				if !maps.Equal(h, v.hash) {
					t.Fatalf("%s: db %d hash %q = %v, want %v", what, db, k, h, v.hash)
				}
			}
			want := int64(-1)
			if v.at != 0 {
				want = v.at
			}
			if got := ks.ExpireAt(uint8(db), kb, now); got != want {
				t.Fatalf("%s: db %d %q expires at %d, want %d", what, db, k, got, want)
			}
			if got := ks.KeyFence(uint8(db), kb, now); got != v.fence {
				t.Fatalf("%s: db %d %q fence %d, want %d", what, db, k, got, v.fence)
			}
		}
	}
}

func runKsModel(t testing.TB, seed uint64, steps int) {
	g := &ksRig{t: t, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ks: store.NewKeyspace(store.KeyspaceConfig{Log: true, Events: true}), m: newKsModel(), now: 1_000_000}
	watched := []byte("a")
	ver := g.ks.Watch(0, watched)
	state := func() string { // the watched key's value and expiry (not its fence)
		v := g.m.get(0, "a", g.now)
		if v == nil {
			return "none"
		}
		return fmt.Sprint(v.s, v.hash, v.at)
	}
	before := state()
	for i := range steps {
		desc := g.step()
		if err := g.ks.Check(); err != nil {
			t.Fatalf("seed %d step %d (%s): %v", seed, i, desc, err)
		}
		// A watched key whose state changed has a new version.
		if s := state(); s != before {
			if v := g.ks.WatchVersion(0, watched); v == ver {
				t.Fatalf("seed %d step %d (%s): watched key changed (%s -> %s), version still %d", seed, i, desc, before, s, ver)
			}
		}
		ver, before = g.ks.WatchVersion(0, watched), state()
		if i%50 == 0 {
			compareKs(t, fmt.Sprintf("seed %d step %d", seed, i), g.ks, g.m, g.now)
		}
		g.ks.ClearEvents()
	}
	compareKs(t, fmt.Sprintf("seed %d end", seed), g.ks, g.m, g.now)
	g.ks.Unwatch(0, watched)
	// The log replays to the same keys.
	fresh := store.NewKeyspace(store.KeyspaceConfig{})
	if err := fresh.Restore(g.ks.Log()); err != nil {
		t.Fatalf("seed %d: replay: %v", seed, err)
	}
	compareKs(t, fmt.Sprintf("seed %d: the log replayed", seed), fresh, g.m, g.now)
	if err := g.ks.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestKeyspaceModel runs seeded random operations against the keyspace and the model.
func TestKeyspaceModel(t *testing.T) {
	for seed := range uint64(40) {
		runKsModel(t, seed, 1500)
	}
	// Index tables that split at a few keys: the directory and splits under the same ops.
	defer store.SetKeyspaceTableMax(8)()
	for seed := range uint64(20) {
		runKsModel(t, 100+seed, 1500)
	}
}

// FuzzKeyspace drives the same operations from a fuzzer's seed.
func FuzzKeyspace(f *testing.F) {
	f.Add(uint64(1), uint16(300))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		if seed&1 == 1 {
			defer store.SetKeyspaceTableMax(8)()
		}
		runKsModel(t, seed, int(steps%2000))
	})
}

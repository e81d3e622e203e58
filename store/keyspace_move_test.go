package store_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// The Locks' value records as the Redis commands write them (rediscmd, proto/slock's
// AppendDataRecord): u32 N | stage<<6|cmd | flag | [u16 P | u8 code | u16 len | name] | value.
const (
	flagNumber = 0x01
	flagArray  = 0x02
	flagKV     = 0x04
	flagProps  = 0x10
)

func valueRecord(flag byte, name []byte, value []byte) []byte {
	var b []byte
	body := []byte{0, flag}
	if name != nil {
		body[1] |= flagProps
		body = binary.LittleEndian.AppendUint16(body, uint16(3+len(name)))
		body = append(body, 1)
		body = binary.LittleEndian.AppendUint16(body, uint16(len(name)))
		body = append(body, name...)
	}
	body = append(body, value...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// lockKeyOf is a name's LockKey as rediscmd.KeyID makes a short one (padded on the left);
// longer names get any other 16 bytes (the move reads the name from the value).
func lockKeyOf(name string, i int) [16]byte {
	var k [16]byte
	if len(name) > 0 && len(name) < 16 && name[0] != 0 {
		copy(k[16-len(name):], name)
		return k
	}
	k[0] = 0x80
	binary.LittleEndian.PutUint64(k[8:], uint64(i)+1)
	return k
}

// mvWant is what a Locks key should become in the keyspace (or stay).
type mvWant struct {
	db    uint8
	key   [16]byte
	name  string
	moved bool
	kind  store.ValueKind
	str   string
	num   int64
	hash  map[string]string
	at    int64 // Unix ms; 0: none
	fence uint64
	value []byte // the Locks' value record
}

// TestMoveValuesProperty: random Locks states as a replayed old log leaves them (Redis keys:
// strings, numbers, hashes, with an exact expiry, a deadline or none, fenced or not; and
// what must stay: LOCKs under another LockId, unnamed values, ARRAY values, keys of two
// holders) moved a few at a time: every Redis key is in the keyspace with its value, type,
// expiry (within the Locks' TTL's ms) and fence, gone from the Locks, its records in the
// keyspace's Log (which replays to the same) and its removal in the Locks' journal; the rest
// is in the Locks as it was.
func TestMoveValuesProperty(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 77))
		s := store.New(store.Config{Locks: store.LocksConfig{Persist: true}, Keyspace: store.KeyspaceConfig{Log: true}})
		now := int64(1_800_000_000_000) * 1e6 // Unix ns
		nowMs := now / 1e6
		var wants []*mvWant
		seen := map[[17]byte]bool{}
		for i := range 200 + r.IntN(200) {
			db := uint8(r.IntN(4))
			name := "k" + strconv.Itoa(i)
			if r.IntN(5) == 0 {
				name = fmt.Sprintf("a-long-key-name-of-more-than-16-bytes-%d", i)
			}
			w := &mvWant{db: db, key: lockKeyOf(name, i), name: name, moved: true}
			if seen[[17]byte(append([]byte{db}, w.key[:]...))] {
				continue
			}
			seen[[17]byte(append([]byte{db}, w.key[:]...))] = true
			nm := []byte(name)
			switch r.IntN(4) {
			case 0:
				w.kind, w.str = store.KindString, "value-"+strconv.Itoa(r.IntN(1e6))
				if r.IntN(10) == 0 {
					w.str = ""
				}
				w.value = valueRecord(0, nm, []byte(w.str))
			case 1:
				w.kind, w.num = store.KindInt, r.Int64()-r.Int64()
				var v [8]byte
				binary.LittleEndian.PutUint64(v[:], uint64(w.num))
				w.value = valueRecord(flagNumber, nm, v[:])
			case 2:
				w.kind, w.hash = store.KindHash, map[string]string{}
				var v []byte
				for f := range 1 + r.IntN(150) { // past 128 fields: a large hash
					fv := strconv.Itoa(r.IntN(1000))
					w.hash["f"+strconv.Itoa(f)] = fv
					v = binary.LittleEndian.AppendUint32(v, uint32(len("f"+strconv.Itoa(f))))
					v = append(v, "f"+strconv.Itoa(f)...)
					v = binary.LittleEndian.AppendUint32(v, uint32(len(fv)))
					v = append(v, fv...)
				}
				w.value = valueRecord(flagKV, nm, v)
			case 3:
				w.kind, w.str = store.KindString, "x"
				w.value = valueRecord(0, nm, []byte(w.str))
			}
			hs := store.HolderState{LockID: w.key, Levels: 1, Count: 1, Start: now - 1e9,
				Hold: store.Hold{N: 1, Opts: store.HoldNever}}
			switch r.IntN(3) {
			case 0:
				hs.ExpireAt = nowMs + 1 + r.Int64N(1e7)
				hs.Hold = store.Hold{N: 60000, Unit: store.Millis}
				w.at = hs.ExpireAt
			case 1:
				hs.Deadline = now + 1 + r.Int64N(1e13)
				hs.Hold = store.Hold{N: 600, Unit: store.Minutes}
				w.at = (hs.Deadline + 999_999) / 1e6
			}
			st := store.KeyState{DB: db, Key: w.key, Value: w.value, Holders: []store.HolderState{hs}}
			if r.IntN(4) == 0 {
				st.Fence = 1 + r.Uint64N(1<<40)
				w.fence = st.Fence
			}
			// What stays in the Locks.
			switch r.IntN(12) {
			case 0: // a LOCK's value: held under another LockId
				st.Holders[0].LockID[0] ^= 0xff
				w.moved = false
			case 1: // no name: a binary client's record
				st.Value = valueRecord(0, nil, []byte("bin"))
				w.moved = false
			case 2: // slock's ARRAY
				st.Value = valueRecord(flagArray, nm, []byte{1, 0, 'a'})
				w.moved = false
			case 3: // two holders
				h2 := hs
				h2.LockID[0] ^= 0x55
				st.Holders = append(st.Holders, h2)
				w.moved = false
			}
			w.value = st.Value
			s.Locks.Restore(&st, now)
			wants = append(wants, w)
		}
		s.Locks.ForgetJournal()
		// The Locks' TTL before the move, for the moved keys.
		ttl := map[*mvWant]int64{}
		for _, w := range wants {
			ttl[w] = s.Locks.TTL(w.db, w.key, now)
		}
		total := store.Moved{}
		calls := 0
		for {
			m := s.MoveValues(1+r.IntN(9), now)
			calls++
			total.Moved += m.Moved
			total.Kept += m.Kept
			total.Clashed += m.Clashed
			if m.Done {
				break
			}
			if calls > 10_000 {
				t.Fatal("MoveValues never done")
			}
		}
		if err := s.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ks := s.Keyspace
		saved := map[string]store.ValueKind{}
		ks.BeginSave(nowMs, func(r *store.Record) {
			if r.Op == store.RecSet {
				saved[fmt.Sprint(r.DB, string(r.Key))] = r.Kind
			}
		})
		for !ks.SaveNext(100) {
		}
		moved := 0
		for _, w := range wants {
			name := []byte(w.name)
			if !w.moved {
				if got := s.Locks.Value(w.db, w.key); string(got) != string(w.value) {
					t.Fatalf("seed %d: %q kept in the Locks as %q, want %q", seed, w.name, got, w.value)
				}
				if ks.Type(w.db, name, nowMs) != store.KindNone {
					t.Fatalf("seed %d: %q (not a Redis key) is in the keyspace", seed, w.name)
				}
				continue
			}
			moved++
			if s.Locks.Value(w.db, w.key) != nil || s.Locks.TTL(w.db, w.key, now) != -2 {
				t.Fatalf("seed %d: %q still in the Locks", seed, w.name)
			}
			wantType := w.kind
			if wantType == store.KindInt {
				wantType = store.KindString // as TYPE says; saved as an integer (below)
			}
			if got := ks.Type(w.db, name, nowMs); got != wantType {
				t.Fatalf("seed %d: %q is of kind %d, want %d", seed, w.name, got, wantType)
			}
			if w.kind != store.KindHash && saved[fmt.Sprint(w.db, w.name)] != w.kind {
				t.Fatalf("seed %d: %q saved as kind %d, want %d", seed, w.name, saved[fmt.Sprint(w.db, w.name)], w.kind)
			}
			switch w.kind {
			case store.KindString:
				if v, _ := ks.Get(w.db, name, nowMs, nil); string(v) != w.str {
					t.Fatalf("seed %d: %q = %q, want %q", seed, w.name, v, w.str)
				}
			case store.KindInt:
				if v, _ := ks.Get(w.db, name, nowMs, nil); string(v) != strconv.FormatInt(w.num, 10) {
					t.Fatalf("seed %d: %q = %q, want %d", seed, w.name, v, w.num)
				}
			case store.KindHash:
				h := map[string]string{}
				ks.HRange(w.db, name, nowMs, func(f, v []byte) { h[string(f)] = string(v) })
				if !maps.Equal(h, w.hash) {
					t.Fatalf("seed %d: hash %q has %d fields, want %d", seed, w.name, len(h), len(w.hash))
				}
			}
			at := ks.ExpireAt(w.db, name, nowMs)
			if w.at == 0 && at != -1 || w.at != 0 && at != w.at {
				t.Fatalf("seed %d: %q expires at %d, want %d", seed, w.name, at, w.at)
			}
			if lt, kt := ttl[w], ks.TTL(w.db, name, nowMs); lt >= 0 && (kt < lt || kt > lt+1) || lt < 0 && kt != lt {
				t.Fatalf("seed %d: %q: the keyspace's TTL %d, the Locks' was %d", seed, w.name, kt, lt)
			}
			if f := ks.KeyFence(w.db, name, nowMs); f != w.fence {
				t.Fatalf("seed %d: %q fence %d, want %d", seed, w.name, f, w.fence)
			}
		}
		if total.Moved != moved || total.Clashed != 0 || total.Kept != len(wants)-moved || ks.Keys() != moved {
			t.Fatalf("seed %d: %+v, want %d moved of %d; the keyspace has %d", seed, total, moved, len(wants), ks.Keys())
		}
		// The keyspace's records of the move replay to the same keys.
		fresh := store.NewKeyspace(store.KeyspaceConfig{})
		if err := fresh.Restore(ks.Log()); err != nil {
			t.Fatal(err)
		}
		if fresh.Keys() != moved {
			t.Fatalf("seed %d: the move's records replay to %d keys, want %d", seed, fresh.Keys(), moved)
		}
		for _, w := range wants {
			if w.moved && fresh.ExpireAt(w.db, []byte(w.name), nowMs) != ks.ExpireAt(w.db, []byte(w.name), nowMs) {
				t.Fatalf("seed %d: %q replayed with another expiry", seed, w.name)
			}
		}
		// The Locks' journal has each moved key gone.
		gone := 0
		s.Locks.Journal(now, func(st *store.KeyState) {
			if st.Ceil == 0 && !st.Flush && len(st.Holders) == 0 {
				gone++
			}
		})
		if gone != moved {
			t.Fatalf("seed %d: the Locks' journal has %d keys gone, want %d", seed, gone, moved)
		}
		// Again: nothing left to move.
		if m := s.MoveValues(1<<20, now); !m.Done || m.Moved != 0 {
			t.Fatalf("seed %d: a second walk %+v", seed, m)
		}
	}
}

// TestMoveValuesClash: a name the keyspace has keeps the keyspace's value; the Locks'
// entry of it goes.
func TestMoveValuesClash(t *testing.T) {
	s := store.New(store.Config{})
	now := int64(1_800_000_000_000) * 1e6
	key := lockKeyOf("k", 0)
	s.Locks.Restore(&store.KeyState{DB: 0, Key: key, Value: valueRecord(0, []byte("k"), []byte("old")),
		Holders: []store.HolderState{{LockID: key, Levels: 1, Count: 1, Start: now, Hold: store.Hold{N: 1, Opts: store.HoldNever}}}}, now)
	s.Keyspace.Set(0, []byte("k"), []byte("new"), &store.SetOpts{}, now/1e6, nil)
	m := s.MoveValues(10, now)
	if !m.Done || m.Clashed != 1 || m.Moved != 0 {
		t.Fatalf("%+v", m)
	}
	if v, _ := s.Keyspace.Get(0, []byte("k"), now/1e6, nil); string(v) != "new" || s.Locks.Value(0, key) != nil {
		t.Fatalf("keyspace %q, Locks %q", v, s.Locks.Value(0, key))
	}
}

package store_test

import (
	"encoding/binary"
	"errors"
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// hashModel is a plain reading of Redis's hash commands: the fields in the order they were
// first set, applied one argument at a time.
type hashModel struct {
	fields []string
	vals   map[string]string
}

func (m *hashModel) set(f, v string) bool {
	_, ok := m.vals[f]
	if !ok {
		m.fields = append(m.fields, f)
	}
	m.vals[f] = v
	return !ok
}

func (m *hashModel) del(f string) bool {
	if _, ok := m.vals[f]; !ok {
		return false
	}
	delete(m.vals, f)
	for i, g := range m.fields {
		if g == f {
			m.fields = append(m.fields[:i], m.fields[i+1:]...)
			break
		}
	}
	return true
}

// apply runs op on the model: its result, or the error ApplyHash must give.
func (m *hashModel) apply(op *store.HashOp) (int64, error) {
	var n int64
	switch op.Kind {
	case store.HashSet:
		for i := 0; i < len(op.Args); i += 2 {
			if m.set(string(op.Args[i]), string(op.Args[i+1])) {
				n++
			}
		}
	case store.HashDel:
		for _, f := range op.Args {
			if m.del(string(f)) {
				n++
			}
		}
	case store.HashIncr:
		f := string(op.Args[0])
		var old int64
		if s, ok := m.vals[f]; ok {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != s {
				return 0, store.ErrHashNotInteger
			}
			old = v
		}
		sum := old + op.Delta
		if (op.Delta > 0 && sum < old) || (op.Delta < 0 && sum > old) {
			return 0, store.ErrHashOverflow
		}
		m.set(f, strconv.FormatInt(sum, 10))
		n = sum
	}
	return n, nil
}

// record is the value record the model stands for, as ApplyHash builds it from tmpl;
// nil for an empty hash (no value).
func (m *hashModel) record() []byte {
	if len(m.fields) == 0 {
		return nil
	}
	var fv []string
	for _, f := range m.fields {
		fv = append(fv, f, m.vals[f])
	}
	return hashRec("k", fv...)
}

// FuzzApplyHash runs a sequence of hash writes, decoded from the input, through ApplyHash
// and through hashModel, which must agree on every result, error, and the record left.
func FuzzApplyHash(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 1, 2, 2, 0, 5, 1, 1, 0})
	f.Add([]byte{2, 1, 0, 0x7f, 2, 1, 0, 1, 0, 1, 0, 2, 1, 1, 0, 3})
	f.Add([]byte{0, 20, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 12, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3})
	f.Add([]byte{0, 2, 3, 9, 2, 1, 3, 0x80})
	names := []string{"a", "b", "", "count", "a\x00", "9223372036854775807", "-9223372036854775808", "12", "-1", "01", "x"}
	deltas := []int64{1, -1, 0, 1 << 62, -1 << 63, 1<<63 - 1, 100, -100}
	tmpl := recp(0, 0x04|0x20, keyProp("k"))
	f.Fuzz(func(t *testing.T, in []byte) {
		next := func() int {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return int(b)
		}
		m := &hashModel{vals: map[string]string{}}
		var rec, dst []byte
		for steps := 0; len(in) > 0 && steps < 64; steps++ {
			op := &store.HashOp{Kind: store.HashKind(next()%3 + 1)}
			switch op.Kind {
			case store.HashSet:
				for range 1 + next()%24 {
					op.Args = append(op.Args, []byte(names[next()%len(names)]), []byte(names[next()%len(names)]))
				}
			case store.HashDel:
				for range 1 + next()%24 {
					op.Args = append(op.Args, []byte(names[next()%len(names)]))
				}
			case store.HashIncr:
				op.Args = [][]byte{[]byte(names[next()%len(names)])}
				op.Delta = deltas[next()%len(deltas)]
			}
			before := len(m.fields)
			wantN, wantErr := m.apply(op)
			var n int64
			var changed bool
			var err error
			dst, n, changed, err = store.ApplyHash(dst[:0], rec, tmpl, op)
			if !errors.Is(err, wantErr) || err == nil && n != wantN {
				t.Fatalf("step %d: %d %q on %q: %d, %v; model %d, %v", steps, op.Kind, op.Args, m.fields, n, err, wantN, wantErr)
			}
			if err != nil {
				if changed || len(dst) != 0 {
					t.Fatalf("step %d: an error appended %x (changed %v)", steps, dst, changed)
				}
				continue
			}
			want := m.record()
			noop := op.Kind == store.HashDel && wantN == 0
			switch {
			case noop && (changed || len(dst) != 0):
				t.Fatalf("step %d: HDEL of nothing changed the hash to %x", steps, dst)
			case noop:
				continue
			case !changed:
				t.Fatalf("step %d: %d %q reported no change", steps, op.Kind, op.Args)
			case want == nil && len(dst) != 0, want != nil && string(dst) != string(want):
				t.Fatalf("step %d: %d %q on %d fields left\n%q\nmodel\n%q", steps, op.Kind, op.Args, before, dst, want)
			}
			if want == nil {
				rec = nil
			} else {
				rec = append(rec[:0:0], dst...)
			}
		}
	})
}

// FuzzApplyHashRecord applies hash writes to arbitrary records: a malformed or foreign
// record never makes ApplyHash fail other than with an error, and what it appends is
// always a well-formed hash record whose pairs are whole.
func FuzzApplyHashRecord(f *testing.F) {
	f.Add(hashRec("k", "a", "1"), []byte("a"), uint8(0))
	f.Add(append(hashRec("k", "a", "1"), 1, 2), []byte("b"), uint8(1))
	f.Add(recp(0, 0x04, nil, []byte{5, 0, 0, 0, 'a'}), []byte("a"), uint8(2))
	f.Add([]byte{2, 0, 0, 0, 0, 4}, []byte(""), uint8(0))
	f.Fuzz(func(t *testing.T, rec, field []byte, kind uint8) {
		op := &store.HashOp{Kind: store.HashKind(kind%3 + 1), Args: [][]byte{field}, Delta: 3}
		if op.Kind == store.HashSet {
			op.Args = append(op.Args, []byte("v"))
		}
		out, _, changed, err := store.ApplyHash(nil, rec, nil, op)
		if err != nil || !changed || len(out) == 0 {
			return
		}
		n := binary.LittleEndian.Uint32(out)
		if int(n) != len(out)-4 || n < 2 || out[4] != 0 || out[5]&0x04 == 0 || out[5]&0x23 != 0 {
			t.Fatalf("ApplyHash left a bad record %x", out)
		}
		v := out[6:]
		if out[5]&0x10 != 0 {
			p := int(binary.LittleEndian.Uint16(v))
			v = v[2+p:]
		}
		for len(v) > 0 {
			for range 2 {
				if len(v) < 4 || int(binary.LittleEndian.Uint32(v)) > len(v)-4 {
					t.Fatalf("ApplyHash left a broken pair in %x", out)
				}
				v = v[4+binary.LittleEndian.Uint32(v):]
			}
		}
	})
}

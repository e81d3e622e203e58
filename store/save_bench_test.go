package store_test

import (
	"encoding/binary"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/store"
)

// What a large store costs a backup's and a follower's steps (issue 30, item 7): the
// SNAPSHOT's encoding (BeginSave, then SaveNext of saveStep keys a step, as loop/backup.go
// drives it, into blocks of 1 MiB as its file is built) and a follower's install of a raft
// snapshot (the records decoded and restored into an empty family). Each step is timed on
// the wall clock and on the thread's CPU clock: a step whose wall time is long and CPU time
// short was descheduled (a loaded machine), one whose CPU time is long does that much work.
//
// The sizes are TALLYD_BENCH_KEYS (a comma list; 200000,1000000 by default; 5000000 needs
// some 4 GB), the values TALLYD_BENCH_VALUE bytes (8 by default: a SET of a short string).
//
//	go test -run '^$' -bench 'SaveSteps|InstallRestore' -benchtime 3x ./store/

// benchSizes is the store sizes benchmarked.
func benchSizes() []int {
	v := os.Getenv("TALLYD_BENCH_KEYS")
	if v == "" {
		v = "200000,1000000"
	}
	var n []int
	for _, f := range strings.Split(v, ",") {
		if k, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && k > 0 {
			n = append(n, k)
		}
	}
	return n
}

// benchValue is the length of each key's value.
func benchValue() int {
	if n, err := strconv.Atoi(os.Getenv("TALLYD_BENCH_VALUE")); err == nil && n >= 0 {
		return n
	}
	return 8
}

// setState is the record a replicated SET of key leaves: one holder under the key's own
// LockId that never expires and persists at once, and a value of vlen bytes.
func setState(ks *store.KeyState, key uint32, vlen int, start int64) {
	ks.DB = 0
	ks.Key = [16]byte{}
	binary.LittleEndian.PutUint32(ks.Key[:], key)
	ks.Key[15] = 'k'
	v := binary.LittleEndian.AppendUint32(ks.Value[:0], uint32(vlen+2))
	v = append(v, store.DataSet, 0)
	for i := range vlen {
		v = append(v, byte('a'+(int(key)+i)%26))
	}
	ks.Value = v
	ks.Holders = append(ks.Holders[:0], store.HolderState{LockID: ks.Key, Levels: 1,
		Hold: store.Hold{N: 0xFFFF, Opts: store.HoldNever | store.HoldPersistNow}, Start: start})
}

// filled returns a family of keys keys, each with a value of vlen bytes.
func filled(keys, vlen int, now int64) *store.Locks {
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9})
	var ks store.KeyState
	for i := range uint32(keys) {
		setState(&ks, i, vlen, now)
		l.Restore(&ks, now)
		if i%4096 == 0 {
			l.ForgetJournal()
		}
	}
	l.ForgetJournal()
	return l
}

// stepTimes collects the steps' times.
type stepTimes struct {
	wall, cpu []time.Duration
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func (st *stepTimes) time(f func()) {
	c0, t0 := threadCPU(), time.Now()
	f()
	st.wall = append(st.wall, time.Since(t0))
	st.cpu = append(st.cpu, threadCPU()-c0)
}

// report puts the steps' max and p99 (wall and CPU) into b's metrics, in µs.
func (st *stepTimes) report(b *testing.B, name string) {
	for _, m := range []struct {
		unit string
		d    []time.Duration
	}{{"wall", st.wall}, {"cpu", st.cpu}} {
		d := slices.Clone(m.d)
		slices.Sort(d)
		if len(d) == 0 {
			continue
		}
		b.ReportMetric(float64(d[len(d)-1].Microseconds()), name+"-max-"+m.unit+"-µs")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"-p99-"+m.unit+"-µs")
	}
}

// saveStep is loop/backup.go's.
const saveStep = 1024

// BenchmarkSaveSteps: a SNAPSHOT's encoding of the whole family, one save per iteration,
// with each BeginSave and SaveNext timed.
func BenchmarkSaveSteps(b *testing.B) {
	vlen := benchValue()
	for _, keys := range benchSizes() {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			runtime.LockOSThread() // the steps' CPU time is this thread's
			defer runtime.UnlockOSThread()
			now := int64(1_700_000_000e9)
			l := filled(keys, vlen, now)
			runtime.GC()
			var begin, steps, grew stepTimes // grew: the steps that began a new block
			var blocks [][]byte
			newBlock := false
			emit := func(ks *store.KeyState) {
				blk := &blocks[len(blocks)-1]
				*blk = aof.AppendState(*blk, ks)
				if len(*blk) >= 1<<20 {
					blocks = append(blocks, make([]byte, 0, 1<<20+4<<10))
					newBlock = true
				}
			}
			b.ResetTimer()
			for b.Loop() {
				blocks = append(blocks[:0], make([]byte, 0, 1<<20+4<<10))
				begin.time(func() { l.BeginSave(now, emit) })
				for done := false; !done; {
					newBlock = false
					st := &steps
					c0, t0 := threadCPU(), time.Now()
					done = l.SaveNext(saveStep)
					if newBlock {
						st = &grew
					}
					st.wall = append(st.wall, time.Since(t0))
					st.cpu = append(st.cpu, threadCPU()-c0)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(keys), "ns/key")
			begin.report(b, "begin")
			steps.report(b, "step")
			grew.report(b, "newblock-step")
			n := 0
			for _, blk := range blocks {
				n += len(blk)
			}
			b.ReportMetric(float64(n)/float64(keys), "B/key")
			runtime.KeepAlive(l)
		})
	}
}

// BenchmarkInstallRestore: a follower's install of a raft snapshot's records into an empty
// family: whole (what one loop turn did before), and the longest run of
// records (64 records or 64 KiB: what a slice is made of now).
func BenchmarkInstallRestore(b *testing.B) {
	vlen := benchValue()
	for _, keys := range benchSizes() {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			runtime.LockOSThread() // the steps' CPU time is this thread's
			defer runtime.UnlockOSThread()
			now := int64(1_700_000_000e9)
			var recs []byte
			{
				l := filled(keys, vlen, now)
				l.SnapshotAll(now, func(ks *store.KeyState) { recs = aof.AppendState(recs, ks) })
			}
			runtime.GC()
			var runs stepTimes
			var names []store.KeyName
			b.ResetTimer()
			for b.Loop() {
				l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9})
				restore := func(ks *store.KeyState) { l.Restore(ks, now) }
				for r := recs; len(r) > 0; {
					var n int
					names, n = aof.RecordKeysUpTo(r, names[:0], 64, 64<<10) // loop/cluster_install.go's runs
					runs.time(func() {
						if err := aof.DecodeRecordsWith(r[:n], restore, func(map[uint64]string) {}, func(_, _ []byte) {}); err != nil {
							b.Fatal(err)
						}
						l.ForgetJournal()
					})
					r = r[n:]
				}
				if l.LoggedKeys() != keys {
					b.Fatalf("%d keys restored, want %d", l.LoggedKeys(), keys)
				}
				b.StopTimer()
				l = nil
				runtime.GC()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(keys), "ns/key")
			b.ReportMetric(float64(len(recs))/float64(keys), "B/key")
			runs.report(b, "run")
		})
	}
}

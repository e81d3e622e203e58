package store_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/store"
)

// BenchmarkKeyspaceSteps: what the keyspace costs a SNAPSHOT's steps (BeginSave, SaveNext of
// saveStep keys into kind-6 runs, as loop/keyspace_persist.go drives it), a rewrite's steps
// (RewriteNext of 8,192 keys) and a follower's install (one run of aof.KeyspaceRun bytes decoded and applied
// to a staging keyspace), each step timed on the wall clock and the thread's CPU clock, for
// keys named as redis-benchmark names them with TALLYD_BENCH_VALUE-byte values.
//
//	go test -run '^$' -bench KeyspaceSteps -benchtime 2x ./store/
func BenchmarkKeyspaceSteps(b *testing.B) {
	vlen := benchValue()
	for _, keys := range benchSizes() {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ks := store.NewKeyspace(store.KeyspaceConfig{})
			val := make([]byte, vlen)
			for i := range keys {
				ks.Set(0, []byte("key:"+leftPad(i)), val, &store.SetOpts{}, 0, nil)
			}
			runtime.GC()
			var begin, steps, rewrite, install stepTimes
			var recs []byte
			file := make([]byte, 0, keys*(40+vlen)) // room for it all: the loop's file grows in blocks, never copied
			emit := func(r *store.Record) { recs = r.Append(recs) }
			b.ResetTimer()
			for b.Loop() {
				file = file[:0]
				begin.time(func() { ks.BeginSave(0, emit) })
				for done := false; !done; {
					steps.time(func() {
						done = ks.SaveNext(saveStep)
						file = aof.AppendKeyspace(file, recs)
						recs = recs[:0]
					})
				}
				ks.BeginRewrite()
				for done := false; !done; {
					rewrite.time(func() {
						done = ks.RewriteNext(8192, emit)
						recs = recs[:0]
					})
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(file))/float64(keys), "file-B/key")
			// The install: the file's runs, one per step.
			staging := store.NewKeyspace(store.KeyspaceConfig{})
			h := &aof.Handlers{Keyspace: func(r *store.Record) { _ = staging.Apply(r) }}
			for off := 0; off < len(file); {
				n := 8 + 1 + 4 + 4 + int(uint32(file[off+9+4])|uint32(file[off+9+5])<<8|uint32(file[off+9+6])<<16|uint32(file[off+9+7])<<24)
				install.time(func() {
					if err := aof.DecodeAll(file[off:off+n], h); err != nil {
						b.Fatal(err)
					}
				})
				off += n
			}
			if staging.Keys() != keys {
				b.Fatalf("installed %d keys of %d", staging.Keys(), keys)
			}
			begin.report(b, "begin")
			steps.report(b, "save-step")
			rewrite.report(b, "rewrite-step")
			install.report(b, "install-run")
		})
	}
}

func leftPad(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 12 {
		s = "0" + s
	}
	return s
}

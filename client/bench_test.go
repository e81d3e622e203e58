package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
	"github.com/tallyd/tallyd/proto/counter"
)

// The client's cost per request against a server in the same process
// (both share the machine's cores). Parallel benchmarks pipeline on one
// connection per server.

func BenchmarkCounterGet(b *testing.B) {
	ctx := context.Background()
	k := benchClient(b).Counters()
	h, _ := k.Acquire(ctx, "x", 1, 1)
	defer h.Release(ctx)
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Get(ctx, "x"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := k.Get(ctx, "x"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkRawGet is the baseline for BenchmarkCounterGet/serial: the
// same request and reply on a bare connection, no client in between.
func BenchmarkRawGet(b *testing.B) {
	s := startTallyd(b, "a", nil)
	nc, err := net.Dial("tcp", s.Counter)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	req := counter.AppendGet(nil, 1, []byte("x"))
	buf := make([]byte, 64)
	b.ResetTimer()
	for b.Loop() {
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAtLeast(nc, buf, counter.HeaderLen+len("Not found")); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCounterAcquireRelease(b *testing.B) {
	ctx := context.Background()
	k := benchClient(b).Counters()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprint("c", n.Add(1))
		for pb.Next() {
			h, err := k.Acquire(ctx, name, 1, 1)
			if err == nil {
				err = h.Release(ctx)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkPoolAcquireRelease(b *testing.B) {
	ctx := context.Background()
	p := benchClient(b).Pool()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint("p", n.Add(1))
		for pb.Next() {
			h, err := p.Acquire(ctx, key, client.Limits{Workers: 1, MaxQueue: 1})
			if err == nil {
				err = h.Release(ctx)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkValuesIncr(b *testing.B) {
	ctx := context.Background()
	v := benchClient(b).Values()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Incr(ctx, "hits"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchClient(b *testing.B) *client.Client {
	s := startTallyd(b, "a", nil)
	c, err := client.New([]client.Server{s.Server}, &client.Options{IOTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// A TryLock+Unlock pair, serial: with Lost's timer and Close watch set up
// and torn down each time, and, in the auto sub-benchmark, an auto-refresh
// goroutine started and stopped.
func BenchmarkLockUnlock(b *testing.B) {
	ctx := context.Background()
	l := benchClient(b).Locks()
	for _, tc := range []struct {
		name string
		opts []client.LockOption
	}{{"plain", nil}, {"auto", []client.LockOption{client.AutoRefresh(0)}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				k, err := l.TryLock(ctx, "bench", time.Minute, tc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				if err := k.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package locks_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/tallyd/tallyd/client"
	"github.com/tallyd/tallyd/loop"
)

// A lock guards a write with its fencing token: the holder whose lease ran
// out (a long pause) writes after the next holder, and the resource refuses
// that late write, whatever the first holder believed.
func Example_fencedWrite() {
	c, stop := connect() // a program would use client.New([]client.Server{client.Host("10.0.0.1")}, nil)
	defer stop()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks := c.Locks()

	first, err := locks.Lock(ctx, "invoice:42", 200*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // a long GC pause: the lease runs out
	fmt.Println("the first holder's Lost is closed:", closed(first.Lost()))

	second, err := locks.Lock(ctx, "invoice:42", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)
	fmt.Println("the second holder writes:", second.SetFenced(ctx, "invoice:42:total", 200))

	// The first holder resumes and writes with its older token.
	err = c.Values().SetFenced(ctx, "invoice:42:total", 100, first.Token())
	fmt.Println("the late write is refused:", errors.Is(err, client.ErrFenced))
	total, _ := c.Values().Get(ctx, "invoice:42:total")
	fmt.Println("total:", total)
	// Output:
	// the first holder's Lost is closed: true
	// the second holder writes: <nil>
	// the late write is refused: true
	// total: 200
}

// TryLock takes a lock only if it is free; Lock would wait for it.
func Example_tryLock() {
	c, stop := connect()
	defer stop()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks := c.Locks()

	k, err := locks.TryLock(ctx, "cron:cleanup", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	_, err = locks.TryLock(ctx, "cron:cleanup", time.Minute) // another worker, say
	fmt.Println("held by another:", errors.Is(err, client.ErrTimeout))
	if err := k.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	k, err = locks.TryLock(ctx, "cron:cleanup", time.Minute)
	fmt.Println("free again:", err == nil)
	_ = k.Unlock(ctx)
	// Output:
	// held by another: true
	// free again: true
}

// A long job keeps its lock with AutoRefresh and stops as soon as Lost
// closes: here the server becomes unreachable, no refresh can be
// confirmed, and Lost closes at the lease's deadline, before the server
// could give the lock to anyone else.
func Example_autoRefresh() {
	c, stop := connect()
	defer stop()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Refreshed every ttl/3 (AutoRefresh(0)) until Unlock.
	k, err := c.Locks().Lock(ctx, "reindex", time.Second, client.AutoRefresh(0))
	if err != nil {
		log.Fatal(err)
	}
	defer k.Unlock(ctx)

	work := time.NewTimer(3 * time.Second) // three ttls: auto-refresh keeps the lock
	select {
	case <-work.C:
		fmt.Println("worked 3 ttls, still held:", !closed(k.Lost()))
	case <-k.Lost():
		log.Fatal(k.Err())
	}

	stop() // the server goes away (a partition would look the same)
	select {
	case <-k.Lost(): // stop working: the lock can no longer be known held
		fmt.Println("lost:", errors.Is(k.Err(), client.ErrLockLost))
	case <-time.After(5 * time.Second):
		fmt.Println("Lost never closed")
	}
	// Output:
	// worked 3 ttls, still held: true
	// lost: true
}

// A semaphore of 2: two holders at once, each with a lock of its own; the
// third waits for a place.
func Example_semaphore() {
	c, stop := connect()
	defer stop()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks := c.Locks()

	a, err := locks.Semaphore(ctx, "encoders", 2, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	b, err := locks.Semaphore(ctx, "encoders", 2, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two holders, two tokens:", a.Token() != b.Token())
	_, err = locks.TrySemaphore(ctx, "encoders", 2, time.Minute)
	fmt.Println("a third is refused:", errors.Is(err, client.ErrTimeout))

	got := make(chan *client.Lock)
	go func() {
		k, err := locks.Semaphore(ctx, "encoders", 2, time.Minute) // waits for a place
		if err != nil {
			log.Fatal(err)
		}
		got <- k
	}()
	time.Sleep(100 * time.Millisecond)
	if err := a.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	third := <-got
	fmt.Println("the third got the freed place")
	_ = third.Unlock(ctx)
	_ = b.Unlock(ctx)
	// Output:
	// two holders, two tokens: true
	// a third is refused: true
	// the third got the freed place
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// connect starts a tallyd in the process with its slock port on a free
// port of 127.0.0.1 and returns a client of it and a function that stops
// the server (once: a second call does nothing).
func connect() (*client.Client, func()) {
	cfg := loop.Defaults()
	cfg.Listeners = []loop.Listener{{Proto: loop.ProtoSlock, Addr: "127.0.0.1:0"}}
	s, err := loop.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Run() }()
	<-s.Ready()
	c, err := client.New([]client.Server{{Name: "example", Slock: s.Addr(0).String()}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	var once sync.Once
	return c, func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Stop(ctx); err != nil {
				log.Print(err)
			}
			<-errc
		})
	}
}

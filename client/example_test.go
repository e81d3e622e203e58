package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tallyd/tallyd/client"
	"github.com/tallyd/tallyd/loop"
)

// A lock taken, refreshed and unlocked; while it is held, another TryLock
// is refused.
func ExampleLocks_Lock() {
	srv, stop := exampleServer() // a tallyd; a program would use client.Host("10.0.0.1")
	defer stop()
	c, err := client.New([]client.Server{srv}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	locks := c.Locks()
	k, err := locks.Lock(ctx, "report:daily", 30*time.Second) // waits up to ctx's deadline if held
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", k.Name(), "with a fencing token:", k.Token() > 0)

	_, err = locks.TryLock(ctx, "report:daily", 30*time.Second)
	fmt.Println("a second TryLock is refused:", errors.Is(err, client.ErrTimeout))

	// Long work pushes the expiry back before it runs out.
	if err := k.Refresh(ctx, 30*time.Second); err != nil {
		log.Fatal(err) // errors.Is(err, client.ErrLockLost): it ran out already
	}
	if err := k.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("unlocked")
	// Output:
	// holding report:daily with a fencing token: true
	// a second TryLock is refused: true
	// unlocked
}

// Do runs a function under a lock and unlocks it however the function ends.
func ExampleLocks_Do() {
	srv, stop := exampleServer()
	defer stop()
	c, err := client.New([]client.Server{srv}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	err = c.Locks().Do(ctx, "cron:cleanup", time.Minute, func(ctx context.Context, k *client.Lock) error {
		fmt.Println("cleaning up under", k.Name())
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// cleaning up under cron:cleanup
	// done: <nil>
}

// Martin Kleppmann's scenario: the first holder pauses past its lease, the
// lock goes to a second holder, who writes; the first one's late write
// carries an older fencing token and is refused.
func ExampleLock_SetFenced() {
	srv, stop := exampleServer()
	defer stop()
	c, err := client.New([]client.Server{srv}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks := c.Locks()

	first, err := locks.Lock(ctx, "storage", 200*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(time.Second) // a long GC pause: the lease runs out

	second, err := locks.Lock(ctx, "storage", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the second token is newer:", second.Token() > first.Token())
	fmt.Println("the second holder writes:", second.SetFenced(ctx, "storage:file", 2))

	err = first.SetFenced(ctx, "storage:file", 1) // the first holder wakes up and writes
	fmt.Println("the late write is refused:", errors.Is(err, client.ErrFenced))
	n, _ := c.Values().Get(ctx, "storage:file")
	fmt.Println("storage:file is", n)
	// Output:
	// the second token is newer: true
	// the second holder writes: <nil>
	// the late write is refused: true
	// storage:file is 2
}

// exampleServer starts a tallyd in the process with its slock port on a
// free port of 127.0.0.1, for the examples (the tests use startTallyd).
func exampleServer() (client.Server, func()) {
	cfg := loop.Defaults()
	cfg.Listeners = []loop.Listener{{Proto: loop.ProtoSlock, Addr: "127.0.0.1:0"}}
	s, err := loop.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Run() }()
	<-s.Ready()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			log.Print(err)
		}
		<-errc
	}
	return client.Server{Name: "example", Slock: s.Addr(0).String()}, stop
}

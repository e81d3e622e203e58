// Command hello is a complete program using the Go client from a module of its own
// (docs/client.md shows it, and a test builds it against a running tallyd in a separate module):
// it takes a yrmcds counter, runs a function under a PoolCounter lock and increments a
// durable value.
//
//	go run ./client/examples/hello [-counter 127.0.0.1:11215] [-pool 127.0.0.1:7531] [-slock 127.0.0.1:5658]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/tallyd/tallyd/client"
)

func main() {
	counter := flag.String("counter", "127.0.0.1:11215", "yrmcds counter address")
	pool := flag.String("pool", "127.0.0.1:7531", "PoolCounter address")
	slock := flag.String("slock", "127.0.0.1:5658", "slock address (durable values)")
	flag.Parse()

	c, err := client.New([]client.Server{{Name: "local", Counter: *counter, Pool: *pool, Slock: *slock}},
		&client.Options{IOTimeout: 2 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// One of at most two printers, released when done.
	h, err := c.Counters().Acquire(ctx, "printer", 1, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding printer at", h.Addr())
	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// One worker at a time renders the page; the lock is released however render ends.
	limits := client.Limits{Workers: 1, MaxQueue: 10, Timeout: 5 * time.Second}
	err = c.Pool().Do(ctx, "enwiki:pcache:Main_Page", limits, func(ctx context.Context) error {
		fmt.Println("rendering under the PoolCounter lock")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// A durable counter: it survives restarts when tallyd keeps its log.
	n, err := c.Values().Incr(ctx, "hello:runs")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("hello:runs is now", n)
}

// Command quota takes yrmcds counters and bumps a durable counter through
// the Go client, printing which server each key lives on and what the
// client does when one of the servers is down.
//
//	go run ./client/examples/quota [-servers 127.0.0.2,127.0.0.3,127.0.0.4]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/tallyd/tallyd/client"
)

func main() {
	hosts := flag.String("servers", "127.0.0.2,127.0.0.3,127.0.0.4", "tallyd hosts, comma-separated (standard ports)")
	flag.Parse()
	var servers []client.Server
	for _, h := range strings.Split(*hosts, ",") {
		servers = append(servers, client.Host(h))
	}
	c, err := client.New(servers, &client.Options{
		OnHealth: func(addr string, up bool, err error) {
			if !up {
				fmt.Printf("  (marked %s down: %v)\n", addr, err)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := c.Counters()

	for _, name := range []string{"printer", "scanner", "plotter"} {
		h, err := k.Acquire(ctx, name, 1, 1) // one user at a time
		if err != nil {
			log.Fatal(err)
		}
		defer h.Release(ctx)
		fmt.Printf("%-8s order %v, held at %s\n", name, c.Order(name), h.Addr())
	}

	_, err = k.Acquire(ctx, "printer", 1, 1)
	fmt.Printf("printer again: %v (ErrNotAvailable: %v)\n", err, errors.Is(err, client.ErrNotAvailable))

	n, err := c.Values().Incr(ctx, "jobs:printed")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("jobs:printed is now %d (order %v)\n", n, c.Order("jobs:printed"))
}

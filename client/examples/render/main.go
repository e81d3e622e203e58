// Command render shows PoolCounter's ACQ4ANY through the Go client: five
// workers want the same page at once; one renders it and the others,
// woken by its release, use its work instead of rendering it again.
//
//	go run ./client/examples/render [-servers 127.0.0.2,127.0.0.3,127.0.0.4]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"sync"
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
	c, err := client.New(servers, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const key = "enwiki:pcache:Main_Page"
	fmt.Printf("%s lives on %s (order %v)\n", key, c.Order(key)[0], c.Order(key))
	limits := client.Limits{Workers: 1, MaxQueue: 10, Timeout: 5 * time.Second}

	var wg sync.WaitGroup
	for i := 1; i <= 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Pool().DoAny(ctx, key, limits, func(ctx context.Context) error {
				fmt.Printf("worker %d: rendering\n", i)
				time.Sleep(300 * time.Millisecond)
				fmt.Printf("worker %d: rendered and cached\n", i)
				return nil
			})
			switch {
			case err == nil:
			case errors.Is(err, client.ErrDone):
				fmt.Printf("worker %d: another worker rendered it: reading the cache\n", i)
			default:
				fmt.Printf("worker %d: %v\n", i, err)
			}
		}()
		time.Sleep(20 * time.Millisecond) // start in order, for a readable transcript
	}
	wg.Wait()
}

package load

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// fakeRESP answers every command: DBSIZE and KEYS with what the fairness run expects, the
// rest +OK (PING: +PONG). A KEYS takes keysCost.
func fakeRESP(t *testing.T, keysCost time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var in, out []byte
				dec := resp.Decoder{MaxArgs: 1 << 20, MaxCommand: 64 << 20}
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					in = append(in, buf[:n]...)
					out = out[:0]
					for {
						args, m, err := dec.Parse(in, nil)
						if err != nil || m == 0 {
							break
						}
						in = in[m:]
						switch {
						case resp.Is(args[0], "KEYS"):
							time.Sleep(keysCost)
							out = resp.AppendArray(out, 0)
						case resp.Is(args[0], "DBSIZE"):
							out = resp.AppendInt(out, 100)
						case resp.Is(args[0], "PING"):
							out = resp.AppendSimple(out, "PONG")
						default:
							out = resp.AppendSimple(out, "OK")
						}
					}
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// RunFair measures the prober's PINGs while the attacker's bursts go on.
func TestRunFair(t *testing.T) {
	addr := fakeRESP(t, 10*time.Microsecond)
	res, err := RunFair(context.Background(), FairConfig{Addr: addr, Keys: 2500, Burst: 50,
		Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Workload != Fair || res.Ops == 0 || res.Latency.Count != res.Ops || res.Outcomes["keys"] == 0 ||
		res.Outcomes["bursts"] == 0 || len(res.Errors) != 0 {
		t.Fatalf("result %+v", res)
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/spf13/pflag"
)

// defaultMetricsAddr is where `tallyctl health` asks when neither --metrics-addr nor
// TALLYD_METRICS_ADDR says (tallyd serves nothing there unless started with
// --metrics-addr).
const defaultMetricsAddr = "127.0.0.1:9715"

// envMetricsAddr gives health's --metrics-addr when the flag does not.
const envMetricsAddr = "TALLYD_METRICS_ADDR"

func init() {
	register(&command{name: "health", args: "", nargs: [2]int{0, 0},
		summary: "whether tallyd can acknowledge writes now (its /readyz): exit 0 ready, 2 unready",
		help: `Asks tallyd's metrics server (tallyd --metrics-addr) for /readyz and prints "ready"
(exit 0) or "unready: REASON" (exit 2, the server saying no): the log cannot be written,
or in a cluster there is no leader, no quorum of voters reachable from the leader, or
no link from this member to its leader. Exit 1 means no answer: the metrics address
cannot be reached (tallyd is down or runs without --metrics-addr), or it answered
something other than /readyz's 200 or 503; the message says which.

/healthz (the event loop answers) is for liveness; health is for readiness: use it
as a container's HEALTHCHECK or a load balancer's check.`,
		setup: func(fs *pflag.FlagSet) func(*app, []string) error {
			addr := fs.String("metrics-addr", defaultMetricsAddr, "tallyd's --metrics-addr, HOST:PORT ($"+envMetricsAddr+")")
			return func(a *app, _ []string) error {
				at := *addr
				if !fs.Changed("metrics-addr") {
					if v := strings.TrimSpace(a.env(envMetricsAddr)); v != "" {
						at = v
					}
				}
				return a.health(at)
			}
		}})
}

// health asks addr's /readyz and reports the answer.
func (a *app) health(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return &usageError{msg: fmt.Sprintf("--metrics-addr %q: want HOST:PORT", addr)}
	}
	url := "http://" + addr + "/readyz"
	c := &http.Client{Timeout: a.timeout}
	resp, err := c.Get(url)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		return fmt.Errorf("cannot connect to tallyd's metrics server at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("reading %s: %w", url, err)
	}
	reason := strings.TrimSpace(strings.SplitN(string(body), "\n", 2)[0])
	switch resp.StatusCode {
	case http.StatusOK:
		if a.json {
			a.emitJSON(map[string]any{"ok": true, "ready": true})
		} else {
			fmt.Fprintln(a.stdout, "ready")
		}
		return nil
	case http.StatusServiceUnavailable:
		if !a.json {
			fmt.Fprintln(a.stdout, "unready: "+reason)
		}
		return &refusal{msg: "unready: " + reason, fields: map[string]any{"ready": false, "reason": reason}, printed: true}
	}
	return fmt.Errorf("%s answered %s, not /readyz's 200 or 503 (is %s tallyd's --metrics-addr?)", url, resp.Status, addr)
}

package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// The fairness benchmark (issue 21, item 1): one client pipelines a burst of expensive
// commands in one write — Burst KEYS over Keys keys, as in the attack that froze every port
// of tallyd for 16.7 s — again and again, while another client sends PING after PING, one at
// a time. What counts is the other client's latency: with each connection limited to a slice
// of the event loop's turn, it should stay low however long the burst takes.

// FairConfig describes a fairness run.
type FairConfig struct {
	Addr     string        // a Redis-text (RESP) server: tallyd's slock port
	Keys     int           // keys with a value the KEYS walk (100,000)
	Burst    int           // KEYS in the attacker's one write (2,000)
	Pattern  string        // KEYS's pattern (zzz*: matches none, so the replies are small)
	DB       int           // the database used (SELECT), flushed first
	Duration time.Duration // measured time
	Warmup   time.Duration // before the measured window, the burst already running
	Label    string        // names the run in progress lines and the result
	Progress io.Writer     // a line per second, or nil
}

// Defaults fills the zero fields of c with the tool's defaults.
func (c *FairConfig) Defaults() {
	if c.Keys < 1 {
		c.Keys = 100_000
	}
	if c.Burst < 1 {
		c.Burst = 2000
	}
	if c.Pattern == "" {
		c.Pattern = "zzz*"
	}
	if c.DB == 0 {
		c.DB = 9
	}
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
}

// Fair is the workload name of a fairness run's Result.
const Fair = "fair"

// RunFair loads the keys, starts the attacker, and measures the prober's PINGs. The Result
// is the prober's: an op is one PING that ended in the measured window, its latency the
// round trip (a PING that a burst held from before the window counts with its whole wait);
// Outcomes counts the attacker's KEYS answered ("keys") and bursts finished ("bursts") in
// the window.
func RunFair(ctx context.Context, cfg FairConfig) (*Result, error) {
	cfg.Defaults()
	dial := func() (net.Conn, *bufio.Reader, error) {
		c, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
		if err != nil {
			return nil, nil, err
		}
		return c, bufio.NewReaderSize(c, 64<<10), nil
	}
	// Load: the keys, in a database of their own.
	lc, lr, err := dial()
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	db := strconv.Itoa(cfg.DB)
	b := resp.AppendCommand(nil, "SELECT", db)
	b = resp.AppendCommand(b, "FLUSHDB")
	if err := roundTrip(lc, lr, b, 2); err != nil {
		return nil, fmt.Errorf("fair: preparing db %s: %w", db, err)
	}
	for i := 0; i < cfg.Keys; {
		args := []string{"MSET"}
		for j := 0; j < 500 && i < cfg.Keys; j, i = j+1, i+1 { // 1,001 arguments: servers that take no more too
			args = append(args, "fair:"+strconv.Itoa(i), "v")
		}
		if err := roundTrip(lc, lr, resp.AppendCommand(nil, args...), 1); err != nil {
			return nil, fmt.Errorf("fair: loading keys: %w", err)
		}
	}
	if err := roundTrip(lc, lr, resp.AppendCommand(nil, "DBSIZE"), 1); err != nil {
		return nil, err
	}

	// The attacker: the burst in one write, its replies read, again until the end.
	ac, ar, err := dial()
	if err != nil {
		return nil, err
	}
	defer ac.Close()
	if err := roundTrip(ac, ar, resp.AppendCommand(nil, "SELECT", db), 1); err != nil {
		return nil, err
	}
	var burst []byte
	for range cfg.Burst {
		burst = resp.AppendCommand(burst, "KEYS", cfg.Pattern)
	}
	var measuring, done atomic.Bool
	var keysN, bursts atomic.Uint64
	var attackErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			if _, err := ac.Write(burst); err != nil {
				attackErr = err
				return
			}
			for range cfg.Burst {
				if _, err := readReply(ar); err != nil {
					if !done.Load() {
						attackErr = err
					}
					return
				}
				if measuring.Load() {
					keysN.Add(1)
				}
			}
			if measuring.Load() {
				bursts.Add(1)
			}
		}
	}()

	// The prober: PING after PING on a connection of its own.
	pc, pr, err := dial()
	if err != nil {
		done.Store(true)
		ac.Close()
		wg.Wait()
		return nil, err
	}
	defer pc.Close()
	ping := resp.AppendCommand(nil, "PING")
	h := NewHistogram()
	res := &Result{Label: cfg.Label, Addr: cfg.Addr, Proto: "slock-text", Workload: Fair, Conns: 2, Pipeline: 1,
		Keys: cfg.Keys, Rounds: 1, Outcomes: map[string]uint64{}, Errors: map[string]uint64{}}
	start := time.Now()
	measureAt := start.Add(cfg.Warmup)
	end := measureAt.Add(cfg.Duration)
	nextLine := measureAt.Add(time.Second)
	var ops uint64
	for {
		if time.Now().After(end) || ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		if err := roundTrip(pc, pr, ping, 1); err != nil {
			res.Errors["io"]++
			res.FirstError = err.Error()
			break
		}
		// A PING counts if it ends in the window: one the burst held from before it
		// began counts with all of its wait.
		t1 := time.Now()
		if !t1.Before(measureAt) {
			measuring.Store(true)
			record(h, t1.Sub(t0).Nanoseconds())
			ops++
		}
		if cfg.Progress != nil && t1.After(nextLine) {
			s := Summarize(h)
			fmt.Fprintf(cfg.Progress, "%s PINGs %d, p99 %s, max %s; attacker's KEYS answered %d\n", cfg.Label,
				ops, Micros(s.P99), Micros(s.Max), keysN.Load())
			nextLine = t1.Add(time.Second)
		}
	}
	secs := time.Since(measureAt).Seconds()
	done.Store(true)
	ac.Close()
	wg.Wait()
	if attackErr != nil && !errors.Is(attackErr, net.ErrClosed) {
		res.Errors["attacker"]++
		if res.FirstError == "" {
			res.FirstError = "attacker: " + attackErr.Error()
		}
	}
	res.Seconds, res.Requests, res.Ops = secs, ops, ops
	res.Outcomes["keys"], res.Outcomes["bursts"] = keysN.Load(), bursts.Load()
	res.hist = h
	res.finish()
	return res, ctx.Err()
}

// roundTrip writes b and reads n replies, failing on an error reply.
func roundTrip(c net.Conn, r *bufio.Reader, b []byte, n int) error {
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(b); err != nil {
		return err
	}
	for range n {
		rep, err := readReply(r)
		if err != nil {
			return err
		}
		if rep.Kind == '-' {
			return errors.New(string(rep.Str))
		}
	}
	return nil
}

// readReply reads one RESP reply.
func readReply(r *bufio.Reader) (resp.Reply, error) {
	var buf []byte
	for {
		if len(buf) > 0 {
			rep, n, err := resp.ParseReply(buf)
			if err != nil {
				return rep, err
			}
			if n > 0 {
				return rep, nil
			}
		}
		line, err := r.ReadSlice('\n')
		buf = append(buf, line...)
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return resp.Reply{}, err
		}
	}
}

package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tallyd/tallyd/proto/resp"
)

// The backup benchmark (issue 30, item 7): a store of Keys keys, a client writing and
// another reading one command at a time, and a SNAPSHOT taken meanwhile. What counts is the
// reader's latency during the save (a SNAPSHOT encoded in one turn held every client for
// most of a second at 1M keys), and the server's own count of long loop turns (INFO
// latency) over the save.

// SnapshotConfig describes a backup run.
type SnapshotConfig struct {
	Addr     string        // tallyd's slock port (RESP)
	Keys     int           // keys in the store (snap:0 ... snap:Keys-1), filled if DBSIZE has fewer
	Value    int           // bytes of each key's value
	Before   time.Duration // the reader's baseline before the save
	Out      string        // where the file goes; "" discards it
	Timeout  time.Duration // for the SNAPSHOT's reply
	Progress io.Writer     // progress lines, or nil
}

// SnapshotResult is what a backup run measured.
type SnapshotResult struct {
	Keys          int               `json:"keys"`
	FillSecs      float64           `json:"fill_s"`
	Bytes         int64             `json:"file_bytes"`
	SaveSecs      float64           `json:"save_s"`
	Baseline      Summary           `json:"baseline"`    // the reader's GETs before the save
	During        Summary           `json:"during_save"` // the reader's GETs while the SNAPSHOT ran
	Writes        uint64            `json:"writes_during_save"`
	TurnsOver     map[string]uint64 `json:"turns_over_during_save"` // INFO latency's loop_turns_over_*, the save's share
	MaxTurnUS     int64             `json:"loop_turn_max_usec"`     // INFO latency's, after the save (since start)
	MaxTurnBefore int64             `json:"loop_turn_max_usec_before"`
}

// Defaults fills the zero fields of c with the tool's defaults.
func (c *SnapshotConfig) Defaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:5658"
	}
	if c.Keys < 1 {
		c.Keys = 1_000_000
	}
	if c.Before <= 0 {
		c.Before = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
}

// RunSnapshot fills the store, starts the writer and the reader, takes the SNAPSHOT and
// reports.
func RunSnapshot(ctx context.Context, cfg SnapshotConfig) (*SnapshotResult, error) {
	cfg.Defaults()
	dial := func() (net.Conn, *bufio.Reader, error) {
		c, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
		if err != nil {
			return nil, nil, err
		}
		return c, bufio.NewReaderSize(c, 256<<10), nil
	}
	say := func(format string, a ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "[snapshot] "+format+"\n", a...)
		}
	}
	res := &SnapshotResult{Keys: cfg.Keys}
	lc, lr, err := dial()
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	if err := fill(lc, lr, cfg, res, say); err != nil {
		return nil, err
	}

	var done, saving atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Uint64
	var writeErr error
	wc, wr, err := dial()
	if err != nil {
		return nil, err
	}
	defer wc.Close()
	wg.Add(1)
	go func() { // the writer: 16 SETs a round, over the keys from the last (the walk reaches them last)
		defer wg.Done()
		val := strings.Repeat("w", max(cfg.Value, 1))
		j := cfg.Keys - 1
		var b []byte
		for !done.Load() {
			b = b[:0]
			for range 16 {
				b = resp.AppendCommand(b, "SET", "snap:"+strconv.Itoa(j), val)
				if j--; j < 0 {
					j = cfg.Keys - 1
				}
			}
			if err := roundTrip(wc, wr, b, 16); err != nil {
				if !done.Load() {
					writeErr = err
				}
				return
			}
			if saving.Load() {
				writes.Add(16)
			}
		}
	}()
	stopAll := func() {
		done.Store(true)
		wc.Close()
		wg.Wait()
	}

	// The reader: GET after GET on a connection of its own.
	pc, pr, err := dial()
	if err != nil {
		stopAll()
		return nil, err
	}
	defer pc.Close()
	get := resp.AppendCommand(nil, "GET", "snap:0")
	base, during := NewHistogram(), NewHistogram()
	probe := func(h *hdrhistogram.Histogram) error {
		t0 := time.Now()
		if err := roundTrip(pc, pr, get, 1); err != nil {
			return err
		}
		record(h, time.Since(t0).Nanoseconds())
		return nil
	}
	for end := time.Now().Add(cfg.Before); time.Now().Before(end); {
		if err := probe(base); err != nil {
			stopAll()
			return nil, fmt.Errorf("snapshot: reader: %w", err)
		}
	}
	res.Baseline = Summarize(base)
	say("reader before the save: %d GETs, p50 %s, p99 %s, max %s", res.Baseline.Count,
		Micros(res.Baseline.P50), Micros(res.Baseline.P99), Micros(res.Baseline.Max))

	before, err := infoLatency(lc, lr)
	if err != nil {
		stopAll()
		return nil, err
	}
	// The SNAPSHOT on the loading connection, read as it comes.
	type saved struct {
		n   int64
		err error
	}
	got := make(chan saved, 1)
	t0 := time.Now()
	saving.Store(true)
	go func() {
		n, err := takeSnapshot(lc, lr, cfg)
		got <- saved{n, err}
	}()
	var sv saved
	for waiting := true; waiting; {
		select {
		case sv = <-got:
			waiting = false
		default:
			if err := probe(during); err != nil {
				stopAll()
				return nil, fmt.Errorf("snapshot: reader: %w", err)
			}
		}
		if ctx.Err() != nil {
			stopAll()
			return nil, ctx.Err()
		}
	}
	res.SaveSecs = time.Since(t0).Seconds()
	saving.Store(false)
	res.Writes = writes.Load()
	stopAll()
	if sv.err != nil {
		return nil, fmt.Errorf("snapshot: SNAPSHOT: %w", sv.err)
	}
	if writeErr != nil && !errors.Is(writeErr, net.ErrClosed) {
		return nil, fmt.Errorf("snapshot: writer: %w", writeErr)
	}
	res.Bytes = sv.n
	res.During = Summarize(during)
	after, err := infoLatency(lc, lr)
	if err != nil {
		return nil, err
	}
	res.TurnsOver = map[string]uint64{}
	for _, k := range []string{"1ms", "10ms", "100ms", "1s"} {
		a, _ := strconv.ParseUint(after["loop_turns_over_"+k], 10, 64)
		b, _ := strconv.ParseUint(before["loop_turns_over_"+k], 10, 64)
		res.TurnsOver[k] = a - b
	}
	res.MaxTurnUS, _ = strconv.ParseInt(after["loop_turn_max_usec"], 10, 64)
	res.MaxTurnBefore, _ = strconv.ParseInt(before["loop_turn_max_usec"], 10, 64)
	return res, nil
}

// fill sets the keys snap:0 ... snap:Keys-1 that DBSIZE says are missing, 1,000 an MSET, 8
// MSETs a write.
func fill(c net.Conn, r *bufio.Reader, cfg SnapshotConfig, res *SnapshotResult, say func(string, ...any)) error {
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(resp.AppendCommand(nil, "DBSIZE")); err != nil {
		return err
	}
	rep, err := readReply(r)
	if err != nil {
		return err
	}
	if rep.Kind == ':' && rep.Int >= int64(cfg.Keys) {
		say("%d keys there already", rep.Int)
		return nil
	}
	t0 := time.Now()
	val := strings.Repeat("v", max(cfg.Value, 1))
	var b []byte
	args := make([]string, 0, 2001)
	for i := 0; i < cfg.Keys; {
		b = b[:0]
		n := 0
		for ; n < 8 && i < cfg.Keys; n++ {
			args = append(args[:0], "MSET")
			for j := 0; j < 1000 && i < cfg.Keys; j, i = j+1, i+1 {
				args = append(args, "snap:"+strconv.Itoa(i), val)
			}
			b = resp.AppendCommand(b, args...)
		}
		if err := roundTrip(c, r, b, n); err != nil {
			return fmt.Errorf("snapshot: filling: %w", err)
		}
		if i%200_000 < 8000 {
			say("%d keys set", i)
		}
	}
	res.FillSecs = time.Since(t0).Seconds()
	say("%d keys set in %.1fs", cfg.Keys, res.FillSecs)
	return nil
}

// takeSnapshot sends SNAPSHOT and reads its bulk string into cfg.Out (or nowhere).
func takeSnapshot(c net.Conn, r *bufio.Reader, cfg SnapshotConfig) (int64, error) {
	_ = c.SetDeadline(time.Now().Add(cfg.Timeout))
	if _, err := c.Write(resp.AppendCommand(nil, "SNAPSHOT")); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return 0, errors.New(line)
	}
	n, err := strconv.ParseInt(line[1:], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("SNAPSHOT answered %q", line)
	}
	w := io.Discard
	if cfg.Out != "" {
		f, err := os.Create(cfg.Out)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		w = f
	}
	if _, err := io.CopyN(w, r, n+2); err != nil {
		return 0, err
	}
	return n, nil
}

// infoLatency returns INFO latency's fields.
func infoLatency(c net.Conn, r *bufio.Reader) (map[string]string, error) {
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(resp.AppendCommand(nil, "INFO", "latency")); err != nil {
		return nil, err
	}
	rep, err := readReply(r)
	if err != nil {
		return nil, err
	}
	if rep.Kind != '$' {
		return nil, fmt.Errorf("INFO latency: %s", rep.Str)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(rep.Str), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

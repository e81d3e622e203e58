package loop

// Issue 30, item 5: what a PUBLISH and an UNSUBSCRIBE cost the loop. One PUBLISH against
// 20,000 patterns on a 100 KB channel held it 6.1 s; UNSUBSCRIBE of 100,000 channels 125 ms.
// Each test is the attack over real TCP while another client measures its PING latency.

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// pinger measures the round trip of PINGs on its own connection until stop is closed.
type pinger struct {
	c    net.Conn
	stop chan struct{}
	done chan []time.Duration
}

func startPinger(t *testing.T, addr string) *pinger {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, replyWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := &pinger{c: c, stop: make(chan struct{}), done: make(chan []time.Duration, 1)}
	ping := []byte("*1\r\n$4\r\nPING\r\n")
	var b [64]byte
	once := func() (time.Duration, bool) {
		start := time.Now()
		_ = c.SetDeadline(start.Add(30 * time.Second))
		if _, err := c.Write(ping); err != nil {
			return 0, false
		}
		got := 0
		for got < len("+PONG\r\n") {
			n, err := c.Read(b[got:])
			if err != nil {
				return 0, false
			}
			got += n
		}
		return time.Since(start), true
	}
	if _, ok := once(); !ok { // connected and served once before the attack
		t.Fatal("first PING")
	}
	go func() {
		var lat []time.Duration
		for {
			select {
			case <-p.stop:
				p.done <- lat
				return
			default:
			}
			d, ok := once()
			if !ok {
				p.done <- lat
				return
			}
			lat = append(lat, d)
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

// end stops the pinger and returns its latencies, sorted (at least one: a PING stuck behind
// the loop counts for as long as it took).
func (p *pinger) end(t *testing.T) []time.Duration {
	t.Helper()
	close(p.stop)
	lat := <-p.done
	if len(lat) == 0 {
		t.Fatal("no PING answered during the attack")
	}
	slices.Sort(lat)
	return lat
}

func pct(lat []time.Duration, q float64) time.Duration { return lat[int(float64(len(lat)-1)*q)] }

// latencyFigures reads INFO latency's counters through rc: the longest turn (µs), the
// turns over 100 ms, the slices yielded.
func latencyFigures(t *testing.T, rc *respClient) (maxTurn, over100ms, yields int64) {
	t.Helper()
	info := string(rc.cmd("INFO", "latency").Str)
	get := func(name string) int64 {
		v, err := strconv.ParseInt(infoLine(info, name), 10, 64)
		if err != nil {
			t.Fatalf("INFO %s: %q", name, info)
		}
		return v
	}
	return get("loop_turn_max_usec"), get("loop_turns_over_100ms"), get("conn_slices_yielded")
}

// replyReader reads many replies fast (respClient.tryReply allocates 64 KB each).
type replyReader struct {
	c         net.Conn
	buf       []byte
	end, used int
}

func newReplyReader(rc *respClient) *replyReader {
	rr := &replyReader{c: rc.c, buf: make([]byte, 1<<20)}
	rr.end = copy(rr.buf, rc.buf)
	rc.buf = rc.buf[:0]
	return rr
}

// next reads one reply within d; it is valid until the next call.
func (rr *replyReader) next(d time.Duration) (resp.Reply, error) {
	copy(rr.buf, rr.buf[rr.used:rr.end])
	rr.end -= rr.used
	rr.used = 0
	deadline := time.Now().Add(d)
	for {
		r, n, err := resp.ParseReply(rr.buf[:rr.end])
		if err != nil {
			return r, err
		}
		if n > 0 {
			rr.used = n
			return r, nil
		}
		if rr.end == len(rr.buf) {
			rr.buf = append(rr.buf, make([]byte, len(rr.buf))...)
		}
		_ = rr.c.SetReadDeadline(deadline)
		m, err := rr.c.Read(rr.buf[rr.end:])
		rr.end += m
		if err != nil && m == 0 {
			return r, err
		}
	}
}

// psubscribeMany subscribes rc to the patterns pats, pipelined, and returns how many it
// accepted (the others are refused with an error).
func psubscribeMany(t *testing.T, rc *respClient, pats []string) (ok int, firstErr string) {
	t.Helper()
	var b []byte
	for i := 0; i < len(pats); i += 500 {
		b = resp.AppendCommand(b, append([]string{"PSUBSCRIBE"}, pats[i:min(i+500, len(pats))]...)...)
	}
	rc.write(b)
	rr := newReplyReader(rc)
	defer func() { rc.buf = append(rc.buf, rr.buf[rr.used:rr.end]...) }()
	for range pats {
		r, err := rr.next(60 * time.Second)
		if err != nil {
			t.Fatalf("PSUBSCRIBE replies: %v", err)
		}
		if r.Kind == '-' {
			if firstErr == "" {
				firstErr = string(r.Str)
			}
			continue
		}
		ok++
	}
	return ok, firstErr
}

// The attack: a connection subscribes to 20,000 patterns and another pipelines 200
// PUBLISHes on a 100 KB channel, while a third client PINGs. The patterns past
// --max-client-patterns and the long channel are refused; the PINGs are answered at once
// throughout. (On 4934cb0 each PUBLISH held the loop seconds: the PUBLISHes were not all
// answered in 20 s, and PING waited seconds.)
func TestPublishManyPatternsLongChannel(t *testing.T) {
	ts := startSlock(t, nil)
	sub := dialResp(t, ts.slockAddr)
	pats := make([]string, 20_000)
	for i := range pats {
		pats[i] = "*" + strconv.Itoa(i) + "*q"
	}
	ok, why := psubscribeMany(t, sub, pats)
	if ok != DefaultMaxClientPatterns || !strings.Contains(why, "max patterns per connection reached (1000, --max-client-patterns)") {
		t.Errorf("subscribed to %d of 20,000 patterns (first error %q), want %d", ok, why, DefaultMaxClientPatterns)
	}
	pub := dialResp(t, ts.slockAddr)
	_, over0, _ := latencyFigures(t, pub)
	p := startPinger(t, ts.slockAddr)
	long := strings.Repeat("a", 100_000)
	var b []byte
	for range 200 {
		b = resp.AppendCommand(b, "PUBLISH", long, "m")
	}
	b = resp.AppendCommand(b, "PUBLISH", long[:1000], "m")
	start := time.Now()
	pub.write(b)
	for i := range 201 {
		r, err := pub.tryReply(time.Until(start.Add(20 * time.Second)))
		if err != nil {
			p.end(t)
			t.Fatalf("PUBLISH %d not answered in 20 s: %v", i, err)
		}
		switch {
		case i < 200 && (r.Kind != '-' || !strings.Contains(string(r.Str), "channel too long (100000 bytes, --max-channel-length 1024)")):
			t.Fatalf("PUBLISH %d of a 100 KB channel: %s", i, showResp(r))
		case i == 200 && (r.Kind != ':' || r.Int != 0):
			t.Fatalf("PUBLISH of a 1000-byte channel: %s", showResp(r))
		}
	}
	took := time.Since(start)
	lat := p.end(t)
	maxTurn, over, _ := latencyFigures(t, pub)
	t.Logf("201 PUBLISHes in %v; PING p50 %v p99 %v max %v (%d PINGs); loop: longest turn %d µs, turns over 100 ms %d",
		took, pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1], len(lat), maxTurn, over-over0)
	// Bounds with room for a loaded machine: the old code's PUBLISH took seconds.
	if pct(lat, 0.5) > 50*time.Millisecond || over-over0 > 1 {
		t.Fatalf("PING latency p50 %v (max %v), %d loop turns over 100 ms, during the PUBLISHes", pct(lat, 0.5), lat[len(lat)-1], over-over0)
	}
}

// Within the bounds, the worst patterns for the matcher: 1,000 patterns of 105 bytes, each
// testing every place of a 1 KB channel, make one PUBLISH about 100 ms of loop time (and a
// second on a loaded machine). A client's PUBLISH goes on across turns: other clients' PINGs are answered within
// a slice or so meanwhile, and the message is delivered once, in order, to each subscriber of
// the pattern that matches and of the channel. (On 4934cb0 each PUBLISH held the loop whole:
// PING waited hundreds of milliseconds.)
func TestPublishAcrossTurns(t *testing.T) {
	ts := startSlock(t, nil)
	run := strings.Repeat("a", 100)
	var subs []*respClient
	for range 1 {
		sub := dialResp(t, ts.slockAddr)
		pats := make([]string, 1000)
		for i := range pats {
			pats[i] = "*" + run + "b" + strconv.Itoa(i)
		}
		if ok, why := psubscribeMany(t, sub, pats); ok != len(pats) {
			t.Fatalf("subscribed to %d of %d patterns: %s", ok, len(pats), why)
		}
		subs = append(subs, sub)
	}
	long := strings.Repeat("a", 1015) + "b999"
	// A subscriber of the channel and of a pattern that matches it.
	hit := dialResp(t, ts.slockAddr)
	hit.send("SUBSCRIBE", long)
	hit.reply()
	hit.send("PSUBSCRIBE", "a*9")
	hit.reply()
	pub := dialResp(t, ts.slockAddr)
	_, _, yields0 := latencyFigures(t, pub)
	p := startPinger(t, ts.slockAddr)
	const n = 2
	var b []byte
	for i := range n {
		b = resp.AppendCommand(b, "PUBLISH", long, "m"+strconv.Itoa(i))
	}
	start := time.Now()
	pub.write(b)
	for i := range n {
		r, err := pub.tryReply(time.Until(start.Add(60 * time.Second)))
		if err != nil || r.Kind != ':' || r.Int != 3 {
			t.Fatalf("PUBLISH %d: %s (%v), want 3 receivers", i, showResp(r), err)
		}
	}
	took := time.Since(start)
	lat := p.end(t)
	maxTurn, _, yields := latencyFigures(t, pub)
	t.Logf("%d PUBLISHes in %v; PING p50 %v p99 %v max %v (%d PINGs); loop: longest turn %d µs, slices yielded %d",
		n, took, pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1], len(lat), maxTurn, yields-yields0)
	for i := range n {
		m := "m" + strconv.Itoa(i)
		for _, want := range [][]string{{"message", long, m}, {"pmessage", "a*9", long, m}} {
			if r := hit.reply(); !slices.Equal(replyStrings(r), want) {
				t.Fatalf("subscriber got %s, want %q", showResp(r), want)
			}
		}
		if r := subs[0].reply(); !slices.Equal(replyStrings(r), []string{"pmessage", "*" + run + "b999", long, m}) {
			t.Fatalf("pattern subscriber got %s", showResp(r))
		}
	}
	// Each PUBLISH is hundreds of milliseconds of loop time: it went on across many slices
	// (on the old code a PUBLISH cannot stop: one slice each), and the PINGs were answered
	// meanwhile (with room for a loaded machine).
	if yields-yields0 < 10*n || pct(lat, 0.5) > 50*time.Millisecond {
		t.Fatalf("%d slices yielded for %d PUBLISHes; PING latency p50 %v (max %v)", yields-yields0, n, pct(lat, 0.5), lat[len(lat)-1])
	}
}

// UNSUBSCRIBE of all of 100,000 channels (125 ms of loop time on 4934cb0, in one turn) ends
// them a step at a time across turns, answering each in order, while a PING client is
// served; the connection's next command comes after it.
func TestUnsubscribeAllAcrossTurns(t *testing.T) {
	ts := startSlock(t, nil)
	sub := dialResp(t, ts.slockAddr)
	const total = 100_000
	var b []byte
	for i := 0; i < total; i += 1000 {
		args := []string{"SUBSCRIBE"}
		for j := i; j < i+1000; j++ {
			args = append(args, "ch:"+strconv.Itoa(j))
		}
		b = resp.AppendCommand(b, args...)
	}
	sub.write(b)
	rr := newReplyReader(sub)
	for i := range total {
		if r, err := rr.next(60 * time.Second); err != nil || r.Kind != '*' || r.Elems[2].Int != int64(i+1) {
			t.Fatalf("SUBSCRIBE reply %d: %s (%v)", i, showResp(r), err)
		}
	}
	other := dialResp(t, ts.slockAddr)
	_, _, yields0 := latencyFigures(t, other)
	p := startPinger(t, ts.slockAddr)
	start := time.Now()
	sub.write(resp.AppendCommand(resp.AppendCommand(nil, "UNSUBSCRIBE"), "PING"))
	seen := make(map[string]bool, total)
	for i := range total {
		r, err := rr.next(60 * time.Second)
		if err != nil || r.Kind != '*' || len(r.Elems) != 3 || string(r.Elems[0].Str) != "unsubscribe" || r.Elems[2].Int != int64(total-1-i) {
			t.Fatalf("UNSUBSCRIBE reply %d: %s (%v)", i, showResp(r), err)
		}
		seen[string(r.Elems[1].Str)] = true
	}
	if r, err := rr.next(replyWait); err != nil || r.Kind != '+' || string(r.Str) != "PONG" {
		t.Fatalf("PING after UNSUBSCRIBE: %s (%v)", showResp(r), err)
	}
	took := time.Since(start)
	lat := p.end(t)
	maxTurn, _, yields := latencyFigures(t, other)
	t.Logf("UNSUBSCRIBE of %d channels in %v; PING p50 %v p99 %v max %v (%d PINGs); loop: longest turn %d µs, slices yielded %d",
		total, took, pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1], len(lat), maxTurn, yields-yields0)
	if len(seen) != total {
		t.Fatalf("%d distinct channels unsubscribed, want %d", len(seen), total)
	}
	if r := other.cmd("PUBLISH", "ch:7", "m"); r.Kind != ':' || r.Int != 0 {
		t.Fatalf("PUBLISH after UNSUBSCRIBE: %s", showResp(r))
	}
	if yields-yields0 < 3 || pct(lat, 0.5) > 50*time.Millisecond {
		t.Fatalf("%d slices yielded during the UNSUBSCRIBE; PING latency p50 %v (max %v)", yields-yields0, pct(lat, 0.5), lat[len(lat)-1])
	}

	// A connection closed with 100,000 channels: they are ended a slice per turn, and
	// meanwhile it receives nothing and counts for nothing.
	sub.write(b)
	for i := range total {
		if r, err := rr.next(60 * time.Second); err != nil || r.Kind != '*' || r.Elems[2].Int != int64(i+1) {
			t.Fatalf("SUBSCRIBE reply %d: %s (%v)", i, showResp(r), err)
		}
	}
	_ = sub.c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := other.cmd("PUBLISH", "ch:7", "m"); r.Kind != ':' || r.Int != 0 {
			t.Fatalf("PUBLISH after the close: %s", showResp(r))
		}
		if r := other.cmd("PUBSUB", "NUMSUB", "ch:99999"); len(r.Elems) != 2 || r.Elems[1].Int != 0 {
			t.Fatalf("PUBSUB NUMSUB after the close: %s", showResp(r))
		}
		if infoLine(string(other.cmd("INFO", "stats").Str), "pubsub_channels") == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's channels are still there after 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PUBLISH inside MULTI runs whole at EXEC: its estimated work (the patterns times the channel's
// bytes) counts against --multi-max-work, so 100 PUBLISHes of a 1000-byte channel against
// 1,000 patterns (about 1 ms each) are refused past 50 ms and EXEC aborts. (On 4934cb0 a
// PUBLISH was estimated as any command and EXEC ran them all.)
func TestPublishInMultiBounded(t *testing.T) {
	ts := startSlock(t, nil)
	sub := dialResp(t, ts.slockAddr)
	pats := make([]string, 1000)
	for i := range pats {
		pats[i] = "*" + strconv.Itoa(i) + "*q"
	}
	if ok, why := psubscribeMany(t, sub, pats); ok != len(pats) {
		t.Fatalf("subscribed to %d of %d patterns: %s", ok, len(pats), why)
	}
	rc := dialResp(t, ts.slockAddr)
	var cmds [][]string
	for range 100 {
		cmds = append(cmds, []string{"PUBLISH", strings.Repeat("c", 1000), "m"})
	}
	got, exec := multi(t, rc, cmds)
	refused := -1
	for i, r := range got {
		if r.Kind == '-' {
			refused = i
			if !strings.Contains(string(r.Str), "--multi-max-work") {
				t.Fatalf("PUBLISH %d: %s", i, showResp(r))
			}
			break
		}
	}
	if refused < 40 || refused > 60 {
		t.Fatalf("100 PUBLISHes against 1,000 patterns in MULTI: first refused at %d", refused)
	}
	if exec.Kind != '-' || !strings.HasPrefix(string(exec.Str), "EXECABORT") {
		t.Fatalf("EXEC: %s", showResp(exec))
	}
}

// The bounds answer Redis-style errors naming their flag, and what they refuse is not
// subscribed; a pattern two connections share counts once in --max-patterns.
func TestPubsubBounds(t *testing.T) {
	ts := startSlock(t, func(c *Config) {
		c.MaxPatterns, c.MaxClientPatterns, c.MaxPatternLen, c.MaxChannelLen = 3, 2, 5, 6
	})
	a := dialRaw(t, ts.slockAddr)
	a.send("PSUBSCRIBE", "abcdef", "a*", "b*", "c*")
	a.expect("-ERR pattern too long (6 bytes, --max-pattern-length 5): not subscribed to 'abcdef'\r\n" +
		subReply("psubscribe", "a*", 1) + subReply("psubscribe", "b*", 2) +
		"-ERR max patterns per connection reached (2, --max-client-patterns): not subscribed to 'c*'\r\n")
	a.send("SUBSCRIBE", "chan123", "chan12")
	a.expect("-ERR channel too long (7 bytes, --max-channel-length 6): not subscribed to 'chan123'\r\n" +
		subReply("subscribe", "chan12", 3))
	b := dialRaw(t, ts.slockAddr)
	b.send("PSUBSCRIBE", "a*", "c*", "d*")
	b.expect(subReply("psubscribe", "a*", 1) + subReply("psubscribe", "c*", 2) +
		"-ERR max patterns per connection reached (2, --max-client-patterns): not subscribed to 'd*'\r\n")
	c := dialRaw(t, ts.slockAddr)
	c.send("PSUBSCRIBE", "d*", "b*")
	c.expect("-ERR max patterns reached (3 distinct patterns of all clients, --max-patterns): not subscribed to 'd*'\r\n" +
		subReply("psubscribe", "b*", 1))
	c.send("PUNSUBSCRIBE", "b*")
	c.expect(subReply("punsubscribe", "b*", 0))
	a.send("PUNSUBSCRIBE", "b*") // b* has no subscriber left: d* fits
	a.expect(subReply("punsubscribe", "b*", 2))
	c.send("PSUBSCRIBE", "d*")
	c.expect(subReply("psubscribe", "d*", 1))
	p := dialRaw(t, ts.slockAddr)
	p.send("PUBLISH", "chan123", "m")
	p.expect("-ERR channel too long (7 bytes, --max-channel-length 6)\r\n")
	p.send("PUBLISH", "chan12", "m")
	p.expect(":2\r\n") // a on the channel, b on c*
}

// replyStrings is an array reply's elements as strings.
func replyStrings(r resp.Reply) []string {
	var out []string
	for _, e := range r.Elems {
		out = append(out, string(e.Str))
	}
	return out
}

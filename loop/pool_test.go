package loop

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lineClient is a PoolCounter client for tests: it writes lines and reads reply lines.
type lineClient struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialPool(t testing.TB, addr string) *lineClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &lineClient{t: t, c: c, r: bufio.NewReader(c)}
}

func (lc *lineClient) send(s string) {
	lc.t.Helper()
	_ = lc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := lc.c.Write([]byte(s)); err != nil {
		lc.t.Fatalf("write %q: %v", s, err)
	}
}

// line reads one reply line, without its "\n".
func (lc *lineClient) line() string {
	lc.t.Helper()
	s, err := lc.tryLine(5 * time.Second)
	if err != nil {
		lc.t.Fatalf("read reply: %v", err)
	}
	return s
}

func (lc *lineClient) tryLine(d time.Duration) (string, error) {
	_ = lc.c.SetReadDeadline(time.Now().Add(d))
	s, err := lc.r.ReadString('\n')
	if err != nil {
		return s, err
	}
	return strings.TrimSuffix(s, "\n"), nil
}

// expect sends a command line and checks the reply line.
func (lc *lineClient) expect(cmd, want string) {
	lc.t.Helper()
	lc.send(cmd + "\n")
	if got := lc.line(); got != want {
		lc.t.Fatalf("%q -> %q, want %q", cmd, got, want)
	}
}

// silent asserts nothing arrives for a short while (a request that waits).
func (lc *lineClient) silent() {
	lc.t.Helper()
	if s, err := lc.tryLine(150 * time.Millisecond); err == nil || s != "" {
		lc.t.Fatalf("expected no reply yet, got %q (%v)", s, err)
	}
}

// stat reads one STATS counter.
func (lc *lineClient) stat(name string) int64 {
	lc.t.Helper()
	lc.send("STATS " + name + "\n")
	got := lc.line()
	v, ok := strings.CutPrefix(got, name+": ")
	if !ok {
		lc.t.Fatalf("STATS %s -> %q", name, got)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		lc.t.Fatalf("STATS %s -> %q", name, got)
	}
	return n
}

func startPool(t *testing.T, mod func(*Config)) (*testServer, string) {
	t.Helper()
	ts := startServer(t, func(c *Config) {
		c.Listeners = append(c.Listeners, Listener{Proto: ProtoPool, Addr: "127.0.0.1:0"})
		if mod != nil {
			mod(c)
		}
	})
	return ts, ts.poolAddr
}

func TestPoolAcquireChecksInOrder(t *testing.T) {
	_, addr := startPool(t, nil)
	a := dialPool(t, addr)
	b := dialPool(t, addr)
	st := dialPool(t, addr)

	// 3: missing key, workers 0, maxqueue 0.
	a.expect("ACQ4ME", "ERROR BAD_COMMAND") // no trailing space: not the command at all
	a.expect("ACQ4ME ", "ERROR BAD_SYNTAX")
	a.expect("ACQ4ME k 0 5 1", "ERROR BAD_SYNTAX")
	a.expect("ACQ4ME k 1 0 1", "ERROR BAD_SYNTAX")
	a.expect("ACQ4ME k x 5 1", "ERROR BAD_SYNTAX") // non-numeric is 0
	// 5: LOCKED while processing < workers.
	a.expect("ACQ4ME k 1 2 1", "LOCKED")
	// 6: timeout 0 answers TIMEOUT at once, nothing queued.
	b.expect("ACQ4ME k 1 2 0", "TIMEOUT")
	// 7: waits.
	b.send("ACQ4ME k 1 2 5\n")
	b.silent()
	// 4: count (1 holder + 1 waiter) >= maxqueue 2.
	st.expect("ACQ4ANY k 1 2 5", "QUEUE_FULL")
	// 5 again: a request with more workers is LOCKED even though b is queued.
	st.expect("ACQ4ANY k 2 3 5", "LOCKED")
	// 2: b's newest entry still waits.
	b.expect("ACQ4ME other 1 1 1", "ERROR WAIT_FOR_RESPONSE")
	// 1: four entries held: LOCK_HELD.
	c := dialPool(t, addr)
	for i := 0; i < 4; i++ {
		c.expect(fmt.Sprintf("ACQ4ANY key%d 1 1 0", i), "LOCKED")
	}
	c.expect("ACQ4ANY key9 1 1 0", "LOCK_HELD")
	if n := st.stat("lock_mismatch"); n != 1 {
		t.Fatalf("lock_mismatch %d", n)
	}
	if n := st.stat("lock_while_waiting"); n != 1 {
		t.Fatalf("lock_while_waiting %d", n)
	}
	if n := st.stat("full_queues"); n != 1 {
		t.Fatalf("full_queues %d", n)
	}
}

func TestPoolReleaseWakesAnyThenMe(t *testing.T) {
	_, addr := startPool(t, nil)
	h := dialPool(t, addr)
	any1, any2, me1, me2 := dialPool(t, addr), dialPool(t, addr), dialPool(t, addr), dialPool(t, addr)
	h.expect("ACQ4ME page 1 10 30", "LOCKED")
	for _, w := range []struct {
		c   *lineClient
		cmd string
	}{{me1, "ACQ4ME"}, {any1, "ACQ4ANY"}, {me2, "ACQ4ME"}, {any2, "ACQ4ANY"}} {
		w.c.send(w.cmd + " page 1 10 30\n")
	}
	me1.silent()
	h.expect("RELEASE", "RELEASED")
	// Every ACQ4ANY waiter gets DONE, the oldest ACQ4ME waiter inherits the slot.
	if got := any1.line(); got != "DONE" {
		t.Fatalf("any1 %q", got)
	}
	if got := any2.line(); got != "DONE" {
		t.Fatalf("any2 %q", got)
	}
	if got := me1.line(); got != "LOCKED" {
		t.Fatalf("me1 %q", got)
	}
	me2.silent()
	// DONE waiters hold nothing: their RELEASE is a mismatch.
	any1.expect("RELEASE", "NOT_LOCKED")
	me1.expect("RELEASE", "RELEASED")
	if got := me2.line(); got != "LOCKED" {
		t.Fatalf("me2 %q", got)
	}
	me2.expect("RELEASE", "RELEASED")
	h.expect("RELEASE", "NOT_LOCKED")
	if n := h.stat("hashtable_entries"); n != 0 {
		t.Fatalf("hashtable_entries %d after everything was released", n)
	}
}

// The waiters' replies are on the wire before the releaser's RELEASED.
func TestPoolDonesGoOutBeforeReleased(t *testing.T) {
	_, addr := startPool(t, nil)
	h, w := dialPool(t, addr), dialPool(t, addr)
	h.expect("ACQ4ANY x 1 5 10", "LOCKED")
	w.send("ACQ4ANY x 1 5 10\n")
	w.silent()
	h.send("RELEASE\n")
	got := make(chan string, 1)
	go func() { s, _ := w.tryLine(5 * time.Second); got <- s }()
	if r := h.line(); r != "RELEASED" {
		t.Fatal(r)
	}
	if s := <-got; s != "DONE" {
		t.Fatalf("waiter got %q", s)
	}
}

func TestPoolHolderDisconnectHandsOver(t *testing.T) {
	_, addr := startPool(t, nil)
	h := dialPool(t, addr)
	anyW, meW := dialPool(t, addr), dialPool(t, addr)
	h.expect("ACQ4ME k 1 5 30", "LOCKED")
	anyW.send("ACQ4ANY k 1 5 30\n")
	meW.send("ACQ4ME k 1 5 30\n")
	anyW.silent()
	_ = h.c.Close()
	// No DONEs on a disconnect: the oldest ACQ4ME waiter is LOCKED.
	if got := meW.line(); got != "LOCKED" {
		t.Fatalf("me waiter %q", got)
	}
	anyW.silent()
	// Only ACQ4ANY waiters left: the oldest of them is LOCKED when the holder goes.
	_ = meW.c.Close()
	if got := anyW.line(); got != "LOCKED" {
		t.Fatalf("any waiter %q", got)
	}
	anyW.expect("RELEASE", "RELEASED")
}

func TestPoolWaiterDisconnectAndTimeout(t *testing.T) {
	_, addr := startPool(t, nil)
	h, gone, w := dialPool(t, addr), dialPool(t, addr), dialPool(t, addr)
	h.expect("ACQ4ME k 1 5 30", "LOCKED")
	gone.send("ACQ4ME k 1 5 30\n")
	gone.silent()
	_ = gone.c.Close() // silently removed
	start := time.Now()
	w.send("ACQ4ME k 1 5 1\n")
	// The waiter sends STATS while it waits: it is answered, and the wait still times out.
	w.send("STATS waiting_workers\n")
	if got := w.line(); got != "waiting_workers: 1" {
		t.Fatalf("stats while waiting: %q", got)
	}
	if got := w.line(); got != "TIMEOUT" {
		t.Fatalf("waiter got %q", got)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("timed out after %v, want 1 s", el)
	}
	// The timed-out waiter holds nothing; the holder still does.
	w.expect("RELEASE", "NOT_LOCKED")
	if n := h.stat("waiting_workers"); n != 0 {
		t.Fatalf("waiting_workers %d", n)
	}
	if n := h.stat("processing_workers"); n != 1 {
		t.Fatalf("processing_workers %d", n)
	}
	h.expect("RELEASE", "RELEASED")
}

func TestPoolReleaseWhileWaitingWakesNobody(t *testing.T) {
	_, addr := startPool(t, nil)
	h, w, other := dialPool(t, addr), dialPool(t, addr), dialPool(t, addr)
	h.expect("ACQ4ANY k 1 5 30", "LOCKED")
	other.send("ACQ4ANY k 1 5 30\n")
	w.send("ACQ4ANY k 1 5 30\n")
	w.silent()
	w.expect("RELEASE", "RELEASED") // cancels w's wait
	other.silent()                  // nobody woken
	w.silent()
	if n := h.stat("waiting_workers"); n != 1 {
		t.Fatalf("waiting_workers %d, want 1 (the gauge must not leak)", n)
	}
	h.expect("RELEASE", "RELEASED")
	if got := other.line(); got != "DONE" {
		t.Fatalf("other %q", got)
	}
}

func TestPoolReleaseIsLIFO(t *testing.T) {
	_, addr := startPool(t, nil)
	a, b := dialPool(t, addr), dialPool(t, addr)
	a.expect("ACQ4ME first 1 5 0", "LOCKED")
	a.expect("ACQ4ME second 1 5 0", "LOCKED")
	a.expect("RELEASE first", "RELEASED") // the key after RELEASE is ignored: "second" goes
	b.expect("ACQ4ME second 1 5 0", "LOCKED")
	b.expect("ACQ4ME first 1 5 0", "TIMEOUT")
	a.expect("RELEASE", "RELEASED")
	b.expect("ACQ4ME first 1 5 0", "LOCKED")
	a.expect("RELEASE", "NOT_LOCKED")
}

// Limits are per request: the key keeps only its count and holders.
func TestPoolPerRequestLimits(t *testing.T) {
	_, addr := startPool(t, nil)
	c := make([]*lineClient, 5)
	for i := range c {
		c[i] = dialPool(t, addr)
	}
	c[0].expect("ACQ4ME k 1 10 0", "LOCKED")
	c[1].expect("ACQ4ME k 1 10 0", "TIMEOUT")
	c[1].expect("ACQ4ME k 3 10 0", "LOCKED")
	c[2].expect("ACQ4ME k 3 10 0", "LOCKED")
	c[3].expect("ACQ4ME k 3 10 0", "TIMEOUT")
	c[3].expect("ACQ4ME k 5 3 0", "QUEUE_FULL") // count 3 >= maxqueue 3
	c[3].expect("ACQ4ME k 5 4 0", "LOCKED")
	// One connection may hold several entries on the same key.
	c[4].expect("ACQ4ANY k 10 10 0", "LOCKED")
	c[4].expect("ACQ4ANY k 10 10 0", "LOCKED")
	if n := c[0].stat("processing_workers"); n != 6 {
		t.Fatalf("processing_workers %d", n)
	}
}

func TestPoolPipelinedSplitAndLongLines(t *testing.T) {
	_, addr := startPool(t, func(c *Config) { c.PoolMaxLine = 64 })
	a := dialPool(t, addr)
	a.send("ACQ4ME p 1 1 0\r\nSTATS processing_workers\nRELEASE\nbogus\n\nRELEASE\n")
	for _, want := range []string{"LOCKED", "processing_workers: 1", "RELEASED", "ERROR BAD_COMMAND", "ERROR BAD_COMMAND", "NOT_LOCKED"} {
		if got := a.line(); got != want {
			t.Fatalf("pipelined: %q, want %q", got, want)
		}
	}
	line := "ACQ4ANY split-key 1 1 0\n"
	for i := range line {
		a.send(line[i : i+1])
		time.Sleep(time.Millisecond)
	}
	if got := a.line(); got != "LOCKED" {
		t.Fatalf("split line: %q", got)
	}
	// A line over the limit (64): LINE_TOO_LONG, then the connection is closed and releases.
	a.send("ACQ4ME " + strings.Repeat("k", 100))
	if got := a.line(); got != "ERROR LINE_TOO_LONG" {
		t.Fatalf("long line: %q", got)
	}
	if _, err := a.tryLine(5 * time.Second); err == nil {
		t.Fatal("connection not closed after a long line")
	}
	b := dialPool(t, addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.send("ACQ4ANY split-key 1 1 0\n")
		if b.line() == "LOCKED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closed connection's lock not released")
		}
	}
	ok := dialPool(t, addr)
	ok.expect("ACQ4ME "+strings.Repeat("k", 64-len("ACQ4ME  1 1 0"))+" 1 1 0", "LOCKED") // exactly 64: fine
}

func TestPoolStatsCounters(t *testing.T) {
	_, addr := startPool(t, nil)
	a, b, w := dialPool(t, addr), dialPool(t, addr), dialPool(t, addr)
	a.expect("ACQ4ME s 1 3 0", "LOCKED")   // total_acquired 1
	b.expect("ACQ4ANY s 1 3 0", "TIMEOUT") // nothing counted but the timeout
	w.send("ACQ4ANY s 1 3 10\n")
	w.silent()
	a.expect("RELEASE", "RELEASED") // total_releases 1, processed 1, w DONE
	if got := w.line(); got != "DONE" {
		t.Fatal(got)
	}
	b.expect("RELEASE", "NOT_LOCKED") // release_mismatch 1
	b.expect("STATS NOPE", "ERROR WRONG_STAT")
	want := map[string]int64{"total_acquired": 1, "total_releases": 1, "processed_count": 1,
		"release_mismatch": 1, "hashtable_entries": 0, "processing_workers": 0, "waiting_workers": 0,
		"full_queues": 0, "lock_mismatch": 0, "lock_while_waiting": 0}
	for k, v := range want {
		if n := a.stat(k); n != v {
			t.Errorf("%s = %d, want %d", k, n, v)
		}
	}
	a.send("STATS FULL\n")
	var lines []string
	for {
		l := a.line()
		if l == "" {
			break
		}
		lines = append(lines, l)
	}
	if len(lines) != 21 || !strings.HasPrefix(lines[0], "uptime: ") || lines[20] != "processed_count: 1" {
		t.Fatalf("STATS FULL:\n%s", strings.Join(lines, "\n"))
	}
	a.send("stats uptime\n")
	if l := a.line(); l != "ERROR BAD_COMMAND" {
		t.Fatalf("lower-case command: %q", l)
	}
	a.send("STATS uptime\n")
	if l := a.line(); !strings.HasPrefix(l, "uptime: 0 days, 0h 0m ") {
		t.Fatalf("STATS uptime: %q", l)
	}
}

// 200,000 distinct keys held at once, none granted twice.
func TestPoolManyKeysNeverGrantedTwice(t *testing.T) {
	const conns, per = 50, 4000
	_, addr := startPool(t, func(c *Config) { c.PoolMaxEntries = per })
	holders := make([]*lineClient, conns)
	for i := range holders {
		holders[i] = dialPool(t, addr)
	}
	lines := func(prefix string, i int, cmd string) []byte {
		var b []byte
		for k := 0; k < per; k++ {
			b = fmt.Appendf(b, "%s key-%d-%d 1 2 0\n", cmd, i, k)
		}
		return b
	}
	for i, h := range holders {
		h.send(string(lines("", i, "ACQ4ME")))
	}
	for i, h := range holders {
		for k := 0; k < per; k++ {
			if got := h.line(); got != "LOCKED" {
				t.Fatalf("holder %d key %d: %q", i, k, got)
			}
		}
	}
	st := dialPool(t, addr)
	if n := st.stat("hashtable_entries"); n != conns*per {
		t.Fatalf("hashtable_entries %d", n)
	}
	// Another client asking for every key gets TIMEOUT each time: none is granted twice.
	other := dialPool(t, addr)
	for i := 0; i < conns; i++ {
		other.send(string(lines("", i, "ACQ4ANY")))
		for k := 0; k < per; k++ {
			if got := other.line(); got != "TIMEOUT" {
				t.Fatalf("key-%d-%d granted twice: %q", i, k, got)
			}
		}
	}
	if n := st.stat("processing_workers"); n != conns*per {
		t.Fatalf("processing_workers %d", n)
	}
}

// TestPoolStatsKeys: STATS KEYS, a tallyd extension, lists the live keys busiest first
// (most waiting, then most held), with the limits of each key's latest acquire, and an
// empty line after them.
func TestPoolStatsKeys(t *testing.T) {
	_, addr := startPool(t, nil)
	a, b, c, d := dialPool(t, addr), dialPool(t, addr), dialPool(t, addr), dialPool(t, addr)
	a.expect("ACQ4ME enwiki:page:A 1 5 30", "LOCKED")
	b.send("ACQ4ME enwiki:page:A 1 5 30\n") // waits
	c.expect("ACQ4ANY other 2 10 30", "LOCKED")
	d.expect("ACQ4ME gone 1 1 30", "LOCKED")
	d.expect("RELEASE", "RELEASED") // no longer live
	d.send("STATS keys\n")
	for _, want := range []string{
		"enwiki:page:A: processing 1 workers 1 waiting 1 maxqueue 5",
		"other: processing 1 workers 2 waiting 0 maxqueue 10",
		"",
	} {
		if got := d.line(); got != want {
			t.Fatalf("STATS KEYS line %q, want %q", got, want)
		}
	}
	d.expect("STATS KEYZ", "ERROR WRONG_STAT")
}

// The stampede's shape (issue 25): two workers on a hot key and a queue behind them. Each
// RELEASE hands its slot to the oldest ACQ4ME waiter, in the order they queued (FIFO, as
// poolcounterd's for_them list does), and the LOCKED is on the wire by the time the
// releaser reads its RELEASED; a full queue answers QUEUE_FULL at once.
func TestPoolStampedeGrantsInArrivalOrder(t *testing.T) {
	_, addr := startPool(t, nil)
	const workers, waiters = 2, 12
	const acq = "ACQ4ME hot 2 14 5"
	st := dialPool(t, addr)
	holders := []*lineClient{dialPool(t, addr), dialPool(t, addr)}
	for _, h := range holders {
		h.expect(acq, "LOCKED")
	}
	queue := make([]*lineClient, waiters)
	for i := range queue {
		queue[i] = dialPool(t, addr)
		queue[i].send(acq + "\n")
		// Queued before the next one asks: arrival order is the test's order.
		for deadline := time.Now().Add(5 * time.Second); st.stat("waiting_workers") != int64(i+1); {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	dialPool(t, addr).expect(acq, "QUEUE_FULL") // 2 held + 12 waiting = maxqueue 14
	for i, w := range queue {
		h := holders[i%workers]
		h.expect("RELEASE", "RELEASED")
		if s, err := w.tryLine(time.Second); s != "LOCKED" {
			t.Fatalf("RELEASE %d: waiter %d got %q (%v), want LOCKED: grants out of arrival order", i, i, s, err)
		}
		for _, later := range queue[i+1:] {
			if later.r.Buffered() > 0 {
				t.Fatalf("RELEASE %d: a later waiter was answered too", i)
			}
		}
		holders[i%workers] = w
	}
	for _, h := range holders {
		h.expect("RELEASE", "RELEASED")
	}
	if n := st.stat("waiting_workers"); n != 0 {
		t.Fatalf("waiting_workers %d at the end", n)
	}
}

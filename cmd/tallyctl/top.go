package main

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "top", args: "", nargs: [2]int{0, 0},
		summary: "a live view of counters, locks, connections and rates; q quits",
		help: `Refreshes every --interval from every protocol at once: counter Dump and Stats,
semaphore Stats, PoolCounter STATS FULL, slock INFO and CALL LIST_LOCK (with LIST_LOCKED
and LIST_WAIT for the busiest keys). Rates are the change between two refreshes.

The header has one line per protocol: connections (not counting top's own), acquire
and release requests per second (counter and semaphore Acquire/Release, PoolCounter
LOCKED/RELEASED, slock lock/unlock counts; what a closing connection gives back is not
a request and is not counted), objects (counters, semaphores, pool keys, slock keys)
and gauges. A protocol whose port cannot be reached says so and is retried each refresh.

COUNTERS lists counters busiest first (highest current consumption, then most acquires
per second). yrmcds does not keep a counter's maximum (each Acquire brings its own), so
LOAD is the current consumption as a share of the interval's peak: 100 % means the
counter is at the highest it has been this interval. ACQ/S is the Acquires the counter
granted per second (tallyd counts them; against yrmcds it is "-"): acquire+release pairs
show there even when they leave CHANGE/S, the change of the consumption, at +0.0.
LOCKS lists locked slock keys fullest first: keys with waiters, then by holders as a
share of what the key admits (the first holder's count).
VALUES lists the keys with a durable value (SET, INCR, HSET, ... on the slock port) by
name: the server keeps each as a lock that never expires, but it is data, not a lock, so
it is neither in LOCKS nor in the slock line's "locked" count.
Red marks 100 % (and keys with waiters), yellow 80 % or more.

Keys: q, Esc or Ctrl-C quit. Works in any terminal tcell knows (over ssh too); no
mouse. --once prints one screen as plain text instead (two readings --interval apart,
for the rates).`,
		setup: func(fs *pflag.FlagSet) func(*app, []string) error {
			interval := fs.Duration("interval", time.Second, "time between refreshes")
			once := fs.Bool("once", false, "print one screen as text and exit (no terminal needed)")
			width := fs.Int("width", 120, "columns of the --once screen")
			return func(a *app, args []string) error {
				if *interval < 100*time.Millisecond {
					return &usageError{msg: fmt.Sprintf("--interval %v is below 100ms", *interval)}
				}
				if *once {
					return a.topOnce(*interval, *width)
				}
				return a.top(*interval)
			}
		}})
}

// seg is a run of text in one style; a screen is lines of segs.
type seg struct {
	text string
	st   tcell.Style
}

type line []seg

var (
	stPlain  = tcell.StyleDefault
	stBold   = tcell.StyleDefault.Bold(true)
	stTitle  = tcell.StyleDefault.Reverse(true).Bold(true)
	stRed    = tcell.StyleDefault.Foreground(tcell.ColorRed).Bold(true)
	stYellow = tcell.StyleDefault.Foreground(tcell.ColorYellow)
	stDim    = tcell.StyleDefault.Dim(true)
)

// fit cuts or pads s to exactly w columns (cut with "…").
func fit(s string, w int, right bool) string {
	n := utf8.RuneCountInString(s)
	if n > w {
		if w <= 0 {
			return ""
		}
		r := []rune(s)
		return string(r[:w-1]) + "…"
	}
	pad := strings.Repeat(" ", w-n)
	if right {
		return pad + s
	}
	return s + pad
}

// rate is the change of a cumulative count per second between two
// readings, "-" when either is unknown.
func rate(cur, prev int64, dt float64) string {
	if cur < 0 || prev < 0 || dt <= 0 || cur < prev {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(cur-prev)/dt)
}

func num(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// loadStyle colours a load: red at 100 %, yellow from 80 %.
func loadStyle(load float64) tcell.Style {
	switch {
	case load >= 1:
		return stRed
	case load >= 0.8:
		return stYellow
	}
	return stPlain
}

// render lays out the screen for cur (prev, if any, for rates) in w × h
// cells; h <= 0 means as many lines as it takes.
func render(cur, prev *snapshot, w, h int, host string, interval time.Duration) []line {
	title := fmt.Sprintf(" tallyctl top — tallyd at %s   every %v", host, interval)
	when := "connecting…"
	if cur != nil {
		when = cur.at.Format("15:04:05")
	}
	right := when + "   q quits "
	out := []line{{{fit(title, w-utf8.RuneCountInString(right), false) + right, stTitle}}, {}}
	if cur == nil {
		return out
	}
	dt := 0.0
	if prev != nil {
		dt = cur.at.Sub(prev.at).Seconds()
	}

	// One line per protocol.
	const pw = 10
	out = append(out, line{{fmt.Sprintf("%-*s %6s %6s %9s %9s %8s  %s", pw, "PROTOCOL", "PORT", "CONNS", "ACQ/S", "REL/S", "OBJECTS", "DETAIL"), stBold}})
	for i, p := range cur.protos {
		head := fmt.Sprintf("%-*s %6d ", pw, p.name, p.port)
		if p.err != nil {
			var ae *authError
			text, st := "unreachable: "+p.err.Error(), stRed
			switch {
			case p.off:
				text, st = "off (nothing listens here; tallyd serves its other ports)", stDim
			case errors.As(p.err, &ae):
				text = "auth failed: " + p.err.Error()
			}
			out = append(out, line{{head, stPlain}, {fit(text, w-len(head), false), st}})
			continue
		}
		var pp *protoSnap
		if prev != nil && prev.protos[i].err == nil {
			pp = &prev.protos[i]
		}
		acq, rel := "-", "-"
		if pp != nil {
			acq, rel = rate(p.acquires, pp.acquires, dt), rate(p.releases, pp.releases, dt)
		}
		l := line{{head + fmt.Sprintf("%6s %9s %9s %8s  ", num(p.conns), acq, rel, num(p.objects)), stPlain}}
		for _, e := range p.extra {
			st := stPlain
			if e.name == "waiting" && e.v > 0 {
				st = stYellow
			}
			l = append(l, seg{fmt.Sprintf("%s %s  ", e.name, num(e.v)), st})
		}
		if p.full >= 0 {
			fr, st := "-", stPlain
			if pp != nil {
				fr = rate(p.full, pp.full, dt)
				if p.full > pp.full {
					st = stRed
				}
			}
			l = append(l, seg{"full_queues/s " + fr, st})
		}
		out = append(out, l)
	}
	out = append(out, line{})

	// The lists share the rest of the screen.
	type prevCounter struct {
		current     uint32
		acquired    uint64
		hasAcquired bool
	}
	prevCtr := map[string]prevCounter{}
	if prev != nil {
		for _, c := range prev.counters {
			prevCtr[c.Name] = prevCounter{c.Current, c.Acquired, c.HasAcquired}
		}
	}
	// acqRate is a counter's Acquires per second since the previous reading, -1 unknown.
	acqRate := func(c dumpEntry) float64 {
		p, ok := prevCtr[c.Name]
		if !ok || !c.HasAcquired || !p.hasAcquired || dt <= 0 || c.Acquired < p.acquired {
			return -1
		}
		return float64(c.Acquired-p.acquired) / dt
	}
	counters := append([]dumpEntry(nil), cur.counters...)
	sortStable(counters, func(x, y dumpEntry) bool {
		if x.Current != y.Current {
			return x.Current > y.Current
		}
		if rx, ry := acqRate(x), acqRate(y); rx != ry {
			return rx > ry
		}
		if x.Peak != y.Peak {
			return x.Peak > y.Peak
		}
		return x.Name < y.Name
	})
	rows := []int{max(len(counters), 1), max(len(cur.pools), 1), max(len(cur.locks), 1), max(len(cur.values), 1)}
	if h > 0 {
		rows = share(rows, max(h-len(out)-11, 4)) // four titles, four column headers, three blank lines
	}
	cRows, pRows, lRows, vRows := rows[0], rows[1], rows[2], rows[3]

	inUse := 0
	for _, c := range counters {
		if c.Current > 0 {
			inUse++
		}
	}
	out = append(out, line{{fmt.Sprintf("COUNTERS  %d, %d in use — busiest first; LOAD = current / peak of this interval", len(counters), inUse), stBold}})
	nameW := min(max(w-48, 8), 50)
	out = append(out, line{{fmt.Sprintf("%s %9s %9s %6s %9s %9s", fit("NAME", nameW, false), "CURRENT", "PEAK", "LOAD", "ACQ/S", "CHANGE/S"), stBold}})
	switch {
	case cur.protos[pCounter].err != nil:
		out = append(out, line{{cur.protos[pCounter].note("counter"), stDim}})
	case len(counters) == 0:
		out = append(out, line{{"(no counters)", stDim}})
	}
	for i, c := range counters {
		if i == cRows-1 && len(counters) > cRows {
			out = append(out, line{{fmt.Sprintf("… and %d more", len(counters)-i), stDim}})
			break
		}
		load := 0.0
		if c.Peak > 0 {
			load = float64(c.Current) / float64(c.Peak)
		}
		st := loadStyle(load)
		if c.Current == 0 {
			st = stDim
		}
		change, acq := "-", "-"
		if p, ok := prevCtr[c.Name]; ok && dt > 0 {
			change = fmt.Sprintf("%+.1f", (float64(c.Current)-float64(p.current))/dt)
		}
		if r := acqRate(c); r >= 0 {
			acq = fmt.Sprintf("%.1f", r)
			if c.Current == 0 && r > 0 {
				st = stPlain // idle now, but busy
			}
		}
		out = append(out, line{{fmt.Sprintf("%s %9d %9d %5.0f%% %9s %9s", fit(show([]byte(c.Name)), nameW, false), c.Current, c.Peak, 100*load, acq, change), st}})
	}
	out = append(out, line{})

	out = append(out, poolLines(cur, w, pRows)...)
	out = append(out, line{})

	waiting := 0
	for _, l := range cur.locks {
		if l.waiting > 0 {
			waiting++
		}
	}
	out = append(out, line{{fmt.Sprintf("LOCKS  %d keys locked, %d with waiters — fullest first", cur.lockTotal, waiting), stBold}})
	keyW := min(max(w-44, 8), 44)
	out = append(out, line{{fmt.Sprintf("%4s  %s %8s %6s %8s %6s", "DB", fit("KEY", keyW, false), "HOLDERS", "MAX", "WAITING", "LOAD"), stBold}})
	switch {
	case cur.protos[pSlock].err != nil:
		out = append(out, line{{cur.protos[pSlock].note("slock"), stDim}})
	case len(cur.locks) == 0:
		out = append(out, line{{"(no locked keys)", stDim}})
	}
	for i, l := range cur.locks {
		if i == lRows-1 && len(cur.locks) > lRows {
			out = append(out, line{{fmt.Sprintf("… and %d more", len(cur.locks)-i), stDim}})
			break
		}
		holders, maxs, waits, loadS := "-", "-", "-", "-"
		st := stPlain
		if i < maxLockDetails {
			holders, waits = fmt.Sprint(l.holders), fmt.Sprint(l.waiting)
			if l.max > 0 {
				maxs = fmt.Sprint(l.max)
				loadS = fmt.Sprintf("%5.0f%%", 100*lockLoad(l))
				st = loadStyle(lockLoad(l))
			}
			if l.waiting > 0 {
				st = stRed
			}
		}
		out = append(out, line{{fmt.Sprintf("%4d  %s %8s %6s %8s %6s", l.db, fit(keyText(l.key), keyW, false), holders, maxs, waits, loadS), st}})
	}
	out = append(out, line{})
	return append(out, valueLines(cur, w, vRows)...)
}

// valueLines renders the VALUES list: slock keys with a durable value, by name.
func valueLines(cur *snapshot, w, rows int) []line {
	keyW := min(max(w-48, 8), 44)
	out := []line{
		{{fmt.Sprintf("VALUES  %d keys with a durable value — data, not locks", len(cur.values)), stBold}},
		{{fmt.Sprintf("%4s  %s  %s", "DB", fit("KEY", keyW, false), "VALUE"), stBold}},
	}
	switch {
	case cur.protos[pSlock].err != nil:
		return append(out, line{{cur.protos[pSlock].note("slock"), stDim}})
	case len(cur.values) == 0:
		return append(out, line{{"(no values)", stDim}})
	}
	for i, v := range cur.values {
		if i == rows-1 && len(cur.values) > rows {
			return append(out, line{{fmt.Sprintf("… and %d more", len(cur.values)-i), stDim}})
		}
		head := fmt.Sprintf("%4d  %s  ", v.db, fit(v.name, keyW, false))
		out = append(out, line{{head + fit(v.value, max(w-len([]rune(head)), 8), false), stPlain}})
	}
	return out
}

// text is a screen without its styles.
func (l line) text() string {
	var b strings.Builder
	for _, s := range l {
		b.WriteString(s.text)
	}
	return strings.TrimRight(b.String(), " ")
}

func (a *app) topOnce(interval time.Duration, width int) error {
	col := &collector{a: a}
	defer col.close()
	prev := col.collect()
	time.Sleep(interval)
	cur := col.collect()
	for _, l := range render(cur, prev, width, 0, a.host, interval) {
		fmt.Fprintln(a.stdout, l.text())
	}
	if !cur.answered() {
		return fmt.Errorf("no port of tallyd at %s answered (--host and the --*-port flags say where it is)", a.host)
	}
	return nil
}

func (a *app) top(interval time.Duration) error {
	scr, err := tcell.NewScreen()
	if err == nil {
		err = scr.Init()
	}
	if err != nil {
		return fmt.Errorf("cannot use this terminal (%v); 'tallyctl top --once' prints one screen as text", err)
	}
	defer scr.Fini()
	scr.HideCursor()

	quit := make(chan struct{})
	defer close(quit)
	snaps := make(chan *snapshot)
	go func() {
		col := &collector{a: a}
		defer col.close()
		next := time.Now()
		for {
			s := col.collect()
			select {
			case snaps <- s:
			case <-quit:
				return
			}
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-quit:
					return
				}
			} else {
				next = time.Now()
			}
		}
	}()
	events := make(chan tcell.Event, 16)
	go scr.ChannelEvents(events, quit)
	sig, stop := a.interrupt()
	defer stop()

	var cur, prev *snapshot
	draw := func() {
		scr.Clear()
		w, h := scr.Size()
		for y, l := range render(cur, prev, w, h, a.host, interval) {
			if y >= h {
				break
			}
			x := 0
			for _, s := range l {
				for _, r := range s.text {
					if x >= w {
						break
					}
					scr.SetContent(x, y, r, nil, s.st)
					x++
				}
			}
			if len(l) > 0 && l[0].st == stTitle {
				for ; x < w; x++ {
					scr.SetContent(x, y, ' ', nil, stTitle)
				}
			}
		}
		scr.Show()
	}
	draw()
	for {
		select {
		case ev := <-events:
			switch ev := ev.(type) {
			case *tcell.EventKey:
				if ev.Key() == tcell.KeyCtrlC || ev.Key() == tcell.KeyEscape ||
					ev.Key() == tcell.KeyRune && (ev.Rune() == 'q' || ev.Rune() == 'Q') {
					return nil
				}
			case *tcell.EventResize:
				scr.Sync()
				draw()
			}
		case s := <-snaps:
			prev, cur = cur, s
			draw()
		case <-sig:
			return nil
		}
	}
}

// share divides n screen rows among lists that need need[i] rows each: every list gets
// up to an equal part, and what one does not use goes to the others in order.
func share(need []int, n int) []int {
	got := make([]int, len(need))
	left := n
	for pass := 0; pass < 2 && left > 0; pass++ {
		for i := range need {
			part := need[i] - got[i]
			if pass == 0 {
				part = min(part, max(n/len(need), 1))
			}
			part = min(part, left)
			got[i] += part
			left -= part
		}
	}
	for i := range got {
		got[i] = max(got[i], 1)
	}
	return got
}

// poolLines renders the POOLS list: live PoolCounter keys, those with waiters first.
func poolLines(cur *snapshot, w, rows int) []line {
	waiting := 0
	for _, p := range cur.pools {
		if p.waiting > 0 {
			waiting++
		}
	}
	keyW := min(max(w-48, 8), 44)
	out := []line{
		{{fmt.Sprintf("POOLS  %d live keys, %d with waiters — fullest first; LOAD = holding / workers", len(cur.pools), waiting), stBold}},
		{{fmt.Sprintf("%s %8s %8s %8s %9s %6s", fit("KEY", keyW, false), "HOLDING", "WORKERS", "WAITING", "MAXQUEUE", "LOAD"), stBold}},
	}
	switch {
	case cur.protos[pPool].err != nil:
		return append(out, line{{cur.protos[pPool].note("PoolCounter"), stDim}})
	case cur.pools == nil:
		return append(out, line{{"(the server does not list keys: STATS KEYS is a tallyd extension)", stDim}})
	case len(cur.pools) == 0:
		return append(out, line{{"(no live keys)", stDim}})
	}
	for i, p := range cur.pools {
		if i == rows-1 && len(cur.pools) > rows {
			return append(out, line{{fmt.Sprintf("… and %d more", len(cur.pools)-i), stDim}})
		}
		load := 0.0
		if p.workers > 0 {
			load = float64(p.processing) / float64(p.workers)
		}
		st := loadStyle(load)
		if p.waiting > 0 {
			st = stRed
		}
		out = append(out, line{{fmt.Sprintf("%s %8d %8d %8d %9d %5.0f%%", fit(show([]byte(p.name)), keyW, false),
			p.processing, p.workers, p.waiting, p.maxqueue, 100*load), st}})
	}
	return out
}

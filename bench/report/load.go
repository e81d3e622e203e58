package report

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// LoadAvg is the machine's load average over 1, 5 and 15 minutes, as /proc/loadavg has it.
type LoadAvg [3]float64

// ReadLoad reads the load average now, or nil where /proc/loadavg cannot be read.
func ReadLoad() *LoadAvg {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	l, err := parseLoad(string(b))
	if err != nil {
		return nil
	}
	return &l
}

// parseLoad reads the first three fields of /proc/loadavg ("0.52 0.40 0.33 1/123 4567").
func parseLoad(s string) (LoadAvg, error) {
	var l LoadAvg
	f := strings.Fields(s)
	if len(f) < 3 {
		return l, fmt.Errorf("load average %q: want three numbers", s)
	}
	for i := range l {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 {
			return l, fmt.Errorf("load average %q: field %d is not a number", s, i+1)
		}
		l[i] = v
	}
	return l, nil
}

func (l LoadAvg) String() string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// Busy says why the figures may be low because something else loaded the machine: the
// 1-minute load at the start above half the cores, or a rise during the run of more than
// the cores (the suite itself keeps about one thread busy on each core it pins). None
// when the loads are unknown.
func (r *Report) Busy() []string {
	cores := r.Machine.Cores
	if cores < 1 {
		cores = 1
	}
	var why []string
	if s := r.LoadStart; s != nil && s[0] > float64(cores)/2 {
		why = append(why, fmt.Sprintf("the 1-minute load average was %.2f at the start, above half the %d cores", s[0], cores))
	}
	if s, e := r.LoadStart, r.LoadEnd; s != nil && e != nil && e[0]-s[0] > float64(cores) {
		why = append(why, fmt.Sprintf("the 1-minute load average rose from %.2f to %.2f during the run, more than the %d cores the suite can account for", s[0], e[0], cores))
	}
	return why
}

// loadMarkdown writes the load averages and, if the machine was busy, a warning.
func (r *Report) loadMarkdown(w io.Writer) {
	if r.LoadStart == nil && r.LoadEnd == nil {
		return
	}
	show := func(l *LoadAvg) string {
		if l == nil {
			return "unknown"
		}
		return l.String()
	}
	fmt.Fprintf(w, "Load average (1, 5, 15 minutes): %s at the start, %s at the end.\n", show(r.LoadStart), show(r.LoadEnd))
	if why := r.Busy(); len(why) > 0 {
		fmt.Fprintf(w, "**Warning: the machine was busy**, so the figures may be low: %s.\n", strings.Join(why, "; "))
	}
}

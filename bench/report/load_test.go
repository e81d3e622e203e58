package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseLoad(t *testing.T) {
	l, err := parseLoad("0.52 1.40 10.33 2/345 6789\n")
	if err != nil || l != (LoadAvg{0.52, 1.40, 10.33}) || l.String() != "0.52 1.40 10.33" {
		t.Errorf("parseLoad: %v %v", l, err)
	}
	for _, bad := range []string{"", "0.5 0.4", "x 0.4 0.3 1/2 3", "0.5 -1 0.3"} {
		if _, err := parseLoad(bad); err == nil {
			t.Errorf("parseLoad(%q) accepted", bad)
		}
	}
	if l := ReadLoad(); l == nil {
		t.Skip("no /proc/loadavg here")
	}
}

// The report warns when the machine was busy at the start (1-minute load above half the
// cores) or the load rose during the run by more than the suite itself can make.
func TestBusy(t *testing.T) {
	for _, c := range []struct {
		start, end *LoadAvg
		want       []string
	}{
		{nil, nil, nil},
		{&LoadAvg{0.3, 0.2, 0.1}, &LoadAvg{1.9, 0.8, 0.3}, nil},                                                       // the suite's own load
		{&LoadAvg{2.5, 2.0, 1.0}, &LoadAvg{3.0, 2.2, 1.1}, []string{"was 2.50 at the start, above half the 4 cores"}}, // busy before
		{&LoadAvg{0.3, 0.2, 0.1}, &LoadAvg{6.1, 2.0, 0.5}, []string{"rose from 0.30 to 6.10 during the run"}},         // busy during
	} {
		r := &Report{Machine: Machine{CPU: "Test CPU @ 1GHz", Cores: 4}, LoadStart: c.start, LoadEnd: c.end}
		got := r.Busy()
		if len(got) != len(c.want) {
			t.Errorf("%v -> %v: %q, want %q", c.start, c.end, got, c.want)
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], c.want[i]) {
				t.Errorf("%v -> %v: %q, want %q", c.start, c.end, got[i], c.want[i])
			}
		}
		var md bytes.Buffer
		r.Markdown(&md, "")
		warned := strings.Contains(md.String(), "**Warning: the machine was busy**")
		if warned != (len(c.want) > 0) || !strings.Contains(md.String(), "Test CPU @ 1GHz") {
			t.Errorf("%v -> %v: Markdown:\n%s", c.start, c.end, md.String())
		}
		if c.start != nil && !strings.Contains(md.String(), "Load average (1, 5, 15 minutes): "+c.start.String()+" at the start, "+c.end.String()+" at the end.") {
			t.Errorf("Markdown lacks the load averages:\n%s", md.String())
		}
	}
}

// The load averages survive the JSON that publish reads back to write BENCHMARKS.md.
func TestLoadInJSON(t *testing.T) {
	r := sample()
	r.LoadStart, r.LoadEnd = &LoadAvg{3, 2, 1}, &LoadAvg{4, 3, 2}
	r.Machine = Machine{CPU: "Test CPU", Cores: 2}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"load_start": [`) || !strings.Contains(js.String(), `"cpu": "Test CPU"`) {
		t.Errorf("JSON lacks the load or the CPU:\n%s", js.String())
	}
	back := &Report{}
	if err := json.Unmarshal(js.Bytes(), back); err != nil {
		t.Fatal(err)
	}
	if *back.LoadStart != *r.LoadStart || *back.LoadEnd != *r.LoadEnd || len(back.Busy()) != 1 {
		t.Errorf("read back %v %v, busy %q", back.LoadStart, back.LoadEnd, back.Busy())
	}
}

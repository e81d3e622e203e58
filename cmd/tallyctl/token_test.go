package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A grant's fencing token is shown by slock lock, by slock locked for each holder and by
// slock token; tokens grow from grant to grant.
func TestSlockTokens(t *testing.T) {
	s := startServer(t, false)
	tokenOf := func(r result) uint64 {
		t.Helper()
		m := regexp.MustCompile(` token=(\d+)$`).FindStringSubmatch(strings.TrimSpace(r.out))
		if r.code != 0 || m == nil {
			t.Fatalf("no token= at the end of the grant's line:\n%v", r)
		}
		n, _ := strconv.ParseUint(m[1], 10, 64)
		return n
	}
	first := tokenOf(s.ctl(t, "slock", "lock", "job", "--timeout", "0", "--lock-id", "worker1"))
	expect(t, s.ctl(t, "slock", "unlock", "job", "--lock-id", "worker1"), 0, nil, nil)
	tok := tokenOf(s.ctl(t, "slock", "lock", "job", "--timeout", "0", "--lock-id", "worker2", "--count", "2"))
	if tok <= first {
		t.Fatalf("the second grant's token %d is not above the first's %d", tok, first)
	}
	other := tokenOf(s.ctl(t, "slock", "lock", "job", "--timeout", "0", "--lock-id", "worker3", "--count", "2"))
	want := strconv.FormatUint(tok, 10)

	expect(t, s.ctl(t, "slock", "token", "job"), 0, []string{want + "\n"}, nil) // the oldest holder's
	expect(t, s.ctl(t, "slock", "token", "job", "--lock-id", "worker3"), 0, []string{strconv.FormatUint(other, 10) + "\n"}, nil)
	expect(t, s.ctl(t, "slock", "token", "job", "--lock-id", "worker9"), 2, nil, []string{"token job: --lock-id worker9 does not hold it"})
	expect(t, s.ctl(t, "slock", "token", "nokey"), 2, nil, []string{"token nokey: nobody holds it"})
	expect(t, s.ctl(t, "--json", "slock", "token", "job"), 0, []string{`"token":` + want}, nil)

	r := s.ctl(t, "slock", "locked", "job")
	expect(t, r, 0, []string{"TOKEN"}, nil)
	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n")[2:] {
		f := strings.Fields(l)
		rows[f[0]] = f[len(f)-1]
	}
	if rows["worker2"] != want || rows["worker3"] != strconv.FormatUint(other, 10) {
		t.Errorf("slock locked: tokens %v, want worker2 %d and worker3 %d\n%s", rows, tok, other, r.out)
	}
	r = s.ctl(t, "--json", "slock", "locked", "job")
	var m struct {
		Holders []struct {
			LockID string `json:"lock_id"`
			Token  uint64 `json:"token"`
		} `json:"holders"`
	}
	if err := json.Unmarshal([]byte(r.out), &m); err != nil || len(m.Holders) != 2 || m.Holders[0].Token != tok || m.Holders[1].Token != other {
		t.Errorf("--json slock locked: %v %+v\n%v", err, m, r)
	}

	// A name of 16 bytes or more is another key for text commands: no tokens, a note.
	long := "a-name-of-twenty-bytes"
	expect(t, s.ctl(t, "slock", "lock", long, "--timeout", "0"), 0, []string{"OK key=" + long}, nil)
	r = s.ctl(t, "slock", "locked", long)
	expect(t, r, 0, []string{"1 holder(s)"}, []string{"fencing tokens not shown"})
	if strings.Contains(r.out, "TOKEN") {
		t.Errorf("a TOKEN column for a key TOKEN cannot name:\n%s", r.out)
	}
}

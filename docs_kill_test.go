package main

import (
	"regexp"
	"strings"
	"testing"
)

// The pages kill the one tallyd they started (kill -9 $PID), never every process of that
// name: pkill or killall would take the reader's other tallyd processes with it.
func TestDocsKillOwnProcess(t *testing.T) {
	broad := regexp.MustCompile(`\b(pkill|killall)\b|kill( -9)? \$\(pidof`)
	for _, page := range docPages(t) {
		for i, l := range strings.Split(readFile(t, page), "\n") {
			if broad.MatchString(l) {
				t.Errorf("%s:%d kills by name: %s", page, i+1, l)
			}
		}
	}
	if !strings.Contains(readFile(t, "README.md"), "kill -9 $PID") {
		t.Error("README.md does not show kill -9 $PID")
	}
}

// The cluster walk-through kills the leader that cluster status shows, whichever member that
// is, and goes on through members still up (raft may elect any of the three).
func TestClusterWalkthroughKillsShownLeader(t *testing.T) {
	doc := readFile(t, "docs/cluster.md")
	i := strings.Index(doc, "## A three-member walk-through")
	if i < 0 {
		t.Fatal("docs/cluster.md has no walk-through")
	}
	walk := doc[i:]
	walk = walk[:strings.Index(walk, "\n```\n")]
	for _, want := range []string{"pid[$i]=$!", "leader=$(bin/tallyctl --slock-port 5651 cluster status", "-p 565$other GET visits", "kill -9 ${pid[$leader]}",
		"cluster remove $leader"} {
		if !strings.Contains(walk, want) {
			t.Errorf("the walk-through lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`kill (-9 )?(%\d|[0-9]+\b)`).FindString(walk); m != "" {
		t.Errorf("the walk-through kills a fixed member: %q", m)
	}
	// After the kill, it asks only members still up (565$other), never a fixed port.
	after := walk[strings.Index(walk, "kill -9 ${pid[$leader]}"):]
	if m := regexp.MustCompile(`-p 565[1-3]\b|--slock-port 565[1-3]\b`).FindString(after); m != "" {
		t.Errorf("after the leader's kill the walk-through asks a fixed member: %q", m)
	}
}

// docs/client.md says the module is not published yet and how to use it meanwhile.
func TestClientDocReplace(t *testing.T) {
	doc := readFile(t, "docs/client.md")
	for _, want := range []string{"not published yet", "go mod edit", "-replace github.com/tallyd/tallyd=$TALLYD_SRC",
		"replace github.com/tallyd/tallyd => /home/you/src/tallyd"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/client.md lacks %q", want)
		}
	}
}

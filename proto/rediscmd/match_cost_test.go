package rediscmd

import (
	"strings"
	"testing"
	"time"
)

// Issue 30, item 5: Redis's stringmatchlen is exponential on patterns like '*a*a*a*a*b'
// against a long run of a's (each star retries every split). Match resumes only from the
// latest star, so it takes at most len(pattern) x len(name) steps: these cases, hopeless for
// a backtracking matcher (C(20000, 12) splits), are a few milliseconds however loaded the
// machine. The bound the server relies on is that product (--max-pattern-length,
// --max-channel-length).
func TestMatchNoExponentialCase(t *testing.T) {
	name := []byte(strings.Repeat("a", 20_000))
	start := time.Now()
	for _, pat := range []string{
		strings.Repeat("*a", 12) + "*b",
		strings.Repeat("*a", 100) + "b",
		strings.Repeat("*?", 50) + "*[b]",
		strings.Repeat("a*", 30) + "b*",
	} {
		if Match([]byte(pat), name) {
			t.Fatalf("%q matched a run of a's", pat)
		}
	}
	if !Match([]byte(strings.Repeat("*a", 12)+"*"), name) {
		t.Fatal("*a*a...* did not match a run of a's")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the exponential cases took %v", d)
	}
}

package loop

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// KEYS never stalls the loop: past rediscmd.KeysLimit keys it refuses and names SCAN, which
// walks every key a bounded step at a time, each key at least once.
func TestKeysRefusedPastLimitScanWalksAll(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	total := rediscmd.KeysLimit + 1
	var batch []byte
	for i := 0; i < total; i++ {
		batch = resp.AppendCommand(batch, "SET", "k:"+strconv.Itoa(i), "v")
		if len(batch) > 64<<10 || i == total-1 {
			rc.write(batch)
			batch = batch[:0]
		}
	}
	for i := 0; i < total; i++ {
		if r := rc.reply(); r.Kind != '+' {
			t.Fatalf("SET %d: %s", i, showResp(r))
		}
	}
	if r := rc.cmd("DBSIZE"); r.Int != int64(total) {
		t.Fatalf("DBSIZE %s, want %d", showResp(r), total)
	}
	if r := rc.cmd("KEYS", "*"); r.Kind != '-' || !strings.Contains(string(r.Str), "use SCAN") {
		t.Fatalf("KEYS * over %d keys: %s", total, showResp(r))
	}
	seen := make(map[string]bool, total)
	cursor, calls := "0", 0
	for {
		r := rc.cmd("SCAN", cursor, "COUNT", "1000")
		if r.Kind != '*' || len(r.Elems) != 2 || len(r.Elems[1].Elems) > 1000 {
			t.Fatalf("SCAN %s: %s", cursor, showResp(r))
		}
		for _, k := range r.Elems[1].Elems {
			seen[string(k.Str)] = true
		}
		calls++
		cursor = string(r.Elems[0].Str)
		if cursor == "0" {
			break
		}
	}
	if len(seen) != total || calls < total/1000 {
		t.Fatalf("SCAN saw %d keys in %d calls, want %d in at least %d", len(seen), calls, total, total/1000)
	}
	// Under the limit KEYS answers: a pattern over a smaller database.
	expectSimple(t, rc.cmd("SELECT", "1"), '+', "OK")
	expectSimple(t, rc.cmd("SET", "a1", "x"), '+', "OK")
	expectSimple(t, rc.cmd("SET", "b1", "x"), '+', "OK")
	if r := rc.cmd("KEYS", "a*"); len(r.Elems) != 1 || string(r.Elems[0].Str) != "a1" {
		t.Fatalf("KEYS a*: %s", showResp(r))
	}
}

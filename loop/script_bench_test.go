package loop

import (
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/script"
)

// releaseScript is a lock release as redis-py and redsync send it.
const releaseScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
else
  return 0
end`

// newReleaseServer is a text connection with releaseScript loaded, and the batch that sets
// a lock's token and releases it by EVALSHA.
func newReleaseServer(tb testing.TB) (*Server, *fakeConn, []byte) {
	s, fc := newKVPathServer(tb, "")
	fc.in = resp.AppendCommand(nil, "SCRIPT", "LOAD", releaseScript)
	s.OnTraffic(fc)
	batch := resp.AppendCommand(nil, "SET", "lock:job", "token-1234")
	return s, fc, resp.AppendCommand(batch, "EVALSHA", script.SHA1([]byte(releaseScript)), "1", "lock:job", "token-1234")
}

// BenchmarkEvalSHA is a lock release by EVALSHA through the text path: SET the token, then
// the cached script GETs and DELs it (one request each, the script compiled once).
func BenchmarkEvalSHA(b *testing.B) {
	s, fc, batch := newReleaseServer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fc.in = batch
		if s.OnTraffic(fc) != gnet.None {
			b.Fatal("connection closed")
		}
	}
}

// An EVALSHA of a cached script (not a lock library's: it runs on gopher-lua) compiles
// nothing and allocates only the string GET answered: KEYS and ARGV and their strings are
// reused, small integers not boxed, the main chunk gets no 'arg' table (19 before).
func TestEvalSHAAllocations(t *testing.T) {
	s, fc, batch := newReleaseServer(t)
	serve := func() {
		fc.in = batch
		s.OnTraffic(fc)
	}
	for range 3 {
		serve()
	}
	fc.written = 0
	allocs := testing.AllocsPerRun(200, serve)
	if fc.written == 0 {
		t.Fatal("nothing answered")
	}
	if allocs > 4 {
		t.Fatalf("%v allocations per SET + EVALSHA release, want at most 4 (19 before issue 32)", allocs)
	}
	t.Logf("%v allocations per SET + EVALSHA release", allocs)
}

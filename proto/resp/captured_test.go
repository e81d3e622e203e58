package resp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/captured holds the bytes redis-cli and redis-benchmark 7.0 sent to a
// redis-server 7.0 (NAME.req) and what it answered (NAME.rep), recorded by a
// proxy between them:
//
//	redis-cli ping | set key value | get key | info | LOCK mykey LOCK_ID abc TIMEOUT 5 EXPRIED 10
//	printf 'a\r\nb\0c' | redis-cli -x set bin; redis-cli get bin | get nokey
//	redis-cli rpush l a b "" c | lrange l 0 -1 | incr n | echo "héllo world" | set
//	redis-benchmark -n 12 -c 1 -P 3 -t ping,set,get,incr,lpush,rpush,lpop,sadd,hset,mset,lrange_100
//
// (bench-config is what redis-benchmark sends first, on a connection of its own;
// bench-ping-inline is its PING_INLINE test.)

// capturedFirst is the first request of each redis-cli capture, and the number of
// requests in each capture.
var capturedFirst = map[string]struct {
	first []string
	count int
}{
	"cli-ping":         {[]string{"ping"}, 1},
	"cli-set":          {[]string{"set", "key", "value"}, 1},
	"cli-get":          {[]string{"get", "key"}, 1},
	"cli-info":         {[]string{"info"}, 1},
	"cli-lock":         {[]string{"LOCK", "mykey", "LOCK_ID", "abc", "TIMEOUT", "5", "EXPRIED", "10"}, 1},
	"cli-set-binary":   {[]string{"set", "bin", "a\r\nb\x00c"}, 1},
	"cli-get-binary":   {[]string{"get", "bin"}, 1},
	"cli-get-missing":  {[]string{"get", "nokey"}, 1},
	"cli-rpush-empty":  {[]string{"rpush", "l", "a", "b", "", "c"}, 1},
	"cli-lrange":       {[]string{"lrange", "l", "0", "-1"}, 1},
	"cli-incr":         {[]string{"incr", "n"}, 1},
	"cli-echo-utf8":    {[]string{"echo", "héllo world"}, 1},
	"cli-set-arity":    {[]string{"set"}, 1},
	"bench-config":     {[]string{"CONFIG", "GET", "save"}, 2},
	"bench-ping-mbulk": {[]string{"PING"}, 12},
	"bench-set":        {[]string{"SET", "key:__rand_int__", "VXK"}, 12},
	"bench-get":        {[]string{"GET", "key:__rand_int__"}, 12},
	"bench-incr":       {[]string{"INCR", "counter:__rand_int__"}, 12},
	"bench-lpush":      {[]string{"LPUSH", "mylist", "VXK"}, 12},
	"bench-rpush":      {[]string{"RPUSH", "mylist", "VXK"}, 12},
	"bench-lpop":       {[]string{"LPOP", "mylist"}, 12},
	"bench-sadd":       {[]string{"SADD", "myset", "element:__rand_int__"}, 12},
	"bench-hset":       {[]string{"HSET", "myhash", "element:__rand_int__", "VXK"}, 12},
	"bench-lrange100":  {[]string{"LRANGE", "mylist", "0", "99"}, 12},
	"bench-mset": {[]string{"MSET", "key:__rand_int__", "VXK", "key:__rand_int__", "VXK", "key:__rand_int__", "VXK",
		"key:__rand_int__", "VXK", "key:__rand_int__", "VXK", "key:__rand_int__", "VXK", "key:__rand_int__", "VXK",
		"key:__rand_int__", "VXK", "key:__rand_int__", "VXK", "key:__rand_int__", "VXK"}, 12},
}

func readCaptured(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "captured", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCapturedRequests(t *testing.T) {
	var d Decoder
	for name, want := range capturedFirst {
		buf := readCaptured(t, name+".req")
		var again []byte
		count := 0
		for rest := buf; len(rest) > 0; count++ {
			out, n, err := d.Parse(rest, nil)
			if err != nil || n == 0 {
				t.Fatalf("%s: request %d: Parse = %d, %v", name, count, n, err)
			}
			if count == 0 && !equal(strs(out), want.first) {
				t.Errorf("%s: first request %q, want %q", name, out, want.first)
			}
			again = AppendCommandBytes(again, out...)
			rest = rest[n:]
		}
		if count != want.count {
			t.Errorf("%s: %d requests, want %d", name, count, want.count)
		}
		// redis-cli and redis-benchmark write requests exactly as AppendCommand does.
		if !bytes.Equal(again, buf) {
			t.Errorf("%s: re-encoded as\n%q\nwant\n%q", name, again, buf)
		}
	}
	buf := readCaptured(t, "bench-ping-inline.req")
	if !bytes.HasPrefix(buf, []byte("PING\r\n")) {
		t.Fatalf("bench-ping-inline.req = %q", buf)
	}
	if _, n, err := d.Parse(buf, nil); n != 0 || err != ErrInline {
		t.Errorf("redis-benchmark's PING_INLINE: Parse = %d, %v; want ErrInline", n, err)
	}
}

func TestCapturedReplies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "captured", "*.rep"))
	if err != nil || len(files) < len(capturedFirst) {
		t.Fatalf("captured replies: %d files, %v", len(files), err)
	}
	first := map[string]Reply{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".rep")
		buf := readCaptured(t, name+".rep")
		var again []byte
		for rest := buf; len(rest) > 0; {
			r, n, err := ParseReply(rest)
			if err != nil || n == 0 {
				t.Fatalf("%s: ParseReply = %d, %v at %q", name, n, err, rest[:min(len(rest), 40)])
			}
			if _, ok := first[name]; !ok {
				first[name] = r
			}
			again = encodeReply(again, r)
			rest = rest[n:]
		}
		if !bytes.Equal(again, buf) {
			t.Errorf("%s: re-encoded as\n%q\nwant\n%q", name, again, buf)
		}
	}
	for name, want := range map[string]Reply{
		"cli-ping":        str('+', "PONG"),
		"cli-get":         str('$', "value"),
		"cli-get-binary":  str('$', "a\r\nb\x00c"),
		"cli-get-missing": {Kind: '$', Null: true},
		"cli-incr":        {Kind: ':', Int: 1},
		"cli-set-arity":   str('-', "ERR wrong number of arguments for 'set' command"),
		"cli-lrange":      {Kind: '*', Elems: []Reply{str('$', "a"), str('$', "b"), str('$', ""), str('$', "c")}},
		"bench-config":    {Kind: '*', Elems: []Reply{str('$', "save"), str('$', "")}},
	} {
		if !sameReply(first[name], want) {
			t.Errorf("%s: first reply %+v, want %+v", name, first[name], want)
		}
	}
	if info := first["cli-info"]; info.Kind != '$' || !bytes.Contains(info.Str, []byte("\r\nredis_version:")) {
		t.Errorf("cli-info: %c reply of %d bytes without redis_version", info.Kind, len(info.Str))
	}
	if lr := first["bench-lrange100"]; lr.Kind != '*' || len(lr.Elems) != 24 {
		t.Errorf("bench-lrange100: %c reply of %d elements, want 24", lr.Kind, len(lr.Elems))
	}
}

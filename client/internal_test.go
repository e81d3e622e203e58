package client

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/counter"
)

func TestStatusKinds(t *testing.T) {
	for _, tc := range []struct {
		s    counter.Status
		want error
	}{
		{counter.StatusNotFound, ErrNotFound},
		{counter.StatusInvalid, ErrInvalid},
		{counter.StatusNotAvailable, ErrNotAvailable},
		{counter.StatusNotAcquired, ErrNotAcquired},
		{counter.StatusUnknownCommand, ErrUnknownCommand},
		{counter.StatusOutOfMemory, ErrOutOfMemory},
		{0x05, nil},
	} {
		e := &Error{Status: tc.s, kind: statusKind(tc.s)}
		if got := errors.Unwrap(e); got != tc.want {
			t.Errorf("status %#x unwraps to %v, want %v", uint8(tc.s), got, tc.want)
		}
	}
}

func TestPoolKinds(t *testing.T) {
	for _, tc := range []struct {
		line string
		want error
		ok   bool
	}{
		{"QUEUE_FULL", ErrQueueFull, true},
		{"TIMEOUT", ErrTimeout, true},
		{"LOCK_HELD", ErrLockHeld, true},
		{"NOT_LOCKED", ErrNotLocked, true},
		{"DONE", ErrDone, true},
		{"ERROR BAD_SYNTAX", ErrInvalid, true},
		{"ERROR BAD_COMMAND", ErrUnknownCommand, true},
		{"ERROR WAIT_FOR_RESPONSE", ErrWaitForResponse, true},
		{"ERROR WRONG_STAT", ErrWrongStat, true},
		{"ERROR LINE_TOO_LONG", ErrLineTooLong, true},
		{"ERROR SOMETHING_NEW", nil, true},
		{"LOCKED", nil, false}, // no refusal: the callers handle it before
		{"GARBAGE", nil, false},
	} {
		kind, ok := poolKind(tc.line)
		if kind != tc.want || ok != tc.ok {
			t.Errorf("%q maps to %v, %v; want %v, %v", tc.line, kind, ok, tc.want, tc.ok)
		}
		err := lineError(&endpoint{addr: "h:7531"}, "ACQ4ME", "k", tc.line)
		var e *Error
		var ce *ConnError
		switch {
		case tc.ok && (!errors.As(err, &e) || e.Reply != tc.line || !errors.Is(err, tc.want) && tc.want != nil):
			t.Errorf("lineError(%q) = %v, want an *Error", tc.line, err)
		case !tc.ok && !errors.As(err, &ce):
			t.Errorf("lineError(%q) = %v, want a *ConnError", tc.line, err)
		}
	}
}

func TestRedisKinds(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want error
	}{
		{"ERR Unknown Command", ErrUnknownCommand},
		{"ERR unknown command 'FOO', with args beginning with: ", ErrUnknownCommand},
		{"ERR value is not an integer or out of range", ErrNotInteger},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", ErrWrongType},
		{"ERR syntax error", nil},
	} {
		if got := redisKind(tc.msg); got != tc.want {
			t.Errorf("%q maps to %v, want %v", tc.msg, got, tc.want)
		}
	}
}

func TestRawurlencode(t *testing.T) {
	// What PHP's rawurlencode returns for these.
	for in, want := range map[string]string{
		"enwiki:pcache:idhash:123-0!canonical": "enwiki%3Apcache%3Aidhash%3A123-0%21canonical",
		"a b/ü~._-":                            "a%20b%2F%C3%BC~._-",
		"line\nbreak%":                         "line%0Abreak%25",
	} {
		if got := string(rawurlencode(in)); got != want {
			t.Errorf("rawurlencode(%q) = %q, want %q", in, got, want)
		}
	}
}

func newTestClient(t *testing.T, names ...string) *Client {
	t.Helper()
	servers := make([]Server, len(names))
	for i, n := range names {
		servers[i] = Host(n)
	}
	c, err := New(servers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestOrderIsMediaWikis(t *testing.T) {
	c := newTestClient(t, "db1", "db2", "db3")
	// md5 of "db1\x00enwiki:pcache:Main_Page" etc., computed with md5sum:
	// db3 6e0b…, db2 88fb…, db1 c992….
	if got, want := c.Order("enwiki:pcache:Main_Page"), []string{"db3", "db2", "db1"}; !slices.Equal(got, want) {
		t.Errorf("Order = %v, want %v", got, want)
	}
	// ArrayUtils::consistentHashSort: strcmp of the hex md5 of elt "\0" key.
	phpOrder := func(names []string, key string) []string {
		out := slices.Clone(names)
		h := map[string]string{}
		for _, n := range names {
			sum := md5.Sum([]byte(n + "\x00" + key))
			h[n] = hex.EncodeToString(sum[:])
		}
		sort.SliceStable(out, func(i, j int) bool { return h[out[i]] < h[out[j]] })
		return out
	}
	names := []string{"db1", "db2", "db3"}
	for i := range 1000 {
		key := fmt.Sprint("key", i)
		if got, want := c.Order(key), phpOrder(names, key); !slices.Equal(got, want) {
			t.Fatalf("Order(%q) = %v, want %v", key, got, want)
		}
	}
}

// Rendezvous hashing: taking a server away moves only the keys it had,
// each to the next server in its order, and the keys spread over all
// servers.
func TestOrderMovesOnlyTheLostServersKeys(t *testing.T) {
	all := newTestClient(t, "a", "b", "c", "d")
	without := newTestClient(t, "a", "c", "d")
	first := map[string]int{}
	for i := range 4000 {
		key := fmt.Sprint("k", i)
		o := all.Order(key)
		first[o[0]]++
		want := o[0]
		if want == "b" {
			want = o[1]
		}
		if got := without.Order(key)[0]; got != want {
			t.Fatalf("key %q: order %v with b, first %q without b, want %q", key, o, got, want)
		}
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if first[n] < 700 { // 1000 expected; a fair hash is far from this
			t.Errorf("server %s is first for %d of 4000 keys", n, first[n])
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		servers []Server
		want    string
	}{
		{nil, "no servers"},
		{[]Server{Host("a"), Host("a")}, `name "a" is given twice`},
		{[]Server{{Name: "x"}}, "has no address"},
	} {
		c, err := New(tc.servers, nil)
		if err == nil {
			_ = c.Close()
			t.Errorf("New(%+v) succeeded", tc.servers)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want %q", tc.servers, err, tc.want)
		}
	}
}

// A protocol no server has an address for is an error, not a hang.
func TestNoAddressForProtocol(t *testing.T) {
	c, err := New([]Server{{Name: "x", Counter: "127.0.0.1:1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Pool().Acquire(context.Background(), "k", Limits{Workers: 1, MaxQueue: 1}); err == nil ||
		!strings.Contains(err.Error(), "no server has a pool address") {
		t.Errorf("Acquire with no pool address: %v", err)
	}
}

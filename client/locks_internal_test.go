package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// scripted is a Redis-text server that answers each command with what
// answer returns for it and records the commands, in order.
type scripted struct {
	addr string
	mu   sync.Mutex
	cmds []string
}

func newScripted(t *testing.T, answer func(cmd []string) string) *scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{addr: ln.Addr().String()}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				var dec resp.Decoder
				var buf []byte
				tmp := make([]byte, 4096)
				for {
					n, err := nc.Read(tmp)
					if n == 0 && err != nil {
						return
					}
					buf = append(buf, tmp[:n]...)
					var out []byte
					for {
						args, m, err := dec.Parse(buf, nil)
						if err != nil {
							return
						}
						if m == 0 {
							break
						}
						cmd := make([]string, len(args))
						for i, a := range args {
							cmd[i] = string(a)
						}
						buf = buf[m:]
						s.mu.Lock()
						s.cmds = append(s.cmds, strings.Join(cmd, " "))
						s.mu.Unlock()
						out = append(out, answer(cmd)...)
					}
					if _, err := nc.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *scripted) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cmds...)
}

// lockReplyText is the text reply of a LOCK or UNLOCK with result r, and TOKEN t when t > 0.
func lockReplyText(r slock.Result, id string, t int64) string {
	rep := slock.LockReply{Result: r, LockID: slock.TextID([]byte(id))}
	b := rediscmd.AppendTextLockReply(nil, &rep)
	if t == 0 {
		return string(b)
	}
	// The same array with "TOKEN", t at its end.
	s := strings.Replace(string(b), "*12\r\n", "*14\r\n", 1)
	return s + string(resp.AppendInt(resp.AppendBulkString(nil, "TOKEN"), t))
}

func scriptedClient(t *testing.T, s *scripted) *Client {
	t.Helper()
	c, err := New([]Server{{Name: "s", Slock: s.addr}}, &Options{IOTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A LOCK answered CLUSTERDOWN is sent again with the same LockId; when the
// server then says the LockId holds it already (the first was granted, its
// reply lost), Lock has it, with the token TOKEN tells.
func TestLockRetriesClusterDown(t *testing.T) {
	var mu sync.Mutex
	locks := 0
	s := newScripted(t, func(cmd []string) string {
		mu.Lock()
		defer mu.Unlock()
		switch cmd[0] {
		case "LOCK":
			locks++
			if locks == 1 {
				return "-CLUSTERDOWN leader changed\r\n"
			}
			return lockReplyText(slock.ResultLockedError, cmd[3], 0)
		case "TOKEN":
			return ":42\r\n"
		}
		return "-ERR unexpected\r\n"
	})
	c := scriptedClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.Locks().Lock(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if k.Token() != 42 {
		t.Errorf("token %d, want 42 (TOKEN's)", k.Token())
	}
	cmds := s.seen()
	want := []string{
		"LOCK k LOCK_ID " + k.LockID() + " TIMEOUT 0 EXPRIED 30",
		"LOCK k LOCK_ID " + k.LockID() + " TIMEOUT 0 EXPRIED 30",
		"TOKEN k LOCK_ID " + k.LockID(),
	}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the server saw\n%s\nwant\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
}

// TryLock does not retry a CLUSTERDOWN; its LOCK may have been granted, so
// an UNLOCK FLAG 2 of its LockId follows in the background.
func TestTryLockClusterDownCancels(t *testing.T) {
	s := newScripted(t, func(cmd []string) string {
		if cmd[0] == "LOCK" {
			return "-CLUSTERDOWN no quorum\r\n"
		}
		return lockReplyText(slock.ResultOK, "", 0)
	})
	c := scriptedClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Locks().TryLock(ctx, "k", 30*time.Second)
	if !errors.Is(err, ErrClusterDown) {
		t.Fatalf("TryLock: %v, want ErrClusterDown", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(s.seen()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cmds := s.seen()
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "LOCK k LOCK_ID ") {
		t.Fatalf("the server saw %q", cmds)
	}
	id := strings.Fields(cmds[0])[3]
	if cmds[1] != "UNLOCK k LOCK_ID "+id+" FLAG 2" {
		t.Fatalf("after the CLUSTERDOWN the server saw %q, want UNLOCK k LOCK_ID %s FLAG 2", cmds[1], id)
	}
}

// Refresh sends an update that cannot take a free lock (TIMEOUT 0 with flag
// 0x0200); LOCKED_ERROR means updated, TIMEOUT means lost.
func TestRefreshCommand(t *testing.T) {
	var mu sync.Mutex
	refreshes := 0
	s := newScripted(t, func(cmd []string) string {
		mu.Lock()
		defer mu.Unlock()
		if cmd[0] != "LOCK" {
			return "-ERR unexpected\r\n"
		}
		if cmd[4] == "FLAG" {
			refreshes++
			if refreshes == 1 {
				return lockReplyText(slock.ResultLockedError, cmd[3], 0)
			}
			return lockReplyText(slock.ResultTimeout, cmd[3], 0)
		}
		return lockReplyText(slock.ResultOK, cmd[3], 7)
	})
	c := scriptedClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.Locks().Lock(ctx, "k", 1500*time.Millisecond, MaxHolders(3))
	if err != nil || k.Token() != 7 {
		t.Fatalf("Lock: token %v, %v; want 7 (the reply's TOKEN)", k, err)
	}
	if err := k.Refresh(ctx, 20*time.Hour); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if err := k.Refresh(ctx, time.Minute); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Refresh answered TIMEOUT: %v, want ErrLockLost", err)
	}
	cmds := s.seen()
	id := k.LockID()
	want := []string{
		"LOCK k LOCK_ID " + id + " TIMEOUT 0 EXPRIED 67110364 COUNT 3",              // 1500 ms
		"LOCK k LOCK_ID " + id + " FLAG 2 TIMEOUT 33554432 EXPRIED 4195504 COUNT 3", // 1200 minutes
		"LOCK k LOCK_ID " + id + " FLAG 2 TIMEOUT 33554432 EXPRIED 60 COUNT 3",
	}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the server saw\n%s\nwant\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
}

func TestLockTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{time.Second, "1"},
		{65535 * time.Second, "65535"},
		{1500 * time.Millisecond, "67110364"}, // 1500 | 0x0400<<16
		{time.Microsecond, "67108865"},        // 1 ms
		{70500 * time.Millisecond, "71"},      // seconds, rounded up
		{20 * time.Hour, "4195504"},           // 1200 | 0x0040<<16
		{65536*time.Second + 1, "4195397"},    // 1093 minutes | 0x0040<<16
	} {
		got, err := lockTTL("LOCK", "k", tc.ttl)
		if err != nil || got != tc.want {
			t.Errorf("lockTTL(%v) = %q, %v; want %q", tc.ttl, got, err, tc.want)
		}
	}
	for _, bad := range []time.Duration{0, -1, 65536 * time.Minute} {
		if _, err := lockTTL("LOCK", "k", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("lockTTL(%v): %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParseLockReply(t *testing.T) {
	e := &endpoint{addr: "x"}
	parse := func(s string) (lockReply, error) {
		r, n, err := resp.ParseReply([]byte(s))
		if err != nil || n != len(s) {
			t.Fatalf("%q: %v", s, err)
		}
		return parseLockReply(e, "LOCK", "k", r)
	}
	for _, tc := range []struct {
		reply  string
		result slock.Result
		token  uint64
	}{
		{lockReplyText(slock.ResultOK, "", 0), slock.ResultOK, 0},
		{lockReplyText(slock.ResultOK, "", 1<<40), slock.ResultOK, 1 << 40},
		{lockReplyText(slock.ResultTimeout, "", 0), slock.ResultTimeout, 0},
		// A token as a bulk string, and behind DATA.
		{"*16\r\n$1\r\n0\r\n$2\r\nOK\r\n$7\r\nLOCK_ID\r\n$1\r\n0\r\n$6\r\nLCOUNT\r\n$1\r\n1\r\n$5\r\nCOUNT\r\n$1\r\n1\r\n" +
			"$7\r\nLRCOUNT\r\n$1\r\n1\r\n$6\r\nRCOUNT\r\n$1\r\n1\r\n$4\r\nDATA\r\n*1\r\n$1\r\nv\r\n$5\r\nTOKEN\r\n$2\r\n33\r\n", slock.ResultOK, 33},
	} {
		lr, err := parse(tc.reply)
		if err != nil || lr.result != tc.result || lr.token != tc.token || lr.name != tc.result.String() {
			t.Errorf("%q: %+v %v; want result %v token %d", tc.reply, lr, err, tc.result, tc.token)
		}
	}
	for _, bad := range []string{":1\r\n", "*1\r\n$1\r\n0\r\n", "*2\r\n$1\r\nx\r\n$2\r\nOK\r\n",
		"*4\r\n$1\r\n0\r\n$2\r\nOK\r\n$5\r\nTOKEN\r\n:-1\r\n"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRedisKindsOfLocks(t *testing.T) {
	for msg, want := range map[string]error{
		"FENCED token 33 is older than 34, already seen by this key": ErrFenced,
		"CLUSTERDOWN no quorum":         ErrClusterDown,
		"CLUSTERDOWN leader changed":    ErrClusterDown,
		"ERR wrong number of arguments": nil,
	} {
		if got := redisKind(msg); got != want {
			t.Errorf("%q maps to %v, want %v", msg, got, want)
		}
	}
}

// A lease is counted from when its LOCK or refresh was sent, not from when
// the answer came: with answers 400 ms late, the deadline is still ttl
// (less the drift margin) after the send.
func TestLeaseFromSend(t *testing.T) {
	const delay = 400 * time.Millisecond
	s := newScripted(t, func(cmd []string) string {
		time.Sleep(delay)
		if cmd[0] == "LOCK" && len(cmd) > 5 && cmd[4] == "FLAG" {
			return lockReplyText(slock.ResultLockedError, cmd[3], 0) // the holder was updated
		}
		return lockReplyText(slock.ResultOK, cmd[3], 7)
	})
	c := scriptedClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const ttl = 2 * time.Second
	before := time.Now()
	k, err := c.Locks().Lock(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(before) < delay {
		t.Fatal("the answer was not late")
	}
	want := before.Add(ttl - drift(ttl))
	if dl := k.Deadline(); dl.Before(want) || dl.After(want.Add(delay/2)) {
		t.Fatalf("deadline %v after the send, want %v (ttl from the send, less %v)", dl.Sub(before), ttl-drift(ttl), drift(ttl))
	}
	before = time.Now()
	if err := k.Refresh(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	want = before.Add(ttl - drift(ttl))
	if dl := k.Deadline(); dl.Before(want) || dl.After(want.Add(delay/2)) {
		t.Fatalf("deadline %v after the refresh was sent, want %v", dl.Sub(before), ttl-drift(ttl))
	}
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}
}

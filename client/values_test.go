package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/client"
)

// Durable counters over RESP on the slock port. These commands are issue
// 6's; until they land the server answers "-ERR Unknown Command" and this
// test fails saying so.
func TestValues(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	v := newClient(t, nil, s).Values()

	n, err := v.Incr(ctx, "hits")
	if errors.Is(err, client.ErrUnknownCommand) {
		t.Fatalf("the server does not know INCR yet (issue 6): %v", err)
	}
	if err != nil || n != 1 {
		t.Fatalf("Incr = %d, %v; want 1", n, err)
	}
	steps := []struct {
		name string
		do   func() (int64, error)
		want int64
	}{
		{"IncrBy 10", func() (int64, error) { return v.IncrBy(ctx, "hits", 10) }, 11},
		{"Decr", func() (int64, error) { return v.Decr(ctx, "hits") }, 10},
		{"DecrBy 15", func() (int64, error) { return v.DecrBy(ctx, "hits", 15) }, -5},
		{"Get", func() (int64, error) { return v.Get(ctx, "hits") }, -5},
		{"Set 42, Get", func() (int64, error) {
			if err := v.Set(ctx, "hits", 42); err != nil {
				return 0, err
			}
			return v.Get(ctx, "hits")
		}, 42},
	}
	for _, st := range steps {
		if n, err := st.do(); err != nil || n != st.want {
			t.Fatalf("%s = %d, %v; want %d", st.name, n, err, st.want)
		}
	}
	if ok, err := v.Del(ctx, "hits"); err != nil || !ok {
		t.Fatalf("Del = %v, %v; want true", ok, err)
	}
	if ok, err := v.Del(ctx, "hits"); err != nil || ok {
		t.Fatalf("second Del = %v, %v; want false", ok, err)
	}
	_, err = v.Get(ctx, "hits")
	var e *client.Error
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &e) || e.Op != "GET" || e.Addr != s.Slock {
		t.Fatalf("Get of a deleted key: %v, want an *Error wrapping ErrNotFound", err)
	}
}

// A Redis error reply becomes an *Error with the server's words.
func TestValuesRedisError(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	v := newClient(t, nil, s).Values()
	err := v.Command(ctx, "k", "NOSUCHCOMMAND", "k")
	var e *client.Error
	if !errors.Is(err, client.ErrUnknownCommand) || !errors.As(err, &e) || e.Reply != "ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'k' " ||
		e.Op != "NOSUCHCOMMAND" || e.Addr != s.Slock {
		t.Fatalf("unknown command: %v, want an *Error with Redis's unknown-command text wrapping ErrUnknownCommand", err)
	}
	// The connection survives an error reply.
	if err := v.Command(ctx, "k", "PING"); err != nil {
		t.Fatalf("PING after an error: %v", err)
	}
}

// A call under WithConsistency runs at that level and leaves the shared connection at the
// default: the server sees CONSISTENCY LEVEL, the command, CONSISTENCY QUORUM.
func TestValuesWithConsistency(t *testing.T) {
	ctx := testCtx(t)
	v := newClient(t, nil, startTallyd(t, "a", nil)).Values()
	if n, err := v.Incr(client.WithConsistency(ctx, client.One), "lvl"); err != nil || n != 1 {
		t.Fatalf("Incr at ONE: %d %v", n, err)
	}
	if n, err := v.Get(ctx, "lvl"); err != nil || n != 1 {
		t.Fatalf("Get: %d %v", n, err)
	}
	_, err := v.Incr(client.WithConsistency(ctx, "SOME"), "lvl")
	if err == nil || !strings.Contains(err.Error(), `consistency level "SOME" is not ONE, QUORUM or ALL`) {
		t.Fatalf("a bad level: %v", err)
	}
	if n, err := v.Get(ctx, "lvl"); err != nil || n != 1 {
		t.Fatalf("Get after a refused level: %d %v", n, err)
	}
}

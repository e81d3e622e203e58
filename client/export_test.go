package client

import (
	"context"

	"github.com/tallyd/tallyd/proto/resp"
)

// Command sends any command on key's slock server, for tests of replies
// the Values methods do not provoke.
func (v *Values) Command(ctx context.Context, key string, args ...string) error {
	return v.do(ctx, key, func(*endpoint, resp.Reply) error { return nil }, args...)
}

// Raw sends any command on key's slock server and returns its reply, for
// tests that read what the server keeps (INFO, TOKEN).
func (v *Values) Raw(ctx context.Context, key string, args ...string) (resp.Reply, error) {
	var r resp.Reply
	err := v.do(ctx, key, func(_ *endpoint, rep resp.Reply) error { r = rep; return nil }, args...)
	return r, err
}

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

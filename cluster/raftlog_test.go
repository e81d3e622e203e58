package cluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// raft's own Infof lines: elections, leader changes and membership at INFO; its internals
// ("entry at index 6 missing from unstable log; ignoring", votes, ignored messages) at DEBUG
// (issue 31, item 5: they were all INFO). The formats are raft v3.7.0's own.
func TestRaftLoggerLevels(t *testing.T) {
	for _, c := range []struct {
		format string
		args   []any
		level  string
	}{
		{"entry at index %d missing from unstable log; ignoring", []any{6}, "debug"},
		{"%x [logterm: %d, index: %d, vote: %x] cast %s for %x [logterm: %d, index: %d] at term %d", []any{1, 2, 3, 0, "MsgPreVote", 2, 2, 3, 4}, "debug"},
		{"%x received %s from %x at term %d", []any{1, "MsgVoteResp", 2, 5}, "debug"},
		{"%x no leader at term %d; dropping proposal", []any{1, 5}, "debug"},
		{"%x became leader at term %d", []any{1, 5}, "info"},
		{"%x became pre-candidate at term %d", []any{1, 5}, "info"},
		{"raft.node: %x elected leader %x at term %d", []any{1, 2, 5}, "info"},
		{"raft.node: %x lost leader %x at term %d", []any{1, 2, 5}, "info"},
		{"%x is starting a new election at term %d", []any{1, 5}, "info"},
		{"%x switched to configuration %s", []any{1, "voters=(1 2 3)"}, "info"},
	} {
		var buf bytes.Buffer
		zl := zerolog.New(&buf).Level(zerolog.DebugLevel)
		Logger{Log: &zl}.Infof(c.format, c.args...)
		if !strings.Contains(buf.String(), `"level":"`+c.level+`"`) {
			t.Errorf("%q logged %s, want level %s", c.format, strings.TrimSpace(buf.String()), c.level)
		}
	}
}

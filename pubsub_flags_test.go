package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/loop"
)

// The pub/sub keys set what their flags set, and bad values are refused naming the flag.
func TestPubsubConfig(t *testing.T) {
	o, fs, _, err := loadConf(t, `pubsub.notify_keyspace_events = "KEA"
pubsub.client_output_buffer_limit = "pubsub 1mb 256kb 10"
pubsub.max_subscriptions = 7
pubsub.max_patterns = 50
pubsub.max_client_patterns = 5
pubsub.max_pattern_length = 64
pubsub.max_channel_length = 128
`)
	if err != nil {
		t.Fatal(err)
	}
	o.dataDir = t.TempDir()
	cfg, err := o.loopConfig(fs, loop.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	want := loop.PubsubLimit{Hard: 1 << 20, Soft: 256 << 10, SoftFor: 10 * time.Second}
	if cfg.MaxPatterns != 50 || cfg.MaxClientPatterns != 5 || cfg.MaxPatternLen != 64 || cfg.MaxChannelLen != 128 {
		t.Fatalf("patterns %d, per connection %d, pattern length %d, channel length %d", cfg.MaxPatterns, cfg.MaxClientPatterns, cfg.MaxPatternLen, cfg.MaxChannelLen)
	}
	if cfg.NotifyKeyspaceEvents != "KEA" || cfg.PubsubLimit != want || cfg.MaxSubscriptions != 7 {
		t.Fatalf("notify %q, limit %+v, max %d", cfg.NotifyKeyspaceEvents, cfg.PubsubLimit, cfg.MaxSubscriptions)
	}
	for _, tc := range []struct{ arg, want string }{
		{"--notify-keyspace-events=KQ", "--notify-keyspace-events"},
		{"--client-output-buffer-limit=1mb 2mb", "Wrong number of arguments"},
		{"--client-output-buffer-limit=x 2mb 3", "Error in hard, soft or soft_seconds"},
		{"--max-subscriptions=0", "--max-subscriptions 0"},
		{"--max-patterns=0", "--max-patterns, --max-client-patterns"},
		{"--max-client-patterns=0", "--max-patterns, --max-client-patterns"},
		{"--max-pattern-length=0", "--max-pattern-length"},
		{"--max-channel-length=-1", "--max-channel-length"},
	} {
		o, fs, _, err := loadConf(t, "", tc.arg)
		if err == nil {
			o.dataDir = t.TempDir()
			_, err = o.loopConfig(fs, loop.Defaults())
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.arg, err, tc.want)
		}
	}
}

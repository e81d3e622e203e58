package resp

import (
	"strings"
	"testing"
)

func TestInfoSections(t *testing.T) {
	info := []byte("# Server\r\nredis_version:7.0.0\r\n\r\n# Clients\r\nconnected_clients:1\r\n\r\n# Keyspace\r\ndb0:keys=1\r\n")
	for _, c := range []struct {
		names []string
		want  string
	}{
		{nil, string(info)},
		{[]string{"ALL"}, string(info)},
		{[]string{"clients"}, "# Clients\r\nconnected_clients:1\r\n"},
		{[]string{"keyspace", "Server"}, "# Server\r\nredis_version:7.0.0\r\n\r\n# Keyspace\r\ndb0:keys=1\r\n"},
		{[]string{"nosuch"}, ""},
	} {
		var names [][]byte
		for _, n := range c.names {
			names = append(names, []byte(n))
		}
		if got := string(InfoSections(info, names)); got != c.want {
			t.Errorf("InfoSections(%q) = %q, want %q", c.names, got, c.want)
		}
	}
}

// TestAppendInfoNoLog: the text for a server without an append-only log, byte for byte.
func TestAppendInfoNoLog(t *testing.T) {
	in := Info{Version: "1.2.3", PID: 4242, Port: 5658, Uptime: 90061, Clients: 3, MaxClients: 10000, Blocked: 2,
		ConnectionsTotal: 1 << 40,
		Memory:           InfoMemory{Used: 1536, RSS: 3 << 20, Peak: 5 << 30, Budget: 2000, Dataset: 1000, Max: 1 << 30},
		Stats: InfoStats{Commands: 123456, OpsPerSec: 789, NetIn: 1000, NetOut: 2000, InKbps: 1.5, OutKbps: 0.125,
			Rejected: 4, Expired: 5, Hits: 6, Misses: 7, ErrorReplies: 8},
		CPUSys: 1.25, CPUUser: 2.5,
		DBs: []InfoDB{
			{DB: 0, Values: 9, Expires: 2, AvgTTL: 1500, Keys: 1, Locked: 2, Waiting: 3, LockCount: 4, UnlockCount: 5,
				Timeouted: 6, Expried: 7, UnlockErrors: 8},
			{DB: 254, Keys: 4294967295, LockCount: 1 << 63},
		}}
	want := "# Server\r\nredis_version:7.0.0\r\ntallyd_version:1.2.3\r\nredis_mode:standalone\r\n" +
		"server_name:tallyd\r\narch_bits:64\r\nprocess_id:4242\r\ntcp_port:5658\r\nuptime_in_seconds:90061\r\n" +
		"uptime_in_days:1\r\n\r\n" +
		"# Clients\r\nconnected_clients:3\r\nmaxclients:10000\r\nblocked_clients:2\r\n\r\n" +
		"# Memory\r\nused_memory:1536\r\nused_memory_human:1.50K\r\nused_memory_rss:3145728\r\n" +
		"used_memory_rss_human:3.00M\r\nused_memory_peak:5368709120\r\nused_memory_peak_human:5.00G\r\n" +
		"used_memory_budget:2000\r\nused_memory_dataset:1000\r\nused_memory_scripts_eval:0\r\nnumber_of_cached_scripts:0\r\nmaxmemory:1073741824\r\nmaxmemory_human:1.00G\r\n" +
		"maxmemory_policy:noeviction\r\nmem_fragmentation_ratio:2048.00\r\nmem_allocator:go\r\n\r\n" +
		"# Persistence\r\naof_enabled:0\r\n\r\n" +
		"# Stats\r\ntotal_connections_received:1099511627776\r\ntotal_commands_processed:123456\r\n" +
		"instantaneous_ops_per_sec:789\r\ntotal_net_input_bytes:1000\r\ntotal_net_output_bytes:2000\r\n" +
		"instantaneous_input_kbps:1.50\r\ninstantaneous_output_kbps:0.12\r\nrejected_connections:4\r\n" +
		"expired_keys:5\r\nevicted_keys:0\r\nkeyspace_hits:6\r\nkeyspace_misses:7\r\npubsub_channels:0\r\n" +
		"pubsub_patterns:0\r\nlatest_fork_usec:0\r\ntotal_error_replies:8\r\n\r\n" +
		"# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n" +
		"# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\n\r\n" +
		"# Keyspace\r\ndb0:keys=9,expires=2,avg_ttl=1500\r\n\r\n" +
		"# Locks\r\n" +
		"db0:keys=1,locked=2,waiting=3,lock_count=4,unlock_count=5,timeouted=6,expired=7,unlock_errors=8\r\n" +
		"db254:keys=4294967295,locked=0,waiting=0,lock_count=9223372036854775808,unlock_count=0,timeouted=0,expired=0,unlock_errors=0\r\n"
	if got := string(AppendInfo([]byte("pre"), &in)); got != "pre"+want {
		t.Fatalf("AppendInfo:\n got %q\nwant %q", got, "pre"+want)
	}
	in.DBs = nil
	got := string(AppendInfo(nil, &in))
	if !strings.HasSuffix(got, "used_cpu_user:2.500000\r\n\r\n# Keyspace\r\n\r\n# Locks\r\n") {
		t.Fatalf("AppendInfo with no databases ends %q", got[max(0, len(got)-40):])
	}
}

// TestAppendHumanBytes: Redis's bytesToHuman, unit by unit.
func TestAppendHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.00K", 1536: "1.50K", 1 << 20: "1.00M",
		5<<30 + 1<<29: "5.50G", 1 << 40: "1.00T", 1 << 50: "1.00P", 1 << 60: "1024.00P"} {
		if got := string(AppendHumanBytes(nil, n)); got != want {
			t.Errorf("AppendHumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestAppendInfoLog: the Persistence section with the log on, before and after a rewrite,
// and after a failed write.
func TestAppendInfoLog(t *testing.T) {
	a := InfoAOF{File: "/var/lib/tallyd/tallyd.aof", FsyncPolicy: "everysec", Rewrites: 0,
		CurrentSize: 12, BaseSize: 12, RewriteSize: 64 << 20, LastFsyncAgo: 3, LoadedRecords: 10,
		LoadedKeys: 7, LoggedKeys: 9, PersistAfterMS: 1000}
	section := func(in *InfoAOF) string {
		s := string(AppendInfo(nil, &Info{AOF: in}))
		_, s, _ = strings.Cut(s, "# Persistence\r\n")
		s, _, _ = strings.Cut(s, "# Stats\r\n")
		return s
	}
	want := "aof_enabled:1\r\naof_file:/var/lib/tallyd/tallyd.aof\r\naof_fsync_policy:everysec\r\n" +
		"aof_rewrite_in_progress:0\r\naof_rewrites:0\r\naof_last_rewrite_time_sec:-1\r\n" +
		"aof_last_rewrite_ago_sec:-1\r\naof_current_size:12\r\naof_base_size:12\r\n" +
		"aof_rewrite_size:67108864\r\naof_pending_bytes:0\r\naof_unsynced_bytes:0\r\n" +
		"aof_fsync_lag_sec:0.000\r\naof_last_fsync_ago_sec:3\r\naof_held_replies_conns:0\r\n" +
		"aof_last_write_status:ok\r\naof_loaded_records:10\r\naof_loaded_keys:7\r\naof_logged_keys:9\r\n" +
		"aof_lock_persist_after_ms:1000\r\n\r\n"
	if got := section(&a); got != want {
		t.Fatalf("Persistence before a rewrite:\n got %q\nwant %q", got, want)
	}

	a.RewriteInProgress, a.Rewrites, a.Rewritten, a.LastRewriteTime, a.LastRewriteAgo = true, 2, true, 0.0125, 61
	a.PendingBytes, a.UnsyncedBytes, a.FsyncLag, a.HeldRepliesConns = 5, 300, 1.5, 4
	a.LastWriteError = "write /var/lib/tallyd/tallyd.aof: no space left on device"
	want = "aof_enabled:1\r\naof_file:/var/lib/tallyd/tallyd.aof\r\naof_fsync_policy:everysec\r\n" +
		"aof_rewrite_in_progress:1\r\naof_rewrites:2\r\naof_last_rewrite_time_sec:0.013\r\n" +
		"aof_last_rewrite_ago_sec:61\r\naof_current_size:12\r\naof_base_size:12\r\n" +
		"aof_rewrite_size:67108864\r\naof_pending_bytes:5\r\naof_unsynced_bytes:300\r\n" +
		"aof_fsync_lag_sec:1.500\r\naof_last_fsync_ago_sec:3\r\naof_held_replies_conns:4\r\n" +
		"aof_last_write_status:err\r\naof_last_write_error:write /var/lib/tallyd/tallyd.aof: no space left on device\r\n" +
		"aof_loaded_records:10\r\naof_loaded_keys:7\r\naof_logged_keys:9\r\n" +
		"aof_lock_persist_after_ms:1000\r\n\r\n"
	if got := section(&a); got != want {
		t.Fatalf("Persistence after a rewrite and a failed write:\n got %q\nwant %q", got, want)
	}
}

// TestAppendInfoSections: the text AppendInfo builds splits into sections as INFO section
// names them.
func TestAppendInfoSections(t *testing.T) {
	info := AppendInfo(nil, &Info{Version: "v", AOF: &InfoAOF{File: "f"}, DBs: []InfoDB{{DB: 1}}})
	got := string(InfoSections(info, [][]byte{[]byte("locks"), []byte("CLIENTS")}))
	want := "# Clients\r\nconnected_clients:0\r\nmaxclients:0\r\nblocked_clients:0\r\n\r\n" +
		"# Locks\r\ndb1:keys=0,locked=0,waiting=0,lock_count=0,unlock_count=0,timeouted=0,expired=0,unlock_errors=0\r\n"
	if got != want {
		t.Fatalf("INFO clients keyspace:\n got %q\nwant %q", got, want)
	}
}

func TestAppendInfoAllocs(t *testing.T) {
	in := Info{Version: "v", AOF: &InfoAOF{File: "f", LastWriteError: "e", Rewritten: true},
		DBs: []InfoDB{{DB: 1}, {DB: 2}}}
	dst := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { dst = AppendInfo(dst[:0], &in) }); n != 0 {
		t.Fatalf("AppendInfo allocates %.1f times with a pre-sized dst", n)
	}
}

package resp

import (
	"bytes"
	"strconv"
)

// RedisVersion is the Redis version tallyd answers as (INFO's redis_version, HELLO).
const RedisVersion = "7.0.0"

// InfoSections keeps the sections of an INFO text ("# Name\r\n" lines, sections separated by
// an empty line) that names asks for, any case, as Redis's INFO [section ...] does; no
// names, or "all", "default" or "everything" among them, keeps every section.
func InfoSections(info []byte, names [][]byte) []byte {
	if len(names) == 0 {
		return info
	}
	for _, n := range names {
		if Is(n, "all") || Is(n, "default") || Is(n, "everything") {
			return info
		}
	}
	var out []byte
	for _, sec := range bytes.SplitAfter(info, []byte("\r\n\r\n")) {
		title, _, _ := bytes.Cut(sec, []byte("\r\n"))
		for _, n := range names {
			if len(title) > 2 && Is(n, string(title[2:])) {
				out = append(out, sec...)
				break
			}
		}
	}
	if bytes.HasSuffix(out, []byte("\r\n\r\n")) {
		out = out[:len(out)-2] // the last section ends as INFO's last one does
	}
	return out
}

// Info are the figures of an INFO reply, as plain values the server fills in. The
// fields Redis tools read (redis-cli --stat, redis_exporter) are named after Redis's.
type Info struct {
	Version          string // tallyd_version
	PID              int    // process_id
	Port             int    // tcp_port
	Uptime           int64  // uptime_in_seconds
	Clients          uint64 // connected_clients
	MaxClients       int    // maxclients
	Blocked          uint64 // blocked_clients: lock commands waiting
	ConnectionsTotal uint64 // total_connections_received
	Memory           InfoMemory
	Stats            InfoStats
	CPUSys, CPUUser  float64  // used_cpu_sys, used_cpu_user: seconds
	AOF              *InfoAOF // the Persistence section; nil when the append-only log is off
	DBs              []InfoDB // the Keyspace and Locks sections: each database that exists, in order
}

// InfoMemory are the Memory section's figures, in bytes.
type InfoMemory struct {
	Used    int64 // used_memory: what the Go heap's objects take
	RSS     int64 // used_memory_rss: the process's resident set
	Peak    int64 // used_memory_peak: the most Used has been
	Budget  int64 // used_memory_budget: what --max-memory is compared with (store, buffers, wills)
	Dataset int64 // used_memory_dataset: the store's share of Budget
	Max     int64 // maxmemory: the budget, 0 for none

	ScriptBytes int64 // used_memory_scripts_eval: the bodies of the scripts cached
	Scripts     int64 // number_of_cached_scripts
}

// InfoStats are the Stats section's figures.
type InfoStats struct {
	Commands        uint64  // total_commands_processed
	OpsPerSec       int64   // instantaneous_ops_per_sec
	NetIn, NetOut   uint64  // total_net_input_bytes, total_net_output_bytes
	InKbps, OutKbps float64 // instantaneous_input_kbps, instantaneous_output_kbps
	Rejected        uint64  // rejected_connections
	Expired         uint64  // expired_keys
	Hits, Misses    uint64  // keyspace_hits, keyspace_misses
	ErrorReplies    uint64  // total_error_replies
	Channels        int     // pubsub_channels: channels with a subscriber
	Patterns        int     // pubsub_patterns: patterns with a subscriber
}

// InfoAOF are the Persistence section's figures when the append-only log is on.
type InfoAOF struct {
	File              string
	FsyncPolicy       string
	RewriteInProgress bool
	Rewrites          int64
	Rewritten         bool    // a rewrite has completed; without one the next two print as -1
	LastRewriteTime   float64 // seconds the last rewrite took
	LastRewriteAgo    int64   // seconds since it completed
	CurrentSize       int64
	BaseSize          int64
	RewriteSize       int64   // the size past which a rewrite starts
	PendingBytes      int64   // queued, not yet written
	UnsyncedBytes     int64   // written since the last fsync
	FsyncLag          float64 // seconds since the last fsync while bytes are unsynced, else 0
	LastFsyncAgo      int64
	HeldRepliesConns  int    // connections whose replies wait for the log
	LastWriteError    string // "" when the last write succeeded
	LoadedRecords     int64
	LoadedKeys        int64
	LoggedKeys        int64
	PersistAfterMS    int64
}

// InfoDB is one database's lines of the Keyspace section (Values, Expires, AvgTTL: Redis's
// keys, expires and avg_ttl, shown when it has values) and of the Locks section (the rest).
type InfoDB struct {
	DB           uint8
	Values       int   // keys with a value
	Expires      int   // of them, those that expire
	AvgTTL       int64 // their mean time to live, milliseconds
	Keys         uint32
	Locked       uint32
	Waiting      uint32
	LockCount    uint64
	UnlockCount  uint64
	Timeouted    uint32
	Expried      uint32
	UnlockErrors uint32
}

// AppendInfo appends the text of an INFO reply (not its bulk-string framing) to dst: the
// Server, Clients, Memory, Persistence, Stats, Replication, CPU, Keyspace and Locks
// sections, "\r\n"-terminated lines, an empty line after each section but the last.
// Keyspace has Redis's form (keys, expires, avg_ttl: what redis-cli --stat and
// redis_exporter parse); Locks has each database's lock counts under the same dbN names.
func AppendInfo(dst []byte, in *Info) []byte {
	dst = append(dst, "# Server\r\nredis_version:"+RedisVersion+"\r\ntallyd_version:"...)
	dst = append(dst, in.Version...)
	dst = append(dst, "\r\nredis_mode:standalone\r\nserver_name:tallyd\r\narch_bits:64\r\nprocess_id:"...)
	dst = strconv.AppendInt(dst, int64(in.PID), 10)
	dst = appendIntField(dst, "\r\ntcp_port:", int64(in.Port))
	dst = appendIntField(dst, "\r\nuptime_in_seconds:", in.Uptime)
	dst = appendIntField(dst, "\r\nuptime_in_days:", in.Uptime/86400)
	dst = append(dst, "\r\n\r\n# Clients\r\nconnected_clients:"...)
	dst = strconv.AppendUint(dst, in.Clients, 10)
	dst = appendIntField(dst, "\r\nmaxclients:", int64(in.MaxClients))
	dst = appendField(dst, "\r\nblocked_clients:", in.Blocked)
	dst = append(dst, "\r\n\r\n"...)
	dst = appendInfoMemory(dst, &in.Memory)
	dst = appendInfoAOF(dst, in.AOF)
	st := &in.Stats
	dst = appendField(dst, "# Stats\r\ntotal_connections_received:", in.ConnectionsTotal)
	dst = appendField(dst, "\r\ntotal_commands_processed:", st.Commands)
	dst = appendIntField(dst, "\r\ninstantaneous_ops_per_sec:", st.OpsPerSec)
	dst = appendField(dst, "\r\ntotal_net_input_bytes:", st.NetIn)
	dst = appendField(dst, "\r\ntotal_net_output_bytes:", st.NetOut)
	dst = strconv.AppendFloat(append(dst, "\r\ninstantaneous_input_kbps:"...), st.InKbps, 'f', 2, 64)
	dst = strconv.AppendFloat(append(dst, "\r\ninstantaneous_output_kbps:"...), st.OutKbps, 'f', 2, 64)
	dst = appendField(dst, "\r\nrejected_connections:", st.Rejected)
	dst = appendField(dst, "\r\nexpired_keys:", st.Expired)
	dst = append(dst, "\r\nevicted_keys:0"...) // no key or value is evicted: writes past the budget are refused
	dst = appendField(dst, "\r\nkeyspace_hits:", st.Hits)
	dst = appendField(dst, "\r\nkeyspace_misses:", st.Misses)
	dst = strconv.AppendInt(append(dst, "\r\npubsub_channels:"...), int64(st.Channels), 10)
	dst = strconv.AppendInt(append(dst, "\r\npubsub_patterns:"...), int64(st.Patterns), 10)
	dst = append(dst, "\r\nlatest_fork_usec:0"...)
	dst = appendField(dst, "\r\ntotal_error_replies:", st.ErrorReplies)
	dst = append(dst, "\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n# CPU\r\nused_cpu_sys:"...)
	dst = strconv.AppendFloat(dst, in.CPUSys, 'f', 6, 64)
	dst = strconv.AppendFloat(append(dst, "\r\nused_cpu_user:"...), in.CPUUser, 'f', 6, 64)
	dst = append(dst, "\r\n\r\n# Keyspace\r\n"...)
	for i := range in.DBs {
		d := &in.DBs[i]
		if d.Values == 0 {
			continue // Redis lists the databases that have keys
		}
		dst = append(dst, "db"...)
		dst = strconv.AppendUint(dst, uint64(d.DB), 10)
		dst = appendIntField(dst, ":keys=", int64(d.Values))
		dst = appendIntField(dst, ",expires=", int64(d.Expires))
		dst = appendIntField(dst, ",avg_ttl=", d.AvgTTL)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n# Locks\r\n"...)
	for i := range in.DBs {
		d := &in.DBs[i]
		dst = append(dst, "db"...)
		dst = strconv.AppendUint(dst, uint64(d.DB), 10)
		dst = appendField(dst, ":keys=", uint64(d.Keys))
		dst = appendField(dst, ",locked=", uint64(d.Locked))
		dst = appendField(dst, ",waiting=", uint64(d.Waiting))
		dst = appendField(dst, ",lock_count=", d.LockCount)
		dst = appendField(dst, ",unlock_count=", d.UnlockCount)
		dst = appendField(dst, ",timeouted=", uint64(d.Timeouted))
		dst = appendField(dst, ",expired=", uint64(d.Expried))
		dst = appendField(dst, ",unlock_errors=", uint64(d.UnlockErrors))
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// appendInfoMemory appends the Memory section.
func appendInfoMemory(dst []byte, m *InfoMemory) []byte {
	dst = appendIntField(dst, "# Memory\r\nused_memory:", m.Used)
	dst = AppendHumanBytes(append(dst, "\r\nused_memory_human:"...), m.Used)
	dst = appendIntField(dst, "\r\nused_memory_rss:", m.RSS)
	dst = AppendHumanBytes(append(dst, "\r\nused_memory_rss_human:"...), m.RSS)
	dst = appendIntField(dst, "\r\nused_memory_peak:", m.Peak)
	dst = AppendHumanBytes(append(dst, "\r\nused_memory_peak_human:"...), m.Peak)
	dst = appendIntField(dst, "\r\nused_memory_budget:", m.Budget)
	dst = appendIntField(dst, "\r\nused_memory_dataset:", m.Dataset)
	dst = appendIntField(dst, "\r\nused_memory_scripts_eval:", m.ScriptBytes)
	dst = appendIntField(dst, "\r\nnumber_of_cached_scripts:", m.Scripts)
	dst = appendIntField(dst, "\r\nmaxmemory:", m.Max)
	dst = AppendHumanBytes(append(dst, "\r\nmaxmemory_human:"...), m.Max)
	dst = append(dst, "\r\nmaxmemory_policy:noeviction\r\nmem_fragmentation_ratio:"...)
	ratio := 0.0
	if m.Used > 0 {
		ratio = float64(m.RSS) / float64(m.Used)
	}
	dst = strconv.AppendFloat(dst, ratio, 'f', 2, 64)
	return append(dst, "\r\nmem_allocator:go\r\n\r\n"...)
}

// AppendHumanBytes appends n bytes as Redis's bytesToHuman writes them: 512B, 1.50K,
// 2.00M, 3.25G, then T and P.
func AppendHumanBytes(dst []byte, n int64) []byte {
	if n < 1024 {
		return append(strconv.AppendInt(dst, n, 10), 'B')
	}
	v := float64(n)
	for _, unit := range "KMGTP" {
		v /= 1024
		if v < 1024 || unit == 'P' {
			return append(strconv.AppendFloat(dst, v, 'f', 2, 64), byte(unit))
		}
	}
	return dst
}

func appendField(dst []byte, name string, v uint64) []byte {
	dst = append(dst, name...)
	return strconv.AppendUint(dst, v, 10)
}

// appendInfoAOF appends the Persistence section.
func appendInfoAOF(dst []byte, a *InfoAOF) []byte {
	dst = append(dst, "# Persistence\r\naof_enabled:"...)
	if a == nil {
		return append(dst, "0\r\n\r\n"...)
	}
	dst = append(dst, "1\r\naof_file:"...)
	dst = append(dst, a.File...)
	dst = append(dst, "\r\naof_fsync_policy:"...)
	dst = append(dst, a.FsyncPolicy...)
	dst = append(dst, "\r\naof_rewrite_in_progress:"...)
	if a.RewriteInProgress {
		dst = append(dst, '1')
	} else {
		dst = append(dst, '0')
	}
	dst = appendIntField(dst, "\r\naof_rewrites:", a.Rewrites)
	dst = append(dst, "\r\naof_last_rewrite_time_sec:"...)
	if a.Rewritten {
		dst = strconv.AppendFloat(dst, a.LastRewriteTime, 'f', 3, 64)
	} else {
		dst = append(dst, "-1"...)
	}
	dst = append(dst, "\r\naof_last_rewrite_ago_sec:"...)
	if a.Rewritten {
		dst = strconv.AppendInt(dst, a.LastRewriteAgo, 10)
	} else {
		dst = append(dst, "-1"...)
	}
	dst = appendIntField(dst, "\r\naof_current_size:", a.CurrentSize)
	dst = appendIntField(dst, "\r\naof_base_size:", a.BaseSize)
	dst = appendIntField(dst, "\r\naof_rewrite_size:", a.RewriteSize)
	dst = appendIntField(dst, "\r\naof_pending_bytes:", a.PendingBytes)
	dst = appendIntField(dst, "\r\naof_unsynced_bytes:", a.UnsyncedBytes)
	dst = append(dst, "\r\naof_fsync_lag_sec:"...)
	dst = strconv.AppendFloat(dst, a.FsyncLag, 'f', 3, 64)
	dst = appendIntField(dst, "\r\naof_last_fsync_ago_sec:", a.LastFsyncAgo)
	dst = appendIntField(dst, "\r\naof_held_replies_conns:", int64(a.HeldRepliesConns))
	dst = append(dst, "\r\naof_last_write_status:"...)
	if a.LastWriteError == "" {
		dst = append(dst, "ok"...)
	} else {
		dst = append(dst, "err\r\naof_last_write_error:"...)
		dst = append(dst, a.LastWriteError...)
	}
	dst = appendIntField(dst, "\r\naof_loaded_records:", a.LoadedRecords)
	dst = appendIntField(dst, "\r\naof_loaded_keys:", a.LoadedKeys)
	dst = appendIntField(dst, "\r\naof_logged_keys:", a.LoggedKeys)
	dst = appendIntField(dst, "\r\naof_lock_persist_after_ms:", a.PersistAfterMS)
	return append(dst, "\r\n\r\n"...)
}

// appendIntField appends an INFO line's break, name (with its colon) and integer value.
func appendIntField(dst []byte, name string, v int64) []byte {
	return strconv.AppendInt(append(dst, name...), v, 10)
}

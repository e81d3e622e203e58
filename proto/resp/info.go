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

// Info are the figures of an INFO reply, as plain values the server fills in.
type Info struct {
	Version          string   // tallyd_version
	PID              int      // process_id
	Uptime           int64    // uptime_in_seconds
	Clients          uint64   // connected_clients
	ConnectionsTotal uint64   // total_connections_received
	AOF              *InfoAOF // the Persistence section; nil when the append-only log is off
	DBs              []InfoDB // the Keyspace section: each database that exists, in order
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

// InfoDB is one database's line of the Keyspace section.
type InfoDB struct {
	DB           uint8
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
// Server, Clients, Persistence and Keyspace sections, "\r\n"-terminated lines, an empty
// line after each section but the last.
func AppendInfo(dst []byte, in *Info) []byte {
	dst = append(dst, "# Server\r\nredis_version:"+RedisVersion+"\r\ntallyd_version:"...)
	dst = append(dst, in.Version...)
	dst = append(dst, "\r\nredis_mode:standalone\r\nserver_name:tallyd\r\nprocess_id:"...)
	dst = strconv.AppendInt(dst, int64(in.PID), 10)
	dst = appendIntField(dst, "\r\nuptime_in_seconds:", in.Uptime)
	dst = append(dst, "\r\n\r\n# Clients\r\nconnected_clients:"...)
	dst = strconv.AppendUint(dst, in.Clients, 10)
	dst = append(dst, "\r\ntotal_connections_received:"...)
	dst = strconv.AppendUint(dst, in.ConnectionsTotal, 10)
	dst = append(dst, "\r\n\r\n"...)
	dst = appendInfoAOF(dst, in.AOF)
	dst = append(dst, "# Keyspace\r\n"...)
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
		dst = appendField(dst, ",expried=", uint64(d.Expried))
		dst = appendField(dst, ",unlock_errors=", uint64(d.UnlockErrors))
		dst = append(dst, "\r\n"...)
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

package resp

import "strconv"

// InfoCluster are the figures of INFO's Cluster section; nil means not in cluster mode.
type InfoCluster struct {
	NodeID        uint64
	Role          string // leader, follower, candidate or learner
	LeaderID      uint64 // 0: none known
	Term          uint64
	Commit        uint64
	Applied       uint64
	SnapshotIndex uint64
	LeaderReady   bool
	// PeerAuth is how peer links are authenticated: key, tls, key+tls, or none (then
	// PeerAuthWarning says what that means).
	PeerAuth        string
	PeerAuthWarning string

	LogBytes, LogBatches, LogFsyncs, LogAppends int64
	LastFsyncUS                                 int64
	LogFailing                                  string

	Peers []InfoPeer // in ID order, this node included
}

// InfoPeer is one member as INFO cluster shows it.
type InfoPeer struct {
	ID    uint64
	Addr  string
	Voter bool
	Match int64  // -1: not known here (only a leader tracks it)
	Link  string // self, up or down
}

// AppendInfoCluster appends the Cluster section (without a section break before it).
func AppendInfoCluster(dst []byte, c *InfoCluster) []byte {
	dst = append(dst, "# Cluster\r\n"...)
	if c == nil {
		return append(dst, "cluster_enabled:0\r\n"...)
	}
	dst = appendField(append(dst, "cluster_enabled:1\r\n"...), "node_id:", c.NodeID)
	dst = append(append(dst, "\r\nrole:"...), c.Role...)
	dst = appendField(dst, "\r\nleader_id:", c.LeaderID)
	dst = appendField(dst, "\r\nterm:", c.Term)
	dst = appendField(dst, "\r\ncommit_index:", c.Commit)
	dst = appendField(dst, "\r\napplied_index:", c.Applied)
	dst = appendField(dst, "\r\nsnapshot_index:", c.SnapshotIndex)
	dst = strconv.AppendBool(append(dst, "\r\nleader_ready:"...), c.LeaderReady)
	dst = append(append(dst, "\r\npeer_auth:"...), c.PeerAuth...)
	if c.PeerAuthWarning != "" {
		dst = append(append(dst, "\r\npeer_auth_warning:"...), c.PeerAuthWarning...)
	}
	dst = appendIntField(dst, "\r\nraft_log_bytes:", c.LogBytes)
	dst = appendIntField(dst, "\r\nraft_log_batches:", c.LogBatches)
	dst = appendIntField(dst, "\r\nraft_log_fsyncs:", c.LogFsyncs)
	dst = appendIntField(dst, "\r\nraft_log_appends:", c.LogAppends)
	dst = appendIntField(dst, "\r\nraft_log_last_fsync_us:", c.LastFsyncUS)
	dst = append(append(dst, "\r\nraft_log_failing:"...), c.LogFailing...)
	for _, p := range c.Peers {
		dst = appendField(dst, "\r\npeer_", p.ID)
		dst = append(append(dst, ":addr="...), p.Addr...)
		dst = strconv.AppendBool(append(dst, ",voter="...), p.Voter)
		dst = appendIntField(dst, ",match_index=", p.Match)
		dst = append(append(dst, ",link="...), p.Link...)
	}
	return append(dst, "\r\n"...)
}

package resp

// InfoLatency are the figures of INFO's Latency section: how long the event loop's turns
// took, how the connections shared them, and SLOWLOG's size. A turn is one event the loop
// handles (a connection's read, a tick); while one runs, no other client is served.
type InfoLatency struct {
	Turns      uint64    // loop_turns
	MaxTurnUS  int64     // loop_turn_max_usec: the longest since start
	Over       [4]uint64 // loop_turns_over_1ms, _10ms, _100ms, _1s
	SliceUS    int64     // conn_slice_usec: --conn-slice, 0 for none
	Yields     uint64    // conn_slices_yielded: times a connection's slice ended with requests left
	SlowlogLen int       // slowlog_len
	SlowlogIDs uint64    // slowlog_entries_total: entries logged since start
}

// AppendInfoLatency appends the Latency section (without a section break before it).
func AppendInfoLatency(dst []byte, l *InfoLatency) []byte {
	dst = appendField(append(dst, "# Latency\r\n"...), "loop_turns:", l.Turns)
	dst = appendIntField(dst, "\r\nloop_turn_max_usec:", l.MaxTurnUS)
	for i, name := range [...]string{"1ms", "10ms", "100ms", "1s"} {
		dst = appendField(dst, "\r\nloop_turns_over_"+name+":", l.Over[i])
	}
	dst = appendIntField(dst, "\r\nconn_slice_usec:", l.SliceUS)
	dst = appendField(dst, "\r\nconn_slices_yielded:", l.Yields)
	dst = appendIntField(dst, "\r\nslowlog_len:", int64(l.SlowlogLen))
	dst = appendField(dst, "\r\nslowlog_entries_total:", l.SlowlogIDs)
	return append(dst, "\r\n"...)
}

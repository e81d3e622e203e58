package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/internal/manpage"
)

// writeMan writes tallyd(8) (tallyd --man) from the flag set and the config keys, so that
// the page cannot drift from them; `make install` installs it.
func writeMan(w io.Writer, fs *pflag.FlagSet) error {
	var keys []manpage.Item
	for _, k := range confKeys {
		text := k.doc
		switch {
		case k.alias != "":
			text = "Another name for " + k.alias + "."
		case k.flag != "":
			text = "Sets --" + k.flag + "."
			if liveFlags[k.flag] {
				text += " Reloaded by SIGHUP."
			}
		}
		keys = append(keys, manpage.Item{Tag: k.key, Text: text})
	}
	return manpage.Write(w, manpage.Page{
		Name: "tallyd", Section: "8", Manual: "System Manager's Manual", Source: "tallyd " + version,
		Summary:  "resource-counting and locking daemon (yrmcds counters and semaphores, PoolCounter, slock)",
		Synopsis: []string{"tallyd [FLAGS]", "tallyd check-log [--fix] FILE"},
		Sections: []manpage.Section{
			{Title: "DESCRIPTION", Text: fmt.Sprintf(`tallyd counts and locks named resources for many clients over one in-memory store, served from one event loop. With no flags it serves the yrmcds counter protocol on 127.0.0.1:%d, PoolCounter on 127.0.0.1:%d and slock (binary frames and Redis text) on 127.0.0.1:%d; the yrmcds semaphore variant is off unless --semaphore-port or semaphore.enable turns it on.

Everything a yrmcds or PoolCounter connection has acquired is released the moment it closes; slock locks live until unlocked or expired, and slock's durable values and long-held locks are kept in an append-only log in the data directory.`,
				defaultCounterPort, defaultPoolPort, defaultSlockPort)},
			{Title: "OPTIONS", Text: "Flags given on the command line win over the config file.", Flags: fs},
			{Title: "CONFIGURATION FILE", Text: `--config names a file in yrmcds.conf syntax: key = value lines, # comments, blank lines, values optionally in double quotes. Each key below sets the flag named (a flag given on the command line wins); a key that tallyd does not know is an error at start, naming the file, the line and the key. The settings of yrmcds.conf that mean nothing to tallyd (port, memory_limit, workers, ...) are logged and ignored, so that an existing yrmcds.conf can be used.

For example:

  bind = 0.0.0.0
  slock.port = 5658
  log.level = info
  limits.max_connections = 10000`,
				Items: keys},
			{Title: "SIGNALS", Items: []manpage.Item{
				{Tag: "SIGTERM, SIGINT", Text: "Stop accepting, close every connection (releasing everything each holds) and exit 0."},
				{Tag: "SIGHUP", Text: "Reopen the log file (--log-file, after logrotate moved it), then read the config file again with the same command line. The log level, format and file and the limits marked \"Reloaded by SIGHUP\" above take effect at once; one log line names every change, and another every change that takes effect only at a restart (listen addresses, ports, the data directory, sizing hints, ...). A config file that does not load changes nothing and is logged. SIGHUP never stops tallyd."},
			}},
			{Title: "SYSTEMD", Text: `Run as a Type=notify service, tallyd tells the service manager (sd_notify, through $NOTIFY_SOCKET) READY=1 once every listener (the metrics server's too) is bound, RELOADING=1 and READY=1 around a reload, and STOPPING=1 when it begins to shut down. The unit shipped with tallyd reloads with systemctl reload tallyd (ExecReload sends SIGHUP), reads extra flags from $TALLYD_OPTS in the optional EnvironmentFile /etc/default/tallyd, and keeps the data in its StateDirectory /var/lib/tallyd.`},
			{Title: "DAMAGED LOG", Text: `At start the log (the append-only log, or the raft log in a cluster) is read back record by record. A damaged tail with no valid record after it, as a crash or a full disk leaves, is cut off with a warning. Damage with valid records after it stops the start with exit status 65, a message naming the offset and the valid records after it, and nothing changed.

tallyd check-log FILE reports a log's valid records and each damaged stretch (offsets, why, the valid records after it), changing nothing. tallyd check-log --fix FILE first keeps the original as FILE.broken-TIME (never replacing a file), then writes in its place a log of every valid record without the damaged bytes; run it while tallyd is stopped. A raft log is not repaired when entries would be missing, nor a raft snapshot: restore the data directory from a backup, or remove the member and rejoin it empty. check-log exits 0 when the log is whole or repaired, 1 when it is damaged (without --fix) or cannot be read or repaired.`},
			{Title: "EXIT STATUS", Text: "0 after SIGTERM or SIGINT, --help, --version or --man. 1 when tallyd cannot start (a bad config file or value, a port in use) or stops on an error. 2 for a command line that does not parse. 65 when a log is damaged with valid records after the damage (see DAMAGED LOG). 78 when a cluster member must not run as it is (it lost its data, or has none and was not told to bootstrap)."},
			{Title: "FILES", Items: []manpage.Item{
				{Tag: "/etc/tallyd/tallyd.conf", Text: "The config file the systemd unit passes with --config."},
				{Tag: "DATA_DIR/tallyd.aof", Text: "The append-only log of slock values and long-held locks (--data-dir; /var/lib/tallyd under the unit)."},
				{Tag: "DATA_DIR/raft/raft.log, raft.snap", Text: "The raft log and its snapshot, in place of tallyd.aof in a cluster."},
				{Tag: "FILE.broken-TIME", Text: "The original of a log that tallyd check-log --fix repaired."},
				{Tag: "/etc/default/tallyd", Text: "Optional; TALLYD_OPTS=... there adds flags to the unit's command line."},
			}},
			{Title: "SEE ALSO", Text: strings.Join([]string{"tallyctl(1)", "systemd.service(5)", "sd_notify(3)", "logrotate(8)"}, ", ")},
		},
	})
}

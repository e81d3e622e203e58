package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/snapfile"
	"github.com/tallyd/tallyd/store"
)

// restoreUsage is tallyd restore --help.
const restoreUsage = `Usage: tallyd restore FILE --data-dir DIR [--cluster ID=HOST:PORT,... --node-id ID]

Writes a new data directory DIR from a backup FILE (tallyctl snapshot save), for a normal
start to load, as etcdutl snapshot restore does. FILE's SHA-256 checksum is checked first: a
damaged or cut file is refused and nothing is written. DIR must be empty or missing, and
no tallyd may hold it (DIR/LOCK).

Without --cluster, DIR is a single node's: start tallyd --data-dir DIR. With --cluster (the
new cluster's voters and their peer addresses) and --node-id, DIR is that member's: a raft
snapshot of the backup with the new membership and a fresh raft log. Restore every member
from the same FILE, each with its own --node-id and DIR, then start each with the same
--cluster and --node-id (no --initial-cluster-state new: the snapshot is its state). A
backup of either kind restores into either.

Fencing tokens: the restored server grants tokens above the backup's ceiling and above the
time floor of its clock when it starts, so above every token granted after the backup too, if
its clock is not behind the servers' that granted them. A backup whose tokens are ahead of
this machine's clock gets a warning (docs/cluster.md "Fencing tokens").

Exit status: 0 when DIR was written, 1 when FILE or DIR is refused, 2 for a command line
that does not parse.
`

// runRestore is tallyd restore FILE --data-dir DIR [--cluster ... --node-id N].
func runRestore(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("tallyd restore", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "the new data `DIR` (empty or missing)")
	peers := fs.String("cluster", "", "the new cluster's voters `ID=HOST:PORT,...` (peer addresses)")
	id := fs.Uint64("node-id", 0, "this member's ID in --cluster")
	fs.Usage = func() { fmt.Fprint(stderr, restoreUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "tallyd restore: %v (see tallyd restore --help)\n", err)
		return 2
	}
	if fs.NArg() != 1 || *dir == "" || (*peers == "") != (*id == 0) {
		fmt.Fprintf(stderr, "tallyd restore: give one FILE and --data-dir, and --node-id with --cluster (see tallyd restore --help)\n")
		return 2
	}
	var members map[uint64]string
	if *peers != "" {
		var err error
		if members, err = parsePeers(*peers); err != nil {
			fmt.Fprintf(stderr, "tallyd restore: --cluster: %v\n", err)
			return 2
		}
		if _, ok := members[*id]; !ok {
			fmt.Fprintf(stderr, "tallyd restore: --node-id %d is not in --cluster\n", *id)
			return 2
		}
	}
	h, n, ceil, err := restore(fs.Arg(0), *dir, members, *id)
	if err != nil {
		fmt.Fprintf(stderr, "tallyd restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %s: %s snapshot at index %d term %d, %d keys (%d records), fencing-token ceiling %d, into %s\n",
		fs.Arg(0), h.Kind, h.Index, h.Term, h.Keys, n, ceil, *dir)
	checkCeil(ceil, time.Now(), stderr)
	return 0
}

// checkCeil warns when a backup's fencing-token ceiling is ahead of the time floor of now
// by more than a second: the clock here is behind the one that granted the backup's
// tokens, so the restored server's time floor may not clear tokens granted after the
// backup (docs/cluster.md "Fencing tokens"). It only warns: the restored server starts
// above the ceiling all the same.
func checkCeil(ceil uint64, now time.Time, w io.Writer) {
	if floor := store.TimeFloor(now.UnixMilli()); ceil > floor+1000*store.TokensPerMs {
		fmt.Fprintf(w, "tallyd restore: warning: the backup's fencing tokens reach %d, which a clock reading %s "+
			"would be at; this clock reads %s: it is behind, and a restored server started before it catches up may "+
			"grant tokens already granted after the backup (check the clock; NTP)\n", ceil,
			time.UnixMilli(store.FloorTime(ceil)).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
}

// restore checks the backup at file and writes data directory dir from it: a single node's
// (members nil) or member id's of a new cluster of members. It returns the file's header, the
// records restored and the fencing-token ceiling the backup holds.
func restore(file, dir string, members map[uint64]string, id uint64) (snapfile.Header, int, uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return snapfile.Header{}, 0, 0, err
	}
	h, body, err := snapfile.Read(f)
	f.Close()
	if err != nil {
		return h, 0, 0, fmt.Errorf("%s: %w", file, err)
	}
	secret, recs, ok := cluster.SplitSnapshot(body)
	if !ok || secret == nil {
		return h, 0, 0, fmt.Errorf("%s: the snapshot holds no key-name secret and records", file)
	}
	// The records again without the old peer table, checked one by one; the keyspace's
	// (Redis data, store.Keyspace) as they are, each run whole.
	var out, ksRecs []byte
	n := 0
	var ceil uint64
	if err := aof.DecodeAll(recs, &aof.Handlers{State: func(ks *store.KeyState) {
		out = aof.AppendState(out, ks)
		ceil = max(ceil, ks.Ceil)
		n++
	}, Keyspace: func(r *store.Record) {
		ksRecs = r.Append(ksRecs)
		n++
	}, Peers: func(map[uint64]string) {}}); err != nil {
		return h, 0, 0, fmt.Errorf("%s: %w", file, err)
	}
	out = aof.AppendKeyspace(out, ksRecs)
	if ents, err := os.ReadDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return h, 0, 0, err
	} else if len(ents) > 0 && !(len(ents) == 1 && ents[0].Name() == dataDirLockFile) {
		// Not empty; a tallyd serving it is named (it holds the lock).
		release, err := lockDataDir(dir, false)
		if err != nil {
			return h, 0, 0, err
		}
		release()
		return h, 0, 0, fmt.Errorf("data dir %s is not empty: restore writes a new one", dir)
	}
	release, err := lockDataDir(dir, true) // no tallyd may start on it meanwhile
	if err != nil {
		return h, 0, 0, err
	}
	defer release()
	if members == nil {
		if err := writeFile(filepath.Join(dir, loop.KeySecretFile), secret[:]); err != nil {
			return h, 0, 0, err
		}
		if err := writeFile(filepath.Join(dir, loop.LogFile), append([]byte(aof.Header), out...)); err != nil {
			return h, 0, 0, err
		}
		return h, n, ceil, logfile.SyncDir(dir)
	}
	return h, n, ceil, restoreMember(filepath.Join(dir, loop.RaftDir), h, secret, out, members)
}

// restoreMember writes a raft log at dir holding only a snapshot of records, with members as
// its configuration and peer table, at an index past the bootstrap's (so that it is not taken
// for an empty member's).
func restoreMember(dir string, h snapfile.Header, secret *[32]byte, recs []byte, members map[uint64]string) error {
	s := cluster.Secret{Known: true, Key: *secret}
	data := append(raftlog.AppendPeers(s.SnapshotHead(), members), recs...)
	ids := make([]uint64, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	index, term := uint64(len(ids))+1, uint64(1)
	if h.Kind == snapfile.Cluster {
		index, term = max(index, h.Index), max(term, h.Term)
	}
	done := make(chan raftlog.RaftProgress, 16)
	lg, _, err := raftlog.OpenRaft(dir, func(p raftlog.RaftProgress) { done <- p })
	if err != nil {
		return err
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(index),
		Term: proto.Uint64(term), ConfState: &raftpb.ConfState{Voters: ids}}}
	lg.Save(&raftpb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(index)}, nil, snap)
	seq := lg.SavePeers(members)
	for p := range done {
		if p.Err != nil {
			lg.Close()
			return fmt.Errorf("raft log %s: %w", dir, p.Err)
		}
		if p.Synced >= seq {
			break
		}
	}
	lg.Close()
	return nil
}

// writeFile writes b to a new file at path (mode 0600) and fsyncs it.
func writeFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, aof.FileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

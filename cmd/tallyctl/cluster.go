package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// The cluster group: a tallyd cluster's members, through any member's slock port.
func init() {
	register(
		&command{group: "cluster", name: "status", nargs: [2]int{0, 0},
			summary: "show this member's role, the leader, the term, the indexes and every peer",
			help:    "Prints INFO cluster of the member --host/--slock-port name. A single node (not in cluster\nmode) prints one line that says so and exits 0.",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, _ []string) error { return a.clusterStatus() }
			}},
		&command{group: "cluster", name: "add", args: "ID HOST:PORT", nargs: [2]int{2, 2},
			summary: "add member ID with peer address HOST:PORT, as a learner promoted once caught up",
			help:    "Start the new node with --node-id ID --peer-addr HOST:PORT --join <a member's peer address>;\nadding it first is optional (--join adds it too).",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.clusterChange("ADD", args) }
			}},
		&command{group: "cluster", name: "remove", args: "ID", nargs: [2]int{1, 1},
			summary: "remove member ID from the cluster",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.clusterChange("REMOVE", args) }
			}},
	)
}

func (a *app) clusterStatus() error {
	r, err := a.dialRESP()
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := r.do("INFO", "cluster")
	if err != nil {
		return err
	}
	if rep.Kind == '-' {
		return refuse(map[string]any{"reply": string(rep.Str)}, "status: %s", rep.Str)
	}
	text := strings.ReplaceAll(string(rep.Str), "\r\n", "\n")
	f := infoFields(text)
	if f["cluster_enabled"] != "1" {
		// A single node is an answer, not a failure: one line that says so.
		if a.json {
			a.emitJSON(map[string]any{"ok": true, "cluster_enabled": 0, "single_node": true})
			return nil
		}
		_, err := fmt.Fprintf(a.stdout, "%s:%d is a single node, not in cluster mode (tallyd runs without --cluster)\n", a.host, a.slockPort)
		return err
	}
	if a.json {
		m := map[string]any{"ok": true}
		for k, v := range f {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			} else {
				m[k] = v
			}
		}
		a.emitJSON(m)
		return nil
	}
	fmt.Fprintf(a.stdout, "node %s  role %s  leader %s  term %s  commit %s  applied %s\n",
		f["node_id"], f["role"], f["leader_id"], f["term"], f["commit_index"], f["applied_index"])
	var peers []string
	for k := range f {
		if strings.HasPrefix(k, "peer_") {
			peers = append(peers, k)
		}
	}
	sort.Strings(peers)
	for _, k := range peers {
		// One member a line: its ID, then its fields as INFO has them, a space between two
		// (the commas were two spaces, and a field's gap looked like a column's).
		fmt.Fprintf(a.stdout, "  %s  %s\n", strings.TrimPrefix(k, "peer_"), strings.ReplaceAll(f[k], ",", " "))
	}
	return nil
}

func (a *app) clusterChange(op string, args []string) error {
	if _, err := strconv.ParseUint(args[0], 10, 64); err != nil {
		return &usageError{msg: fmt.Sprintf("ID %q is not a positive integer", args[0])}
	}
	r, err := a.dialRESP()
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := r.do(append([]string{"CLUSTER", op}, args...)...)
	if err != nil {
		return err
	}
	what := strings.ToLower(op) + " " + strings.Join(args, " ") // after "tallyctl cluster "
	if rep.Kind == '-' {
		return refuse(map[string]any{"reply": string(rep.Str)}, "%s: %s", what, rep.Str)
	}
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "reply": string(rep.Str)})
		return nil
	}
	fmt.Fprintln(a.stdout, string(rep.Str))
	return nil
}

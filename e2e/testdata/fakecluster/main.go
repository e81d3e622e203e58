// Command fakecluster stands in for tallyd's cluster mode (issue 13) when the cluster tests
// themselves are checked (TALLYD_CLUSTER_FAKE=1): it takes the same flags and answers the
// same commands (PING, CONSISTENCY, INFO cluster, INCR, GET, CLUSTER ADD|REMOVE), but it
// keeps the replicated state in one file shared by every node ($FAKECLUSTER_DIR/state.json,
// under flock) instead of running raft. Each node probes its peers' peer ports over the
// peer network every 20 ms: it serves QUORUM while it reaches a majority of the voters,
// ALL while it reaches them all, and otherwise answers -CLUSTERDOWN after
// --cluster-timeout. It is linearizable by construction; it exists to run the tests' own
// machinery (namespaces, partitions, kills, joins, timing, the checker) end to end.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type member struct {
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

type state struct {
	Members  map[uint64]*member `json:"members"`
	Counters map[string]int64   `json:"counters"`
	Term     int                `json:"term"`
	Leader   uint64             `json:"leader"`
}

var (
	nodeID    = flag.Uint64("node-id", 0, "")
	clusterF  = flag.String("cluster", "", "")
	joinF     = flag.String("join", "", "")
	peerAddrF = flag.String("peer-addr", "", "")
	bindF     = flag.String("bind", "127.0.0.1", "")
	slockPort = flag.Int("slock-port", 0, "")
	timeoutF  = flag.Duration("cluster-timeout", 2*time.Second, "")
	_         = flag.Duration("raft-tick", 100*time.Millisecond, "")
	_         = flag.String("initial-cluster-state", "existing", "") // new|existing (issue 19): the fake bootstraps from its shared file either way
	_         = flag.String("peer-bind", "", "")                     // the fake's peer listener binds its peer address
	_         = flag.String("data-dir", "", "")
	_         = flag.String("appendfsync", "", "")
	_         = flag.Int("counter-port", 0, "")
	_         = flag.Int("pool-port", 0, "")
	dir       = os.Getenv("FAKECLUSTER_DIR")
	bug       = os.Getenv("FAKECLUSTER_BUG") // stale-reads or lost-writes: see serve
	myAddrs   = map[uint64]string{}          // the peer addresses of this node's --cluster

	mu        sync.Mutex
	reachable = map[uint64]bool{}
	local     = map[string]int64{} // this node's replica, for reads at ONE
	view      state                // the shared state as last read
	myTerm    int
)

// update runs f on the shared state under the file lock and saves it if f says so.
func update(f func(st *state) bool) state {
	lf, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		panic(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		panic(err)
	}
	var st state
	if b, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	if st.Members == nil {
		st.Members = map[uint64]*member{}
	}
	if st.Counters == nil {
		st.Counters = map[string]int64{}
	}
	if f(&st) {
		b, _ := json.Marshal(&st)
		tmp := filepath.Join(dir, fmt.Sprintf("state.%d.tmp", os.Getpid()))
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			panic(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "state.json")); err != nil {
			panic(err)
		}
	}
	mu.Lock()
	view = st
	mu.Unlock()
	return st
}

// health: how many voters this node reaches (itself included) and how many there are.
func health() (reached, voters int, leader uint64) {
	mu.Lock()
	defer mu.Unlock()
	ids := []uint64{}
	for id, m := range view.Members {
		if !m.Voter {
			continue
		}
		voters++
		if id == *nodeID || reachable[id] {
			reached++
			ids = append(ids, id)
		}
	}
	if reached*2 > voters {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		leader = ids[0]
	}
	return
}

// probeOnce dials every peer's peer port once (in parallel) and records which answered.
func probeOnce() {
	mu.Lock()
	peers := map[uint64]string{}
	for id, m := range view.Members {
		if id != *nodeID {
			peers[id] = m.Addr
			if a, ok := myAddrs[id]; ok {
				peers[id] = a // this node's own way to the peer (through its proxies)
			}
		}
	}
	mu.Unlock()
	var wg sync.WaitGroup
	res := sync.Map{}
	for id, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The peer answers one byte: a connection accepted by a cut proxy is not enough.
			c, err := net.DialTimeout("tcp", addr, 80*time.Millisecond)
			if err == nil {
				_ = c.SetReadDeadline(time.Now().Add(80 * time.Millisecond))
				_, err = c.Read(make([]byte, 1))
				c.Close()
			}
			res.Store(id, err == nil)
		}()
	}
	wg.Wait()
	mu.Lock()
	clear(reachable)
	res.Range(func(k, v any) bool { reachable[k.(uint64)] = v.(bool); return true })
	mu.Unlock()
}

// probe keeps the view of the peers and of the shared state fresh.
func probe() {
	for {
		probeOnce()
		_, _, leader := health()
		st := update(func(st *state) bool {
			if leader == *nodeID && st.Leader != *nodeID {
				st.Term++
				st.Leader = *nodeID
				return true
			}
			return false
		})
		if leader != 0 {
			mu.Lock()
			myTerm = st.Term
			for k, v := range st.Counters {
				local[k] = v
			}
			mu.Unlock()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isLeader() bool {
	_, _, leader := health()
	return leader == *nodeID
}

// await waits until this node reaches what level needs, up to --cluster-timeout.
func await(level string) bool {
	end := time.Now().Add(*timeoutF)
	for {
		probeOnce() // a round trip now, as a command's replication would need
		r, v, leader := health()
		if level == "ALL" && r == v || level != "ALL" && leader != 0 {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func info() string {
	r, v, leader := health()
	_ = r
	_ = v
	mu.Lock()
	defer mu.Unlock()
	role := "follower"
	switch {
	case view.Members[*nodeID] != nil && !view.Members[*nodeID].Voter:
		role = "learner"
	case leader == 0:
		role = "candidate"
	case leader == *nodeID:
		role = "leader"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Cluster\r\ncluster_enabled:1\r\nnode_id:%d\r\nrole:%s\r\nleader_id:%d\r\nterm:%d\r\ncommit_index:0\r\napplied_index:0\r\n", *nodeID, role, leader, myTerm)
	ids := []uint64{}
	for id := range view.Members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if id == *nodeID {
			continue
		}
		m := view.Members[id]
		voter, link := 0, "down"
		if m.Voter {
			voter = 1
		}
		if reachable[id] {
			link = "up"
		}
		fmt.Fprintf(&b, "peer_%d:addr=%s,voter=%d,match_index=-1,link=%s\r\n", id, m.Addr, voter, link)
	}
	return b.String()
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

func serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	level := "QUORUM"
	for {
		args, err := readCmd(br)
		if err != nil {
			return
		}
		if len(args) == 0 {
			continue
		}
		var out string
		cmd := strings.ToUpper(args[0])
		switch {
		case cmd == "PING":
			out = "+PONG\r\n"
		case cmd == "CONSISTENCY" && len(args) == 1:
			out = "+" + level + "\r\n"
		case cmd == "CONSISTENCY" && len(args) == 2:
			switch l := strings.ToUpper(args[1]); l {
			case "ONE", "QUORUM", "ALL":
				level, out = l, "+OK\r\n"
			default:
				out = "-ERR syntax error\r\n"
			}
		case cmd == "INFO":
			out = bulk(info())
		case cmd == "GET" && len(args) == 2 && level == "ONE":
			mu.Lock()
			v, ok := local[args[1]]
			mu.Unlock()
			out = "$-1\r\n"
			if ok {
				out = bulk(strconv.FormatInt(v, 10))
			}
		case cmd == "GET" && len(args) == 2 && bug == "stale-reads" && !isLeader():
			// A deliberate bug, to see the tests fail: a QUORUM read served locally.
			if !await(level) {
				out = "-CLUSTERDOWN no quorum\r\n"
				break
			}
			mu.Lock()
			v := local[args[1]]
			mu.Unlock()
			out = bulk(strconv.FormatInt(v, 10))
		case cmd == "INCR" && len(args) == 2 && bug == "lost-writes" && !isLeader():
			// A deliberate bug, to see the tests fail: a write acknowledged, never kept.
			mu.Lock()
			local[args[1]]++
			v := local[args[1]]
			mu.Unlock()
			out = ":" + strconv.FormatInt(v, 10) + "\r\n"
		case (cmd == "GET" || cmd == "INCR") && len(args) == 2:
			if !await(level) {
				out = "-CLUSTERDOWN no quorum\r\n"
				break
			}
			var v int64
			var ok bool
			update(func(st *state) bool {
				if cmd == "INCR" {
					st.Counters[args[1]]++
				}
				v, ok = st.Counters[args[1]]
				return cmd == "INCR"
			})
			mu.Lock()
			local[args[1]] = v
			mu.Unlock()
			switch {
			case cmd == "INCR":
				out = ":" + strconv.FormatInt(v, 10) + "\r\n"
			case ok:
				out = bulk(strconv.FormatInt(v, 10))
			default:
				out = "$-1\r\n"
			}
		case cmd == "CLUSTER" && len(args) == 3 && strings.ToUpper(args[1]) == "REMOVE":
			id, _ := strconv.ParseUint(args[2], 10, 64)
			update(func(st *state) bool { delete(st.Members, id); return true })
			out = "+OK\r\n"
		default:
			out = "-ERR unknown command\r\n"
		}
		if _, err := c.Write([]byte(out)); err != nil {
			return
		}
	}
}

func readCmd(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "*") {
		return strings.Fields(line), nil
	}
	n, _ := strconv.Atoi(line[1:])
	args := make([]string, 0, n)
	for range n {
		h, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, _ := strconv.Atoi(strings.TrimRight(h, "\r\n")[1:])
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		args = append(args, string(buf[:l]))
	}
	return args, nil
}

func main() {
	for _, a := range os.Args[1:] {
		if a == "--help" || a == "-h" {
			fmt.Println("fakecluster: --cluster ID=HOST:PORT,... --node-id N --join HOST:PORT --peer-addr HOST:PORT --initial-cluster-state new|existing --peer-bind IP")
			return
		}
	}
	flag.Parse()
	if dir == "" {
		fmt.Fprintln(os.Stderr, "fakecluster: FAKECLUSTER_DIR is not set")
		os.Exit(2)
	}
	self := *peerAddrF
	update(func(st *state) bool {
		changed := false
		if *clusterF != "" {
			boot := len(st.Members) == 0 // the first node to start writes the voters
			for _, part := range strings.Split(*clusterF, ",") {
				ids, addr, _ := strings.Cut(part, "=")
				id, _ := strconv.ParseUint(ids, 10, 64)
				if id == *nodeID && self == "" {
					self = addr
				}
				myAddrs[id] = addr
				if boot {
					st.Members[id] = &member{Addr: addr, Voter: true}
					changed = true
				}
			}
		}
		if *joinF != "" && st.Members[*nodeID] == nil {
			st.Members[*nodeID] = &member{Addr: self, Voter: false}
			changed = true
		}
		return changed
	})
	if *joinF != "" {
		go func() {
			time.Sleep(300 * time.Millisecond)
			update(func(st *state) bool {
				if m := st.Members[*nodeID]; m != nil {
					m.Voter = true
				}
				return true
			})
		}()
	}
	pl, err := net.Listen("tcp", self)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecluster: peer listener:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte{'k'})
			c.Close()
		}
	}()
	ln, err := net.Listen("tcp", net.JoinHostPort(*bindF, strconv.Itoa(*slockPort)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecluster: client listener:", err)
		os.Exit(1)
	}
	go probe()
	fmt.Fprintf(os.Stderr, "fakecluster node %d listening: clients %s, peers %s\n", *nodeID, ln.Addr(), self)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

package load

import (
	"fmt"
	"net"
	"time"
)

// holders keep every shared key of a wait run taken from before the load to its end, so
// that every wait waits until it times out.
type holders struct {
	rn    *runner
	conns []*holder
}

// holder is one connection of the holders, with the acquires the server granted it.
type holder struct {
	c      net.Conn
	p      Proto
	opaque uint32
	held   []Req
	buf    []byte
}

// takeKeys takes each shared key --max times (holders at once), on as many connections
// as the protocol's per-connection limit asks, each acquire a try-lock.
func (rn *runner) takeKeys() (*holders, error) {
	cfg := &rn.cfg
	hs := &holders{rn: rn}
	total := rn.keys.Len() * int(cfg.Max)
	per := rn.dialect.Holds
	if per <= 0 {
		per = total
	}
	var op uint32
	for from := 0; from < total; from += per {
		c, err := rn.dial.conn(cfg.Conns + cfg.Idle + len(hs.conns))
		if err != nil {
			hs.close()
			return nil, fmt.Errorf("wait workload: the connection that holds the keys: %v", err)
		}
		h := &holder{c: c, p: rn.dialect.New()}
		hs.conns = append(hs.conns, h)
		var reqs []Req
		for i := from; i < min(from+per, total); i++ {
			op++
			reqs = append(reqs, Req{Kind: Acquire, Key: rn.keys.Name(i / int(cfg.Max)), N: cfg.N, Max: cfg.Max,
				Queue: cfg.Queue, Expiry: HoldWhileConnected, Op: op})
		}
		outs, err := h.do(reqs)
		for i, o := range outs {
			if o == OK {
				h.held = append(h.held, reqs[i])
			} else if err == nil {
				err = fmt.Errorf("wait workload: the acquire that holds key %q for the run was answered %v, not ok (does something else hold it?)", reqs[i].Key, o)
			}
		}
		if err != nil {
			hs.release()
			return nil, err
		}
	}
	return hs, nil
}

// do sends reqs and returns the outcome of each; none may wait.
func (h *holder) do(reqs []Req) ([]Outcome, error) {
	h.buf = h.buf[:0]
	for i := range reqs {
		h.opaque++
		reqs[i].Opaque = h.opaque
		h.buf = h.p.Append(h.buf, &reqs[i])
	}
	h.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := h.c.Write(h.buf); err != nil {
		return nil, err
	}
	var outs []Outcome
	in := make([]byte, 0, 64<<10)
	tmp := make([]byte, 64<<10)
	for len(outs) < len(reqs) {
		n, err := h.c.Read(tmp)
		in = append(in, tmp[:n]...)
		for len(outs) < len(reqs) {
			m, o, perr := h.p.Parse(in, &reqs[len(outs)])
			if perr != nil {
				return outs, perr
			}
			if m == 0 {
				break
			}
			in = in[m:]
			outs = append(outs, o)
		}
		if err != nil && len(outs) < len(reqs) {
			return outs, err
		}
	}
	return outs, nil
}

// release gives every key back and closes the connections. Where queued waits outlive
// their connections (slock), it first lets the last ones time out: a wait granted after
// its connection closed would hold the lock until it expires.
func (hs *holders) release() {
	if hs.rn.dialect.Durable {
		time.Sleep(min(time.Duration(hs.rn.timeout)*time.Millisecond, 10*time.Second) + 50*time.Millisecond)
	}
	for _, h := range hs.conns {
		var reqs []Req
		for i := len(h.held) - 1; i >= 0; i-- {
			r := h.held[i]
			reqs = append(reqs, Req{Kind: Release, Key: r.Key, N: r.N, Op: r.Op, Expiry: r.Expiry})
		}
		if len(reqs) > 0 {
			h.do(reqs) // the close releases what this may have missed, where the protocol can
		}
	}
	hs.close()
}

func (hs *holders) close() {
	for _, h := range hs.conns {
		h.c.Close()
	}
}

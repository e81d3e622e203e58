package load

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Sink is a trivial server that answers every request of one protocol with a canned
// success, to measure the load generator itself and to test it.
type Sink struct {
	newSrv   func() Server // one per connection: a protocol's sink side may keep state
	requests atomic.Uint64
	conns    atomic.Int64
	mu       sync.Mutex
	open     map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// NewSink returns a sink for the protocol named proto.
func NewSink(proto string) (*Sink, error) {
	d, err := Lookup(proto)
	if err != nil {
		return nil, err
	}
	if _, ok := d.New().(Server); !ok {
		return nil, fmt.Errorf("protocol %s has no sink side", proto)
	}
	return &Sink{newSrv: func() Server { return d.New().(Server) }, open: map[net.Conn]struct{}{}}, nil
}

// Requests returns how many requests the sink has answered.
func (s *Sink) Requests() uint64 { return s.requests.Load() }

// Conns returns how many connections are open.
func (s *Sink) Conns() int64 { return s.conns.Load() }

// Serve accepts connections on l until l is closed, then closes them all and waits
// for their goroutines.
func (s *Sink) Serve(l net.Listener) error {
	defer func() {
		s.mu.Lock()
		s.closed = true
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.open[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.conns.Add(1)
		go s.serve(c)
	}
}

func (s *Sink) serve(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
		s.conns.Add(-1)
		s.wg.Done()
	}()
	srv := s.newSrv()
	in := make([]byte, 64<<10)
	out := make([]byte, 0, 64<<10)
	r, w := 0, 0
	for {
		if w == len(in) {
			if r == 0 {
				in = append(in, make([]byte, len(in))...)
			} else {
				w = copy(in, in[r:w])
				r = 0
			}
		}
		n, err := c.Read(in[w:])
		if err != nil {
			return
		}
		w += n
		out = out[:0]
		var count uint64
		for r < w {
			var m int
			out, m, err = srv.Answer(out, in[r:w])
			if err != nil {
				return
			}
			if m == 0 {
				break
			}
			r += m
			count++
		}
		if r == w {
			r, w = 0, 0
		}
		s.requests.Add(count)
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
}

package stats

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// budget is a Budget of n descriptors that counts what is taken.
type budget struct {
	mu      sync.Mutex
	n, used int
	maxUsed int
}

func (b *budget) Take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used >= b.n {
		return false
	}
	b.used++
	b.maxUsed = max(b.maxUsed, b.used)
	return true
}

func (b *budget) Give() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used--
}

func (b *budget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// healthz opens a keep-alive connection and asks /healthz on it: true if it was answered
// (the connection is left open), false if it was closed unanswered.
func healthz(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	return c, err == nil && strings.HasPrefix(line, "HTTP/1.1 ")
}

// The server holds at most MaxConns connections, and none past what the shared budget
// gives; a connection's descriptor goes back to the budget when it closes.
func TestHTTPConnectionLimits(t *testing.T) {
	var p Publisher
	p.Publish(&Snapshot{At: time.Now()})

	// MaxConns is the tighter limit.
	b := &budget{n: 100}
	h := serveHTTP(t, &p, HTTPConfig{MaxConns: 3, Budget: b})
	addr := h.Addr().String()
	var open []net.Conn
	for i := 0; i < 3; i++ {
		c, ok := healthz(t, addr)
		if !ok {
			t.Fatalf("connection %d of 3 not answered", i)
		}
		open = append(open, c)
	}
	for i := 0; i < 5; i++ {
		if _, ok := healthz(t, addr); ok {
			t.Fatalf("connection %d beyond MaxConns 3 was answered", 4+i)
		}
	}
	if got := h.Refused(); got != 5 {
		t.Errorf("Refused() = %d, want 5", got)
	}
	if b.inUse() != 3 || b.maxUsed != 3 {
		t.Errorf("budget: %d in use, at most %d; want 3", b.inUse(), b.maxUsed)
	}
	for _, c := range open {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.inUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if b.inUse() != 0 {
		t.Fatalf("%d descriptors not given back after the connections closed", b.inUse())
	}
	if _, ok := healthz(t, addr); !ok {
		t.Fatal("no connection answered once the others closed")
	}

	// The budget is the tighter limit (the loop holds the rest).
	b2 := &budget{n: 2}
	h2 := serveHTTP(t, &p, HTTPConfig{MaxConns: 10, Budget: b2})
	for i := 0; i < 2; i++ {
		if _, ok := healthz(t, h2.Addr().String()); !ok {
			t.Fatalf("connection %d of 2 not answered", i)
		}
	}
	if _, ok := healthz(t, h2.Addr().String()); ok {
		t.Fatal("a connection past the budget was answered")
	}
	if b2.inUse() != 2 {
		t.Fatalf("budget: %d in use, want 2", b2.inUse())
	}
}

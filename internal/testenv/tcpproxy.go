package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// A TCP proxy a test can cut: a daemon that reaches its store through it
// is partitioned from the store on Partition and healed on Heal.

// TCPProxy forwards connections to a target until cut: then it closes
// every connection it carries and refuses new ones, until heal.
type TCPProxy struct {
	// Addr is where it listens.
	Addr   string
	target string
	ln     net.Listener
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

// NewTCPProxy listens on a free port of 127.0.0.1 and forwards to target
// (host:port); it is closed, and every connection cut, at cleanup.
func NewTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Partition()
	})
	return p
}

func (p *TCPProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *TCPProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Partition drops every connection and refuses new ones.
func (p *TCPProxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (p *TCPProxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

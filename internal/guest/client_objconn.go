package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// TargetError: the guest could not connect to the object's server, so
// nothing was sent to it. Refused means nothing listens there (the server
// is not running).
type TargetError struct {
	Refused bool
	Message string
}

func (e *TargetError) Error() string { return "guest: " + e.Message }

// errNoObjConn: the guest did not hand a connection over and never will
// (it predates POST /object/conn, or the channel is not a unix socket).
var errNoObjConn = errors.New("guest cannot hand over object connections")

// ObjectClient returns an HTTP client whose requests go to the object's
// server inside the sandbox (a request for http://any-host/method reaches
// http://127.0.0.1:9333/method) over connections the guest dialed there and
// handed over (POST /object/conn), kept from request to request: a call
// crosses neither the guest nor a second HTTP hop. A guest that cannot hand
// connections over is reached through /proxy/ (ProxyClient) instead.
//
// A request is written at most once. Before a kept connection is used it
// is checked without blocking: one the server closed meanwhile (it exited
// or restarted) is dropped and a new one dialed, so the request is never
// written into a dead connection. Once any of the request may have reached
// the server, a broken connection is the caller's error and nothing is
// sent again. When no connection can be made the error is a *TargetError.
func (c *Client) ObjectClient() *http.Client { return c.objHC }

type objectTransport struct{ c *Client }

func (t objectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	proxy := proxyTransport{t.c.tr}
	if t.c.noObjConn.Load() {
		return proxy.RoundTrip(req)
	}
	resp, err := t.roundTrip(req)
	if err == nil || !errors.Is(err, errNoObjConn) {
		return resp, err
	}
	// Nothing was sent: go through /proxy/ from now on.
	t.c.noObjConn.Store(true)
	return proxy.RoundTrip(req)
}

func (t objectTransport) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	oc, err := t.c.obj.get(ctx, t.c)
	if err != nil {
		if req.Body != nil && !errors.Is(err, errNoObjConn) {
			req.Body.Close()
		}
		return nil, err
	}
	// Cancellation and the deadline reach the blocked reads and writes
	// through the connection's deadline, set once ctx is done — not set to
	// ctx's deadline up front: the socket's timer could fire before the
	// context's, and the caller, seeing ctx not done yet, would take a
	// call that ran out of time for a broken connection.
	_ = oc.nc.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = oc.nc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		oc.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%v)", cerr, err)
		}
		return nil, err
	}
	if err := req.Write(oc.bw); err != nil {
		return fail(err)
	}
	if err := oc.bw.Flush(); err != nil {
		return fail(err)
	}
	// The server is the tenant's code: its headers are bounded as
	// net/http's Transport bounds them, and so are informational answers.
	oc.limit = maxObjHeaderBytes
	var resp *http.Response
	for i := 0; ; i++ {
		resp, err = http.ReadResponse(oc.br, req)
		if err != nil {
			return fail(err)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if i == maxObjInformational {
			return fail(fmt.Errorf("object server sent over %d informational answers", maxObjInformational))
		}
	}
	oc.limit = math.MaxInt64
	resp.Body = &objBody{body: resp.Body, oc: oc, pool: &t.c.obj, stop: stop, keep: !resp.Close}
	return resp, nil
}

// objBody gives its connection back once the answer was read to the end.
type objBody struct {
	body io.ReadCloser
	oc   *objConn
	pool *objPool
	stop func() bool
	keep bool
	once sync.Once
}

func (b *objBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil {
		b.finish(err == io.EOF)
	}
	return n, err
}

func (b *objBody) Close() error {
	// An answer not read to its end leaves the connection unusable.
	b.finish(b.body == http.NoBody)
	return nil
}

func (b *objBody) finish(complete bool) {
	b.once.Do(func() {
		if b.stop() && complete && b.keep {
			b.body.Close()
			_ = b.oc.nc.SetDeadline(time.Time{})
			b.pool.put(b.oc)
			return
		}
		// Close the connection first: closing a body not read to its end
		// would read (the tenant's server's) rest of it.
		b.oc.nc.Close()
		b.body.Close()
	})
}

// objPool keeps idle connections to one sandbox's object server.
type objPool struct {
	mu   sync.Mutex
	idle []*objConn
	gen  int // bumped by closeIdle: connections of an older one are closed when given back
}

type objConn struct {
	nc  *net.TCPConn
	raw syscall.RawConn
	br  *bufio.Reader // reads through limit
	bw  *bufio.Writer
	gen int
	// limit is what may still be read (the answer's headers are bounded).
	limit int64
}

const (
	// maxObjHeaderBytes bounds an answer's headers (http.Transport's
	// default); maxObjInformational the 1xx answers before it.
	maxObjHeaderBytes   = 10 << 20
	maxObjInformational = 5
)

// Read reads from the connection within limit.
func (oc *objConn) Read(p []byte) (int, error) {
	if oc.limit <= 0 {
		return 0, fmt.Errorf("object server's answer headers are over %d bytes", maxObjHeaderBytes)
	}
	if int64(len(p)) > oc.limit {
		p = p[:oc.limit]
	}
	n, err := oc.nc.Read(p)
	oc.limit -= int64(n)
	return n, err
}

// maxIdleObjConns: calls to one object run one at a time unless the class
// allows more (max_concurrency), but a shared sandbox (isolation "class")
// serves many objects at once, each call on its own connection.
const maxIdleObjConns = 64

func (p *objPool) get(ctx context.Context, c *Client) (*objConn, error) {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			gen := p.gen
			p.mu.Unlock()
			nc, err := c.dialObject(ctx)
			if err != nil {
				return nil, err
			}
			raw, err := nc.SyscallConn()
			if err != nil {
				nc.Close()
				return nil, err
			}
			oc := &objConn{nc: nc, raw: raw, bw: bufio.NewWriter(nc), gen: gen, limit: math.MaxInt64}
			oc.br = bufio.NewReader(oc)
			return oc, nil
		}
		oc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if oc.alive() {
			return oc, nil
		}
		oc.nc.Close()
	}
}

func (p *objPool) put(oc *objConn) {
	p.mu.Lock()
	if oc.gen == p.gen && len(p.idle) < maxIdleObjConns {
		p.idle = append(p.idle, oc)
		oc = nil
	}
	p.mu.Unlock()
	if oc != nil {
		oc.nc.Close()
	}
}

func (p *objPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.gen++
	p.mu.Unlock()
	for _, oc := range idle {
		oc.nc.Close()
	}
}

// alive reports whether an idle connection can carry a request: nothing
// arrived on it since the last answer, not even the end of the stream (the
// server hung up or exited; the kernel has queued that by the time the
// server's process is gone). It does not block.
func (oc *objConn) alive() bool {
	if oc.br.Buffered() > 0 {
		return false
	}
	var b [1]byte
	var err error
	if cerr := oc.raw.Read(func(fd uintptr) bool {
		// 0 bytes and no error is the end of the stream; data is a
		// stray answer; only "nothing yet" is a live, idle connection.
		_, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); cerr != nil {
		return false
	}
	return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
}

// maxPassedFDs bounds the descriptors read with the guest's answer: more
// than one is a misbehaving guest, and every one received is closed.
const maxPassedFDs = 4

// dialObject asks the guest for a connection to the object's server.
func (c *Client) dialObject(ctx context.Context) (*net.TCPConn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, errNoObjConn
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(2 * objectDialTimeout)
	}
	_ = conn.SetDeadline(dl)
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })()
	if _, err := io.WriteString(conn, "POST "+objectConnPath+" HTTP/1.1\r\nHost: guest\r\nContent-Length: 0\r\n\r\n"); err != nil {
		return nil, fmt.Errorf("guest POST %s: %w", objectConnPath, err)
	}
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(4*maxPassedFDs))
	n, oobn, flags, _, err := uc.ReadMsgUnix(b[:], oob)
	fds := passedFDs(oob[:oobn])
	closeFDs := func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}
	switch {
	case err != nil || n == 0:
		closeFDs()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("guest POST %s: %w", objectConnPath, err)
	case flags&syscall.MSG_CTRUNC != 0:
		closeFDs()
		return nil, fmt.Errorf("guest POST %s: the guest sent more than %d descriptors", objectConnPath, maxPassedFDs)
	}
	switch b[0] {
	case objConnFD:
		if len(fds) != 1 {
			closeFDs()
			return nil, fmt.Errorf("guest POST %s: the guest sent %d descriptors, want 1", objectConnPath, len(fds))
		}
		return tcpConnOf(fds[0])
	case objConnError:
		closeFDs()
		raw, _ := io.ReadAll(io.LimitReader(conn, 64<<10))
		var eb errorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("POST %s failed: %.200q", objectConnPath, raw)
		}
		return nil, &TargetError{Refused: eb.Code == codeRefused, Message: eb.Error}
	}
	// An HTTP answer: a guest from before POST /object/conn.
	closeFDs()
	return nil, errNoObjConn
}

// passedFDs returns the descriptors of SCM_RIGHTS messages in oob.
func passedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if f, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

// tcpConnOf takes ownership of fd, which must be a TCP connection to a
// loopback address (the object's server on the sandbox's loopback).
func tcpConnOf(fd int) (*net.TCPConn, error) {
	f := os.NewFile(uintptr(fd), "object-conn")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("guest POST %s: %w", objectConnPath, err)
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("guest POST %s: the guest sent a %T, not a TCP connection", objectConnPath, nc)
	}
	if ra, ok := tc.RemoteAddr().(*net.TCPAddr); !ok || ra == nil || !ra.IP.IsLoopback() {
		tc.Close()
		return nil, fmt.Errorf("guest POST %s: the guest sent a connection to %v, not to the sandbox's loopback", objectConnPath, tc.RemoteAddr())
	}
	return tc, nil
}

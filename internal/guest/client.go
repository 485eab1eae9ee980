package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
)

// Client talks to a guest over its unix socket. It is safe for concurrent
// use; Close releases idle connections.
type Client struct {
	tr *http.Transport
	hc *http.Client

	// dial opens an authenticated connection to the guest (ObjectClient
	// asks the guest over it for a connection to the object's server).
	dial Dialer
	// obj keeps connections to the object's server that the guest dialed
	// inside the sandbox and handed over (client_objconn.go).
	obj   objPool
	objHC *http.Client
	// noObjConn: this guest cannot hand connections over (an earlier
	// version, or not a unix socket): ObjectClient goes through /proxy/.
	noObjConn atomic.Bool
}

// Dialer opens a new connection to a guest's socket. The daemon's dialers
// come from the sandbox driver (sandbox.Driver.Dial): they never follow a
// path the sandbox can write and check who listens.
type Dialer func(ctx context.Context) (net.Conn, error)

// UnixDialer dials the unix socket at path, following it as the kernel
// does: only for paths nothing untrusted can write (tests, and the agent
// socket inside a sandbox).
func UnixDialer(path string) Dialer {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}

// NewClient returns the daemon's client for a guest reached through dial.
// Every new connection proves secret (the sandbox's, see handshake.go)
// and requires the guest to prove it too, before any request: a guest that
// does not know it is refused with an error matching ErrUnauthenticated.
// It does not dial until the first call.
func NewClient(dial Dialer, secret []byte) *Client {
	secret = append([]byte(nil), secret...)
	return newClient(func(ctx context.Context) (net.Conn, error) {
		conn, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		dl, _ := ctx.Deadline()
		if err := clientHandshake(conn, secret, dl); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	})
}

// NewAgentClient returns a client for the agent socket inside a sandbox
// (AgentSocketPath), which takes agent events and nothing else and needs
// no secret.
func NewAgentClient(socketPath string) *Client { return newClient(UnixDialer(socketPath)) }

func newClient(dial Dialer) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx)
		},
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}
	c := &Client{tr: tr, hc: &http.Client{Transport: tr}, dial: dial}
	c.objHC = &http.Client{Transport: objectTransport{c}}
	return c
}

// Close closes idle connections, those to the object's server included
// (and those in use once their request is done). The client stays usable.
func (c *Client) Close() {
	c.tr.CloseIdleConnections()
	c.obj.closeIdle()
}

// ErrEscapesWorkspace matches (errors.Is) a guest *Error with code
// escapes_workspace: a files-API path under /workspace leads out of it
// through a symlink, and the guest refused it without touching anything
// outside.
var ErrEscapesWorkspace = errors.New("path escapes the workspace")

// Error is a non-2xx answer from the guest. It matches fs.ErrNotExist,
// fs.ErrExist, ErrEscapesWorkspace and friends with errors.Is where the
// code says so.
type Error struct {
	Status  int
	Code    string
	Message string
	// Op is the op's state when Code is op_exists (ErrOpExists).
	Op *OpStatus
}

func (e *Error) Error() string {
	return fmt.Sprintf("guest: %s (HTTP %d, %s)", e.Message, e.Status, e.Code)
}

// Is lets callers test errors.Is(err, fs.ErrNotExist) and friends.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == codeNotFound
	case fs.ErrExist:
		return e.Code == codeExists
	case syscall.ENOTDIR:
		return e.Code == codeNotDir
	case syscall.EISDIR:
		return e.Code == codeIsDir
	case syscall.ENOTEMPTY:
		return e.Code == codeNotEmpty
	case ErrEscapesWorkspace:
		return e.Code == codeEscapesWorkspace
	case ErrOpExists:
		return e.Code == codeOpExists
	}
	return false
}

// do sends a request; in (if not nil) is JSON-encoded unless it is an
// io.Reader. A non-2xx answer becomes *Error. The caller closes the body.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in any) (*http.Response, error) {
	var body io.Reader
	ctype := ""
	switch v := in.(type) {
	case nil:
	case io.Reader:
		body, ctype = v, "application/octet-stream"
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	u := "http://guest" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("guest %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var eb errorBody
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			eb = errorBody{Error: strings.TrimSpace(string(raw)), Code: codeInternal}
		}
		return nil, &Error{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error, Op: eb.Op}
	}
	return resp, nil
}

// call does a request and decodes a JSON answer into out (if not nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	resp, err := c.do(ctx, method, path, q, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("guest %s %s: decode: %w", method, path, err)
	}
	return nil
}

// Health asks the guest whether it is up.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.call(ctx, http.MethodGet, "/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// ProxyClient returns an HTTP client whose requests go to the object server
// inside the sandbox through the guest's /proxy/: a request for
// http://any-host/method reaches http://127.0.0.1:9333/method.
func (c *Client) ProxyClient() *http.Client {
	return &http.Client{Transport: proxyTransport{c.tr}}
}

type proxyTransport struct{ base http.RoundTripper }

func (p proxyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host = "http", "guest"
	r.URL.Path = "/proxy" + "/" + strings.TrimPrefix(req.URL.Path, "/")
	r.URL.RawPath = ""
	r.Host = "guest"
	return p.base.RoundTrip(r)
}

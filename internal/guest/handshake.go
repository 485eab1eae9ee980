package guest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Every connection to the guest's daemon socket starts with a mutual
// challenge–response over the sandbox's secret, before any HTTP:
//
//	daemon → guest   "AKGUEST1" ‖ nonce_d (32 bytes)
//	guest  → daemon  nonce_g (32 bytes) ‖ HMAC-SHA256(secret, "guest"  ‖ nonce_d ‖ nonce_g)
//	daemon → guest   HMAC-SHA256(secret, "daemon" ‖ nonce_d ‖ nonce_g)
//
// Each side proves the secret over a nonce the other side chose, so a
// recorded exchange is worth nothing later (replay), and a relay between
// the daemon and some other sandbox's guest fails because that guest holds
// another secret. The daemon pipelines its proof with its first request, so
// a new connection costs one extra round trip; idle connections are reused.

// SecretSize is the length of a sandbox's secret in bytes.
const SecretSize = 32

const (
	handshakeMagic   = "AKGUEST1"
	nonceSize        = 32
	handshakeTimeout = 10 * time.Second
)

// ErrUnauthenticated: the other end of a guest connection did not prove the
// sandbox's secret. The daemon's client refuses such a guest; the guest
// refuses such a client.
var ErrUnauthenticated = errors.New("guest channel: peer did not prove the sandbox's secret")

// NewSecret returns a fresh random secret.
func NewSecret() []byte {
	s := make([]byte, SecretSize)
	if _, err := rand.Read(s); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return s
}

// EncodeSecret is how a secret travels to the guest (a pipe or stdin): hex
// and a newline.
func EncodeSecret(s []byte) []byte { return []byte(hex.EncodeToString(s) + "\n") }

// ReadSecret reads one EncodeSecret line from r; it does not wait for EOF.
func ReadSecret(r io.Reader) ([]byte, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) <= 2*SecretSize+2 {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				break
			}
			return nil, fmt.Errorf("read secret: %w", err)
		}
	}
	s, err := hex.DecodeString(strings.TrimSpace(string(line)))
	if err != nil || len(s) != SecretSize {
		return nil, fmt.Errorf("read secret: want %d hex-encoded bytes and a newline", SecretSize)
	}
	return s, nil
}

func proof(secret []byte, role string, nonceD, nonceG []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(role))
	m.Write(nonceD)
	m.Write(nonceG)
	return m.Sum(nil)
}

func nonce() []byte {
	n := make([]byte, nonceSize)
	if _, err := rand.Read(n); err != nil {
		panic(err)
	}
	return n
}

// clientHandshake runs the daemon's side on a new connection.
func clientHandshake(conn net.Conn, secret []byte, deadline time.Time) error {
	if len(secret) != SecretSize {
		return fmt.Errorf("guest client: the sandbox's secret is %d bytes, want %d", len(secret), SecretSize)
	}
	if d := time.Now().Add(handshakeTimeout); deadline.IsZero() || d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	nd := nonce()
	if _, err := conn.Write(append([]byte(handshakeMagic), nd...)); err != nil {
		return fmt.Errorf("guest handshake: %w", err)
	}
	var in [nonceSize + sha256.Size]byte
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		// A guest that does not know the secret (or is not a guest) hangs
		// up or says nothing sensible.
		return fmt.Errorf("guest handshake: %w: %v", ErrUnauthenticated, err)
	}
	ng := in[:nonceSize]
	if !hmac.Equal(in[nonceSize:], proof(secret, "guest", nd, ng)) {
		return fmt.Errorf("guest handshake: %w", ErrUnauthenticated)
	}
	if _, err := conn.Write(proof(secret, "daemon", nd, ng)); err != nil {
		return fmt.Errorf("guest handshake: %w", err)
	}
	return nil
}

// serverHandshake runs the guest's side.
func serverHandshake(conn net.Conn, secret []byte) error {
	// The read deadline stays until the HTTP server sets its own for the
	// first request's headers.
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	defer conn.SetWriteDeadline(time.Time{})
	var hello [len(handshakeMagic) + nonceSize]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return fmt.Errorf("guest handshake: %w", err)
	}
	if !bytes.Equal(hello[:len(handshakeMagic)], []byte(handshakeMagic)) {
		return fmt.Errorf("guest handshake: %w: not a guest client", ErrUnauthenticated)
	}
	nd := hello[len(handshakeMagic):]
	ng := nonce()
	if _, err := conn.Write(append(ng, proof(secret, "guest", nd, ng)...)); err != nil {
		return fmt.Errorf("guest handshake: %w", err)
	}
	var got [sha256.Size]byte
	if _, err := io.ReadFull(conn, got[:]); err != nil {
		return fmt.Errorf("guest handshake: %w", err)
	}
	if !hmac.Equal(got[:], proof(secret, "daemon", nd, ng)) {
		return fmt.Errorf("guest handshake: %w", ErrUnauthenticated)
	}
	return nil
}

// authListener makes every accepted connection run serverHandshake before
// its first byte of HTTP. The handshake runs in the connection's own
// goroutine (on first Read or Write), so a client that stalls delays only
// itself.
type authListener struct {
	net.Listener
	secret []byte
	onFail func(error)
}

func (l *authListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &authConn{Conn: c, l: l}, nil
}

type authConn struct {
	net.Conn
	l    *authListener
	once sync.Once
	err  error
}

func (c *authConn) handshake() error {
	c.once.Do(func() {
		if c.err = serverHandshake(c.Conn, c.l.secret); c.err != nil {
			c.l.onFail(c.err)
			c.Conn.Close()
		}
	})
	return c.err
}

func (c *authConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *authConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

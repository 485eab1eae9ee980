package guest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the rlimit launcher (see rlimit_exec.go).
	if len(os.Args) > 1 && os.Args[1] == execMode {
		os.Exit(execWithRlimit(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

// testSecret is the sandbox secret of in-process test guests.
var testSecret = bytes.Repeat([]byte{7}, SecretSize)

// startGuest serves a guest in-process on sockets in a temp dir (no
// namespaces) and returns a client and the work dir. The agent socket is
// agent.sock beside the work dir.
func startGuest(t testing.TB, mod func(*Config)) (*Client, string) {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "workspace")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		SocketPath:      filepath.Join(dir, "guest.sock"),
		AgentSocketPath: filepath.Join(dir, "agent.sock"),
		Secret:          testSecret,
		StateDir:        filepath.Join(dir, "state"),
		WorkDir:         work,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, stop := serveGuest(t, cfg)
	t.Cleanup(stop)
	return c, work
}

// serveGuest serves cfg in-process until stop, which returns once the
// guest has shut down.
func serveGuest(t testing.TB, cfg Config) (c *Client, stop func()) {
	t.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx) }()
	c = NewClient(UnixDialer(cfg.SocketPath), testSecret)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			c.Close()
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	waitHealthy(t, c)
	return c, stop
}

func waitHealthy(t testing.TB, c *Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h, err := c.Health(ctx)
		cancel()
		if err == nil && h.OK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest never became healthy: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHealth(t *testing.T) {
	c, _ := startGuest(t, nil)
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !h.OK || h.PID != os.Getpid() || h.UptimeMS < 0 {
		t.Fatalf("health = %+v, want ok with pid %d", h, os.Getpid())
	}
}

func TestServeRemovesSocketOnShutdown(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "g.sock")
	// A stale socket file from an earlier guest must not stop a new one.
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(Config{SocketPath: sock, AgentSocketPath: filepath.Join(dir, "a.sock"), Secret: testSecret, StateDir: filepath.Join(dir, "s"), WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx) }()
	c := NewClient(UnixDialer(sock), testSecret)
	defer c.Close()
	waitHealthy(t, c)
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket still exists after shutdown: %v", err)
	}
}

func TestMainRejectsBadFlags(t *testing.T) {
	if code := run(context.Background(), []string{"--no-such-flag"}, discard{}); code != 2 {
		t.Fatalf("exit code = %d, want 2", code)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

package crashtest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds cmd/agentkernel once: static (it is the sandbox's guest
// too) and with the failpoints tag.
func binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("akcrash")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "agentkernel")
		cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", binPath, "github.com/agentkernel/agentkernel/cmd/agentkernel")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// engines are the storage engines the crash tests run on: SQLite always,
// Postgres when AGENTKERNEL_TEST_POSTGRES_URL is set.
func engines(t *testing.T, fn func(t *testing.T, engine string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite") })
	t.Run("postgres", func(t *testing.T) {
		testenv.PostgresURL(t)
		fn(t, "postgres")
	})
}

// freshDatabase creates a database no other test uses and drops it at
// cleanup; it returns its URL.
func freshDatabase(t *testing.T) string { return testenv.FreshPostgres(t, "akcrash") }

// node is one agentkernel serve process on a home that outlives it.
type node struct {
	t      testing.TB
	bin    string
	home   string
	addr   string
	run    string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	key    string
	// proxy carries a cluster node's connections to PostgreSQL: the test
	// cuts it to partition the node from the store (newCluster).
	proxy *testenv.TCPProxy
}

// newNode writes the configuration (the anthropic provider pointed at the
// fake model, the engine, any extra TOML tables) into a fresh home.
func newNode(t *testing.T, engine, modelURL string, extraConf ...string) *node {
	t.Helper()
	home := t.TempDir()
	run, err := os.MkdirTemp("", "akcr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	conf := fmt.Sprintf("[models.\"claude-*\"]\nprovider = \"anthropic\"\nbase_url = %q\napi_key = \"sk-fake\"\n", modelURL)
	if engine == "postgres" {
		conf += fmt.Sprintf("\n[store]\nengine = \"postgres\"\nurl = %q\n", freshDatabase(t))
	}
	for _, c := range extraConf {
		conf += "\n" + c
	}
	if err := os.WriteFile(filepath.Join(home, "agentkernel.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, bin: binary(t), home: home, addr: freePort(t), run: run}
	t.Cleanup(n.cleanup)
	return n
}

// cleanup ends the test's daemon and the sandboxes it leaves: sandboxes
// outlive a SIGKILLed daemon by design, so a daemon is started again on
// the home to destroy them.
func (n *node) cleanup() {
	n.kill()
	if _, err := os.Stat(filepath.Join(n.home, "admin.key")); err != nil {
		return // never started: no sandbox either
	}
	n.start()
	defer n.stop()
	testenv.DestroySandboxes(n.t, n.url(), n.key)
}

func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (n *node) url() string { return "http://" + n.addr }

// start runs serve and waits until it answers.
func (n *node) start() {
	n.t.Helper()
	n.spawn()
	n.waitHealthy()
}

// spawn runs serve without waiting for it (it may hang at a failpoint
// before it listens).
func (n *node) spawn() {
	n.t.Helper()
	n.stderr = &lockedBuffer{b: &bytes.Buffer{}}
	n.cmd = exec.Command(n.bin, "serve", "--listen", n.addr, "--home", n.home, "--config", filepath.Join(n.home, "agentkernel.toml"))
	n.cmd.Dir = n.home
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTKERNEL_") && !strings.HasPrefix(kv, "ANTHROPIC_") {
			env = append(env, kv)
		}
	}
	n.cmd.Env = append(env, "HOME="+n.home, "AGENTKERNEL_SANDBOX_RUN_DIR="+n.run)
	n.cmd.Stderr = n.stderr
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
}

// waitHealthy waits until the spawned daemon answers and reads its key.
func (n *node) waitHealthy() {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(n.url() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("daemon did not become healthy\n%s", n.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(n.home, "admin.key"))
	if err != nil {
		n.t.Fatal(err)
	}
	n.key = strings.TrimSpace(string(key))
}

// kill SIGKILLs the daemon (no cleanup of any kind runs in it).
func (n *node) kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
	n.cmd = nil
}

// stop ends the daemon gracefully (SIGTERM).
func (n *node) stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	_ = n.cmd.Wait()
	n.cmd = nil
}

func (n *node) logs() string {
	if n.stderr == nil {
		return ""
	}
	n.stderr.mu.Lock()
	defer n.stderr.mu.Unlock()
	return n.stderr.b.String()
}

// arm makes the next turn that reaches failpoint hang there.
func (n *node) arm(failpoint string) {
	n.t.Helper()
	_ = os.Remove(n.flag(failpoint) + ".reached")
	if err := os.WriteFile(n.flag(failpoint), nil, 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// pause arms failpoint to hold a turn only until release (disarm).
func (n *node) pause(failpoint string) {
	n.t.Helper()
	_ = os.Remove(n.flag(failpoint) + ".reached")
	if err := os.WriteFile(n.flag(failpoint), []byte("pause"), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) disarm(failpoint string) {
	_ = os.Remove(n.flag(failpoint))
	_ = os.Remove(n.flag(failpoint) + ".reached")
}

func (n *node) flag(failpoint string) string { return filepath.Join(n.home, "failpoint-"+failpoint) }

// waitReached waits until a turn hangs at the armed failpoint.
func (n *node) waitReached(failpoint string) {
	n.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := os.Stat(n.flag(failpoint) + ".reached"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("failpoint %s never reached\n%s", failpoint, n.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is the official SDK's client against the daemon.
func (n *node) client() anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(n.url()), option.WithAPIKey(n.key), option.WithMaxRetries(0))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

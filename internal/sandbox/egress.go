package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Egress is the daemon's egress proxy as the sandbox layer uses it
// (*egress.Proxy): it serves each egress sandbox's own listener, so a
// connection's sandbox is the listener it came through and never anything
// the sandbox says.
type Egress interface {
	Serve(l net.Listener, sandboxID string) error
	CACertPEM() []byte
}

// Inside an egress sandbox.
const (
	// EgressPath is where the sandbox's egress directory is mounted
	// read-only: the proxy's socket and its CA certificate.
	EgressPath = "/.agentkernel/egress"
	// EgressSocket is the proxy's socket inside; the guest forwards
	// EgressListen to it.
	EgressSocket = EgressPath + "/proxy.sock"
	// EgressCACert is the proxy's CA certificate inside.
	EgressCACert = EgressPath + "/ca.pem"
	// EgressListen is where the guest listens for the sandbox's proxy
	// clients (HTTP_PROXY and HTTPS_PROXY point at it).
	EgressListen = "127.0.0.1:3128"
	// CABundle is the sandbox's trust store with the proxy's CA appended,
	// composed by the guest at start (the system bundle is never replaced).
	CABundle = AgentDir + "/ca-certificates.crt"
)

// egressSockName and egressCAName are the files of the host egress dir.
const (
	egressDirName  = "egress"
	egressSockName = "proxy.sock"
	egressCAName   = "ca.pem"
)

// EgressEnv is the environment of an egress sandbox: its processes reach
// out through the proxy (NO_PROXY keeps localhost the sandbox's own) and
// trust the proxy's CA beside the system roots.
func EgressEnv() map[string]string {
	proxy := "http://" + EgressListen
	return map[string]string{
		"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
		"NO_PROXY": "localhost", "no_proxy": "localhost",
		"SSL_CERT_FILE": CABundle, "REQUESTS_CA_BUNDLE": CABundle, "CURL_CA_BUNDLE": CABundle,
		"NODE_EXTRA_CA_CERTS": EgressCACert,
	}
}

// EgressGuestFlags are the guest's flags for an egress sandbox.
func EgressGuestFlags() []string {
	return []string{"--egress-listen", EgressListen, "--egress-socket", EgressSocket, "--egress-ca", EgressCACert, "--ca-bundle", CABundle}
}

// egressDir is the sandbox's host egress directory, inside its private
// run dir: the daemon's alone (the sandbox sees it read-only).
func (m *Manager) egressDir(id string) string { return filepath.Join(m.runDir(id), egressDirName) }

// openEgress (re)creates the sandbox's egress listener and has the proxy
// serve it, returning the host directory to mount ("" for a sandbox
// without egress). At a start the directory is new; at a reattach after a
// daemon restart it is the one the running sandbox has mounted, and the
// socket in it is replaced. The caller holds e.mu for writing.
func (m *Manager) openEgress(e *entry, sb *store.Sandbox) (string, error) {
	e.closeEgress()
	if sb.Network != NetworkEgress {
		return "", nil
	}
	if m.cfg.Egress == nil {
		return "", fmt.Errorf("sandbox %s: network %q needs the egress proxy, which this daemon runs without: %w", sb.ID, NetworkEgress, ErrNoEgress)
	}
	dir := m.egressDir(sb.ID)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox %s: egress dir: %w", sb.ID, err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("sandbox %s: egress dir %s is not a directory", sb.ID, dir)
	}
	if err := writeFileAtomic(filepath.Join(dir, egressCAName), m.cfg.Egress.CACertPEM(), 0o644); err != nil {
		return "", fmt.Errorf("sandbox %s: egress CA: %w", sb.ID, err)
	}
	sock := filepath.Join(dir, egressSockName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("sandbox %s: stale egress socket: %w", sb.ID, err)
	}
	l, err := listenUnixIn(dir, egressSockName)
	if err != nil {
		return "", fmt.Errorf("sandbox %s: egress socket %s: %w", sb.ID, sock, err)
	}
	// Connectable by whatever user the sandbox's guest runs as (an image
	// may set one); host users cannot reach it: the run dir above is 0700.
	if err := os.Chmod(sock, 0o666); err != nil {
		l.Close()
		return "", fmt.Errorf("sandbox %s: egress socket: %w", sb.ID, err)
	}
	e.egress = l
	go func() {
		if err := m.cfg.Egress.Serve(l, sb.ID); err != nil {
			m.log.Warn("egress listener ended", "sandbox", sb.ID, "err", err)
		}
	}()
	return dir, nil
}

// ErrNoEgress: a sandbox asks for egress and the daemon has no proxy.
var ErrNoEgress = errors.New("no egress proxy")

// closeEgress stops serving the sandbox's egress listener.
func (e *entry) closeEgress() {
	if e.egress != nil {
		_ = e.egress.Close()
		e.egress = nil
	}
}

// listenUnixIn listens on a unix socket named name in dir, binding through
// /proc/self/fd so that a run dir deep enough to exceed the 107-byte limit
// of socket paths still works.
func listenUnixIn(dir, name string) (net.Listener, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
	if err != nil {
		return nil, err
	}
	// Its path was only good while fd was open: the socket file stays
	// until the next openEgress replaces it or the run dir goes.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	return l, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

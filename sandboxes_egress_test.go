package agentkernel_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// hostIP is a non-loopback address of this machine ("" when it has none).
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

// A sandbox's only way out is the daemon's egress proxy, through the
// socket its guest forwards: its environment points there, its trust
// store has the proxy's CA appended, a connection that bypasses the proxy
// has no route, and a sandbox that belongs to no session has no policy,
// so the proxy refuses it with a body that says why.
func TestSandboxReachesOutOnlyThroughTheProxy(t *testing.T) {
	ctx := context.Background()
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "outside") }))
	defer outside.Close()
	_, port, _ := net.SplitHostPort(outside.Listener.Addr().String())
	wide, err := net.Listen("tcp", "0.0.0.0:0") // reachable on every host address
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	go http.Serve(wide, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "outside") }))
	_, widePort, _ := net.SplitHostPort(wide.Addr().String())

	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Sandboxes.Delete(ctx, sb.ID)
	if sb.Network != "egress" {
		t.Fatalf("default network %q, want egress", sb.Network)
	}
	run := func(cmd string) *agentkernel.ExecResult {
		t.Helper()
		res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: cmd})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	if res := run("wc -l < /proc/net/dev"); strings.TrimSpace(res.Stdout) != "3" {
		t.Fatalf("the sandbox has interfaces beside lo: %+v", res)
	}
	if res := run("echo $HTTPS_PROXY $http_proxy $NO_PROXY $SSL_CERT_FILE"); strings.TrimSpace(res.Stdout) !=
		"http://127.0.0.1:3128 http://127.0.0.1:3128 localhost /run/agentkernel/ca-certificates.crt" {
		t.Fatalf("proxy environment: %q", res.Stdout)
	}
	ca, err := os.ReadFile(d.Config.EgressCADir() + "/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	bundle := run("cat /run/agentkernel/ca-certificates.crt").Stdout
	system, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if !strings.HasSuffix(strings.TrimSpace(bundle), strings.TrimSpace(string(ca))) || len(system) > 0 && !strings.HasPrefix(bundle, string(system[:200])) {
		t.Fatalf("the trust store is not the system bundle with the proxy's CA appended (%d bytes)", len(bundle))
	}

	// Through the proxy: refused, and the body says why.
	res := run("curl -sS -m 10 http://127.0.0.1:" + port + "/")
	if !strings.Contains(res.Stdout, "no network policy") || !strings.Contains(res.Stdout, "belongs to no Managed Agents session") || strings.Contains(res.Stdout, "outside") {
		t.Fatalf("a sandbox of no session reached out, or was not told why not: %+v", res)
	}
	// Around the proxy: no route.
	for _, url := range []string{"http://127.0.0.1:" + widePort + "/", "http://" + hostIP(t) + ":" + widePort + "/"} {
		if strings.Contains(url, "http://:") {
			continue
		}
		res := run("curl -sS -m 5 --noproxy '*' " + url)
		if res.ExitCode == 0 || strings.Contains(res.Stdout, "outside") {
			t.Fatalf("a direct connect to %s got through: %+v", url, res)
		}
	}
	// The proxy's directory is the daemon's: read-only inside.
	if res := run("rm -f /.agentkernel/egress/proxy.sock; touch /.agentkernel/egress/x"); res.ExitCode == 0 {
		t.Fatalf("the sandbox can write its egress directory: %+v", res)
	}
}

// The docker driver gives a container the same single way out: no network
// at all (only lo), and the proxy's socket forwarded by the guest.
func TestDockerSandboxReachesOutOnlyThroughTheProxy(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	wide, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	go http.Serve(wide, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "outside") }))
	_, port, _ := net.SplitHostPort(wide.Addr().String())

	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Driver: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Sandboxes.Delete(ctx, sb.ID)
	run := func(cmd string) *agentkernel.ExecResult {
		t.Helper()
		res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: cmd})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	if res := run("wc -l < /proc/net/dev"); strings.TrimSpace(res.Stdout) != "3" {
		t.Fatalf("the container has interfaces beside lo: %+v", res)
	}
	// Through the proxy (the guest forwards 127.0.0.1:3128): it answers,
	// and refuses a sandbox of no session. (busybox nc: the image's static
	// wget crashes on name resolution.)
	res := run(`printf 'GET http://127.0.0.1:` + port + `/ HTTP/1.0\r\n\r\n' | nc -w 10 127.0.0.1 3128`)
	if !strings.Contains(res.Stdout, "403") || !strings.Contains(res.Stdout, "no network policy") || strings.Contains(res.Stdout, "outside") {
		t.Fatalf("through the proxy: %+v", res)
	}
	// Around it: no route, to the host's loopback or its address.
	for _, host := range []string{"127.0.0.1", hostIP(t)} {
		if host == "" {
			continue
		}
		res := run("echo x | nc -w 5 " + host + " " + port)
		if res.ExitCode == 0 || strings.Contains(res.Stdout, "outside") {
			t.Fatalf("a direct connect to %s got through: %+v", host, res)
		}
	}
	if res := run("test -s /run/agentkernel/ca-certificates.crt && grep -c 'BEGIN CERTIFICATE' /run/agentkernel/ca-certificates.crt"); res.ExitCode != 0 {
		t.Fatalf("no trust store with the proxy's CA: %+v", res)
	}
}

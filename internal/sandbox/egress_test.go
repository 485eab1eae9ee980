package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// fakeEgress stands in for the proxy: each connection is greeted with the
// sandbox id the listener was served for and how many listeners that
// sandbox has had.
type fakeEgress struct {
	mu     sync.Mutex
	served map[string]int
}

const fakeCA = "-----BEGIN CERTIFICATE-----\nZmFrZSBjYQ==\n-----END CERTIFICATE-----\n"

func (f *fakeEgress) CACertPEM() []byte { return []byte(fakeCA) }

func (f *fakeEgress) Serve(l net.Listener, id string) error {
	f.mu.Lock()
	f.served[id]++
	n := f.served[id]
	f.mu.Unlock()
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c, "proxy for %s #%d\n", id, n)
		c.Close()
	}
}

// An egress sandbox reaches the proxy's listener for it through the
// guest's forwarder on 127.0.0.1:3128 — after a start, after hibernation
// and wake, and after a daemon restart (reattach) — and nothing else: its
// environment points there and its trust store ends with the proxy's CA.
func TestEgressListenerFollowsTheInstance(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	fe := &fakeEgress{served: map[string]int{}}
	e.cfg.Egress = fe
	e.restart(t) // a manager with the proxy
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Network: sandbox.NetworkEgress})
	if err != nil {
		t.Fatal(err)
	}
	dial := `bash -c "exec 3<>/dev/tcp/127.0.0.1/3128 && cat <&3"`
	want := func(n int) {
		t.Helper()
		if got := e.exec(t, in.ID, dial); got != fmt.Sprintf("proxy for %s #%d\n", in.ID, n) {
			t.Fatalf("through 127.0.0.1:3128: %q, want listener #%d", got, n)
		}
	}
	want(1)
	if got := e.exec(t, in.ID, "echo $HTTPS_PROXY $no_proxy; tail -c 200 $SSL_CERT_FILE"); !strings.HasPrefix(got, "http://127.0.0.1:3128 localhost\n") || !strings.HasSuffix(got, fakeCA) {
		t.Fatalf("environment and trust store: %q", got)
	}
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	want(2) // woken by the call, with a new listener
	e.restart(t)
	want(3) // reattached: the running sandbox sees the re-created socket
	// A sandbox without egress has no forwarder.
	none, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Network: sandbox.NetworkNone})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.exec(t, none.ID, `bash -c "(exec 3<>/dev/tcp/127.0.0.1/3128) 2>/dev/null && echo open || echo closed"`); got != "closed\n" {
		t.Fatalf("a sandbox with network none: 3128 is %q", got)
	}
	// Without a proxy, egress is refused at create, naming the field.
	e.cfg.Egress = nil
	e.restart(t)
	if _, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Network: sandbox.NetworkEgress}); err == nil || !strings.Contains(err.Error(), `"network"`) {
		t.Fatalf("egress without a proxy: %v", err)
	}
}

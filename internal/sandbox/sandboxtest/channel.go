package sandboxtest

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
)

// secretSearch looks for the secret ($A$B hex, $C$D base64: given in halves
// so that no file, argument or environment variable in the sandbox holds it
// whole, except the argv of the searching grep itself, under /proc) in
// every file the sandbox can read outside /proc, /sys, /dev and the host's
// read-only /usr, in the guest's and its own environment, and in env.
const secretSearch = `
hit=0
for d in /* /.agentkernel; do
  case "$d" in /proc|/sys|/dev|/usr) continue ;; esac
  grep -r -l -F -e "$A$B" -e "$C$D" "$d" 2>/dev/null && hit=1
done
for f in /proc/1/environ /proc/1/cmdline /proc/self/environ /proc/self/cmdline /proc/$$/environ; do
  cat "$f" 2>/dev/null | grep -l -F -e "$A$B" -e "$C$D" >/dev/null && { echo "in $f"; hit=1; }
done
env | grep -F -e "$A$B" -e "$C$D" && hit=1
cat /proc/1/environ >/dev/null 2>&1 && echo "readable: /proc/1/environ"
for f in /proc/1/fd/*; do
  readlink "$f" >/dev/null 2>&1 && echo "readable: $f"
  ( : < "$f" ) 2>/dev/null && echo "openable: $f"
done
head -c1 /proc/1/mem >/dev/null 2>&1 && echo "readable: /proc/1/mem"
echo "hit=$hit"
`

// testChannel: the daemon's channel to the guest. The sandbox's secret is
// nowhere the sandbox can read it, the guest's memory, environment and
// files are closed to the sandbox's processes, and a client without the
// secret is refused.
func (s *suite) testChannel(t *testing.T) {
	d := s.h.NewDriver(t)
	spec := s.spec(t, newDirs(t))
	h, c := start(t, d, spec)

	hx := hex.EncodeToString(spec.Secret)
	b64 := base64.StdEncoding.EncodeToString(spec.Secret) // as in the stored handle
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, errb, res, err := c.ExecOutput(ctx, guest.ExecRequest{Shell: secretSearch, Env: map[string]string{
		"A": hx[:len(hx)/2], "B": hx[len(hx)/2:], "C": b64[:len(b64)/2], "D": b64[len(b64)/2:],
	}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("search: %v %+v: %s", err, res, errb)
	}
	if got := strings.TrimSpace(string(out)); got != "hit=0" {
		t.Errorf("the sandbox can read its secret or the guest's process:\n%s", got)
	}

	other := guest.NewClient(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, h) }, guest.NewSecret())
	defer other.Close()
	if _, err := other.Health(ctx); !errors.Is(err, guest.ErrUnauthenticated) {
		t.Errorf("a client with another secret: %v, want ErrUnauthenticated", err)
	}
}

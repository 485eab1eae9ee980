package agentkernel_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/ids"
)

// TestTenantCannotDriveAnotherTenantsSandbox is the attack of issue 10: a
// tenant's sandbox re-points the socket the daemon uses to reach its guest
// (found through /proc/self/mountinfo) at another tenant's sandbox, or
// listens there with a guest of its own, and then asks the daemon to run
// commands in "its" sandbox. No answer may carry the victim's hostname or
// secret, and no answer may come from the impostor.
func TestTenantCannotDriveAnotherTenantsSandbox(t *testing.T) {
	t.Run("process", func(t *testing.T) { testCrossTenantSocket(t, "process") })
	t.Run("docker", func(t *testing.T) {
		requireDocker(t)
		testCrossTenantSocket(t, "docker")
	})
}

// redirectScript replaces every socket on a host-backed mount of the
// attacker's sandbox with a symlink to the same path of the victim's
// sandbox (the host path of the mount with the sandbox id swapped), exactly
// as the issue describes for /run/agentkernel/guest.sock.
const redirectScript = `
n=0
while read -r _ _ _ root mnt _; do
  case "$root" in *"$ATTACKER"*) ;; *) continue ;; esac
  vroot=$(echo "$root" | sed "s/$ATTACKER/$VICTIM/g")
  for s in $(find "$mnt" -type s 2>/dev/null); do
    rel=${s#"$mnt"}
    rm -f "$s" && ln -s "$vroot$rel" "$s" && n=$((n+1)) && echo "redirected $s -> $vroot$rel"
  done
done < /proc/self/mountinfo
echo "redirected=$n"
`

// socketsScript lists every socket on a host-backed mount of the sandbox
// that the sandbox can write (a read-only one, such as the egress proxy's,
// it cannot replace: sandboxes_egress_test.go checks that).
const socketsScript = `
while read -r _ _ _ root mnt opts _; do
  case "$opts" in ro|ro,*) continue ;; esac
  case "$root" in *"$ATTACKER"*) find "$mnt" -type s 2>/dev/null ;; esac
done < /proc/self/mountinfo
`

// impostorCommand runs a guest of the attacker's own on socket $S (the
// current flags with a secret the attacker chose, else the old flags).
const impostorCommand = `echo 0000000000000000000000000000000000000000000000000000000000000000 > /tmp/fake.$N
export IMPOSTOR=1
/.agentkernel/guest guest --socket "$S" --state-dir /tmp/imp.$N --workdir /tmp --agent-socket /tmp/agent.$N --secret-fd 3 3</tmp/fake.$N ||
  exec /.agentkernel/guest guest --socket "$S" --state-dir /tmp/imp.$N --workdir /tmp`

func testCrossTenantSocket(t *testing.T, driver string) {
	ctx := context.Background()
	d := daemontest.Start(t)
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tenantClient := func(name string) *agentkernel.Client {
		tn, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: name, TenantID: tn.ID})
		if err != nil || k.Admin {
			t.Fatalf("key: %+v %v", k, err)
		}
		return agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(k.Secret))
	}
	victim, attacker := tenantClient("victim"), tenantClient("attacker")
	create := func(c *agentkernel.Client) *agentkernel.Sandbox {
		sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Driver: driver})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.Sandboxes.Delete(context.Background(), sb.ID) })
		return sb
	}
	sh := func(c *agentkernel.Client, id, cmd string, env map[string]string) *agentkernel.ExecResult {
		t.Helper()
		res, err := c.Sandboxes.Exec(ctx, id, agentkernel.ExecParams{Command: cmd, Env: env})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return res
	}

	vsb := create(victim)
	secret := ids.New("secret")
	if res := sh(victim, vsb.ID, "echo "+secret+" > /workspace/secret.txt && hostname", nil); res.ExitCode != 0 {
		t.Fatalf("victim setup: %+v", res)
	}
	victimHost := strings.TrimSpace(sh(victim, vsb.ID, "hostname", nil).Stdout)

	// The three concurrent execs of the issue, on the attacker's own
	// sandbox. An exec may fail (the attacker broke its own channel); it
	// must never answer with the victim's data or from the impostor.
	probe := func(t *testing.T, id string) (answers int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 3 {
			wg.Go(func() {
				res, err := attacker.Sandboxes.Exec(ctx, id, agentkernel.ExecParams{Command: "hostname; cat /workspace/secret.txt; echo impostor=$IMPOSTOR"})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Logf("exec on the attacker's sandbox failed (acceptable): %v", err)
					return
				}
				out := res.Stdout + res.Stderr
				if strings.Contains(out, secret) || strings.Contains(out, victimHost) {
					t.Errorf("the attacker's exec ran in the victim's sandbox: %q", out)
				}
				if strings.Contains(out, "impostor=1") {
					t.Errorf("the attacker's exec was answered by its impostor guest: %q", out)
				}
				answers++
			})
		}
		wg.Wait()
		return answers
	}

	t.Run("symlink", func(t *testing.T) {
		asb := create(attacker)
		env := map[string]string{"ATTACKER": asb.ID, "VICTIM": vsb.ID}
		t.Logf("mountinfo: %s", sh(attacker, asb.ID, "grep -e agentkernel -e "+asb.ID+" /proc/self/mountinfo", nil).Stdout)
		t.Logf("attack: %s", sh(attacker, asb.ID, redirectScript, env).Stdout)
		if n := probe(t, asb.ID); driver == "process" && n != 3 {
			t.Errorf("%d of 3 execs answered: the process driver's channel is out of the sandbox's reach", n)
		}
	})
	t.Run("impostor", func(t *testing.T) {
		asb := create(attacker)
		env := map[string]string{"ATTACKER": asb.ID, "VICTIM": vsb.ID}
		socks := strings.Fields(sh(attacker, asb.ID, socketsScript, env).Stdout)
		for i, s := range socks {
			ino := strings.TrimSpace(sh(attacker, asb.ID, `stat -c %i "$S"`, map[string]string{"S": s}).Stdout)
			res, err := attacker.Sandboxes.Exec(ctx, asb.ID, agentkernel.ExecParams{Command: impostorCommand, Background: true,
				Env: map[string]string{"S": s, "N": fmt.Sprint(i)}})
			if err != nil {
				t.Fatalf("start impostor: %v", err)
			}
			// The impostor listens once the socket is a new one.
			wait := sh(attacker, asb.ID, `for i in $(seq 1000); do [ "$(stat -c %i "$S" 2>/dev/null)" != "$INO" ] && [ -S "$S" ] && exit 0; sleep 0.01; done; exit 1`,
				map[string]string{"S": s, "INO": ino})
			if wait.ExitCode != 0 {
				t.Fatalf("the impostor on %s never listened (process %s)", s, res.ProcessID)
			}
		}
		if n := probe(t, asb.ID); driver == "process" && n != 3 {
			t.Errorf("%d of 3 execs answered: the process driver's channel is out of the sandbox's reach", n)
		}
	})
	// The attacker only ever broke its own channel: its next calls work
	// (the daemon restarts a sandbox whose guest socket was tampered with).
	list, err := attacker.Sandboxes.List(ctx, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("attacker's sandboxes: %d, %v", len(list), err)
	}
	for _, sb := range list {
		if got := strings.TrimSpace(sh(attacker, sb.ID, "hostname", nil).Stdout); got == victimHost || got == "" {
			t.Errorf("attacker's sandbox %s answers as %q", sb.ID, got)
		}
	}
	// The victim's sandbox is untouched.
	if got := sh(victim, vsb.ID, "cat /workspace/secret.txt", nil).Stdout; strings.TrimSpace(got) != secret {
		t.Fatalf("victim's secret = %q", got)
	}
}

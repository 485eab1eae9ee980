package agentkernel_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/sandbox/docker"
)

// TestSandboxDockerRoundTrip runs the hibernate/wake round trip on the
// docker driver, through the public API, when dockerd and the test image
// are there (scripts/test.sh starts dockerd and builds the image).
func TestSandboxDockerRoundTrip(t *testing.T) {
	ctx := context.Background()
	requireDockerImage(t)
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Driver: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "echo in-docker > /workspace/f"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	for range 2 {
		if got, err := c.Sandboxes.Stop(ctx, sb.ID); err != nil || got.State != "cold" {
			t.Fatalf("stop: %+v %v", got, err)
		}
		res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Argv: []string{"cat", "/workspace/f"}})
		if err != nil || res.Stdout != "in-docker\n" {
			t.Fatalf("after wake: %+v %v", res, err)
		}
	}
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// requireDockerImage skips unless dockerd answers and the test image exists
// (or can be built by scripts/docker-image/build.sh, which scripts/test.sh
// runs after starting dockerd).
func requireDockerImage(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	drv, err := docker.New("", nil)
	if err != nil {
		t.Skipf("docker client: %v", err)
	}
	defer drv.Close()
	if err := drv.Check(ctx); err != nil {
		t.Skipf("dockerd not reachable: %v", err)
	}
	if err := drv.CheckImage(ctx, docker.DefaultImage); err != nil {
		if out, err := exec.Command("bash", "scripts/docker-image/build.sh").CombinedOutput(); err != nil {
			t.Skipf("cannot build %s: %v\n%s", docker.DefaultImage, err, out)
		}
	}
}

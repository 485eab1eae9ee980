package agentkernel_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/sandbox/docker"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// TestSandboxDockerRoundTrip runs the hibernate/wake round trip on the
// docker driver, through the public API, when dockerd and the test image
// are there (scripts/test.sh starts dockerd and builds the image).
func TestSandboxDockerRoundTrip(t *testing.T) {
	ctx := context.Background()
	requireDocker(t)
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

// requireDocker skips unless dockerd answers and the test image is there
// (building it if it is not).
func requireDocker(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	drv, err := docker.New("", nil)
	if err != nil {
		testenv.Unavailable(t, "docker", "docker client: "+err.Error())
	}
	defer drv.Close()
	if err := drv.Check(ctx); err != nil {
		testenv.Unavailable(t, "docker", "dockerd not reachable: "+err.Error())
	}
	if err := drv.CheckImage(ctx, docker.DefaultImage); err != nil {
		if out, err := exec.Command("bash", "scripts/docker-image/build.sh").CombinedOutput(); err != nil {
			testenv.Unavailable(t, "docker", fmt.Sprintf("cannot build %s: %v\n%s", docker.DefaultImage, err, out))
		}
	}
}

package agentkernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// wantEnforced checks the runtime's per-limit report against the limits
// the sandbox should have: a cgroup or the engine holds each value (read
// back, not echoed), or the report says why not.
func wantEnforced(t *testing.T, sb *agentkernel.Sandbox, want agentkernel.SandboxLimits, mechanisms ...string) {
	t.Helper()
	if sb.Limits != want {
		t.Fatalf("limits = %+v, want %+v", sb.Limits, want)
	}
	if sb.Runtime == nil || !sb.Runtime.Running {
		t.Fatalf("no running instance: %+v", sb.Runtime)
	}
	for field, v := range map[string]float64{"memory_mb": float64(want.MemoryMB), "pids": float64(want.Pids), "cpus": want.CPUs} {
		e, ok := sb.Runtime.Enforcement[field]
		if !ok {
			t.Fatalf("enforcement of %s not reported: %+v", field, sb.Runtime.Enforcement)
		}
		if !contains(mechanisms, e.Mechanism) {
			t.Fatalf("%s enforced by %q (%s), want one of %q", field, e.Mechanism, e.Reason, mechanisms)
		}
		if e.Value != v {
			t.Fatalf("%s in force = %v, want %v", field, e.Value, v)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// forkMany starts 100 background processes, more than a pids limit of 64
// allows; the loop is bounded, so even an unlimited sandbox stops at 100.
const forkMany = `i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; echo started $i`

// TestSandboxLimitsByDefault: a sandbox created with {} through the HTTP
// API runs under the embedded defaults, each held by a cgroup and read back
// from it in GET.
func TestSandboxLimitsByDefault(t *testing.T) {
	d := daemontest.Start(t)
	code, body := call(t, "POST", d.URL+"/v1/sandboxes", d.AdminKey, `{}`)
	if code != 201 {
		t.Fatalf("create {}: %d %v", code, body)
	}
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Get(context.Background(), body["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	wantEnforced(t, sb, agentkernel.SandboxLimits{MemoryMB: 1024, Pids: 512, CPUs: 1}, "cgroup v1", "cgroup v2")
}

// TestSandboxForkBombStopsAtThePidsLimit: the [sandbox] defaults of the
// daemon's config apply to a sandbox that asks for nothing, and hold inside
// it: a loop forking past the pids limit cannot, an allocation past the
// memory limit fails, and the sandbox still answers afterwards.
func TestSandboxForkBombStopsAtThePidsLimit(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.Pids, c.Sandbox.MemoryMB, c.Sandbox.CPUs = 64, 128, 0.5 })
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Sandboxes.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEnforced(t, got, agentkernel.SandboxLimits{MemoryMB: 128, Pids: 64, CPUs: 0.5}, "cgroup v1", "cgroup v2")

	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: forkMany, TimeoutMS: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "started 100") {
		t.Fatalf("100 processes started under a pids limit of 64: %+v", res)
	}
	res, err = c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: `x=$(head -c 300000000 /dev/zero | tr '\0' a); echo ${#x}`, TimeoutMS: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "300000000") {
		t.Fatalf("a 300 MB allocation succeeded under a memory limit of 128 MB: %+v", res)
	}
	if res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "echo alive"}); err != nil || res.Stdout != "alive\n" {
		t.Fatalf("sandbox unusable after hitting its limits: %+v %v", res, err)
	}
}

// TestSandboxLimitsRequests: a request may ask for other limits within the
// operator's maximums; anything else is a 400 at once that names the field
// and the bound, and leaves no sandbox behind.
func TestSandboxLimitsRequests(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))

	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Limits: &agentkernel.SandboxLimits{MemoryMB: 256, Pids: 100, CPUs: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Sandboxes.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEnforced(t, got, agentkernel.SandboxLimits{MemoryMB: 256, Pids: 100, CPUs: 0.5}, "cgroup v1", "cgroup v2")
	// One field asked for, the others default.
	sb2, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Limits: &agentkernel.SandboxLimits{Pids: 2000}, Start: new(bool)})
	if err != nil || sb2.Limits != (agentkernel.SandboxLimits{MemoryMB: 1024, Pids: 2000, CPUs: 1}) {
		t.Fatalf("partial limits: %+v %v", sb2, err)
	}

	maxCPUs := fmt.Sprint(min(4, runtime.NumCPU()))
	for _, tc := range []struct{ limits, mentions string }{
		{`{"memory_mb": 9000}`, "limits.memory_mb\" = 9000: above the maximum of 8192 MB"},
		{`{"pids": 5000}`, "maximum of 4096"},
		{`{"cpus": 64}`, "maximum of " + maxCPUs},
		{`{"cpus": 1e308}`, "maximum of " + maxCPUs},
		// 2^62 MB overflows int64 when shifted to bytes; it is refused, never wrapped.
		{`{"memory_mb": 4611686018427387904}`, "maximum of 8192"},
		{`{"memory_mb": 9223372036854775807}`, "maximum of 8192"},
		{`{"memory_mb": 9223372036854775808}`, "limits.memory_mb"},
		{`{"memory_mb": 1.5}`, "limits.memory_mb"},
		{`{"memory_mb": -1}`, "minimum of 16 MB"},
		// Zero used to mean "no limit": it is refused, not silently defaulted.
		{`{"pids": 0}`, "not \"no limit\""},
		{`{"cpus": 0}`, "not \"no limit\""},
		// Too small for the guest to start: today's 503 after 32 s.
		{`{"pids": 4}`, "below the minimum of 16 a sandbox needs to start its guest"},
		{`{"memory_mb": 8}`, "below the minimum of 16 MB"},
		{`{"cpus": 0.01}`, "below the minimum of 0.05"},
		{`{"swap_mb": 10}`, "swap_mb"},
	} {
		code, body := call(t, "POST", d.URL+"/v1/sandboxes", d.AdminKey, `{"limits": `+tc.limits+`}`)
		typ, msg := errType(body)
		if code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, tc.mentions) {
			t.Errorf("limits %s: %d %s %q, want 400 mentioning %q", tc.limits, code, typ, msg, tc.mentions)
		}
	}
	list, err := c.Sandboxes.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		b, _ := json.Marshal(list)
		t.Fatalf("refused requests left sandboxes behind: %s", b)
	}
}

// TestSandboxLimitsConfigMaximums: the operator's maximums bound requests,
// and the error says which key sets them.
func TestSandboxLimitsConfigMaximums(t *testing.T) {
	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.MaxMemoryMB, c.Sandbox.MemoryMB = 512, 256 })
	code, body := call(t, "POST", d.URL+"/v1/sandboxes", d.AdminKey, `{"limits": {"memory_mb": 1024}, "start": false}`)
	if _, msg := errType(body); code != 400 || !strings.Contains(msg, "maximum of 512 MB") || !strings.Contains(msg, "max_memory_mb") {
		t.Fatalf("over the configured maximum: %d %q", code, msg)
	}
	code, body = call(t, "POST", d.URL+"/v1/sandboxes", d.AdminKey, `{"start": false}`)
	if lim, _ := body["limits"].(map[string]any); code != 201 || lim["memory_mb"] != 256.0 {
		t.Fatalf("configured default: %d %v", code, body)
	}
}

// TestSandboxDockerLimitsByDefault: the docker driver enforces the same
// defaults, read back from the engine, and holds the pids limit inside.
func TestSandboxDockerLimitsByDefault(t *testing.T) {
	ctx := context.Background()
	requireDocker(t)
	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.Pids = 64 })
	code, body := call(t, "POST", d.URL+"/v1/sandboxes", d.AdminKey, `{"driver": "docker"}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Get(ctx, body["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	wantEnforced(t, sb, agentkernel.SandboxLimits{MemoryMB: 1024, Pids: 64, CPUs: 1}, "docker")
	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: forkMany, TimeoutMS: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "started 100") {
		t.Fatalf("100 processes started under a pids limit of 64: %+v", res)
	}
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxCgroupsRemovedAfterStopAndDelete: every sandbox now has
// cgroups; a hibernated and then deleted sandbox leaves none behind.
func TestSandboxCgroupsRemovedAfterStopAndDelete(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Limits: &agentkernel.SandboxLimits{MemoryMB: 256}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Sandboxes.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for k, v := range got.Runtime.Detail {
		if strings.HasPrefix(k, "cgroup.") {
			dirs = append(dirs, v)
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no cgroups reported: %+v", got.Runtime)
	}
	if _, err := c.Sandboxes.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s left behind (%v)", dir, err)
		}
	}
}

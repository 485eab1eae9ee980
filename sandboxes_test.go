package agentkernel_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/object"
)

// TestSandboxRoundTripThroughSDK: create → exec → stop → start → exec with
// the workspace intact, plus files and streaming, all through the public
// API with the process driver.
func TestSandboxRoundTripThroughSDK(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))

	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Metadata: map[string]string{"team": "a"},
		Limits: &agentkernel.SandboxLimits{MemoryMB: 256, Pids: 128}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Sandboxes.Get(ctx, sb.ID); err != nil || got.Runtime == nil || !got.Runtime.Running ||
		(got.Runtime.LimitsApplied != "cgroup" && got.Runtime.LimitsApplied != "rlimit") {
		t.Fatalf("inspect: %+v %v", got.Runtime, err)
	}
	if sb.State != "active" || sb.Driver != "process" || !strings.HasPrefix(sb.ID, "sbx_") {
		t.Fatalf("created: %+v", sb)
	}
	// The instance's transitions are dated: started (warming), warmed
	// (active); no stop began.
	if sb.StartedAt == nil || sb.WarmedAt == nil || sb.WarmedAt.Before(*sb.StartedAt) || sb.StoppingAt != nil {
		t.Fatalf("created: started_at %v, warmed_at %v, stopping_at %v", sb.StartedAt, sb.WarmedAt, sb.StoppingAt)
	}
	firstWarm := *sb.WarmedAt
	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "echo hello > greeting && cat greeting && echo oops >&2; exit 3"})
	if err != nil || res.ExitCode != 3 || res.Stdout != "hello\n" || res.Stderr != "oops\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if err := c.Sandboxes.WriteFile(ctx, sb.ID, "dir/data.bin", bytes.NewReader([]byte{0, 1, 2, 255}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Sandboxes.Get(ctx, sb.ID); got.State != "cold" || got.StartedAt != nil || got.WarmedAt != nil || got.StoppingAt != nil {
		t.Fatalf("after stop: %s, started_at %v, warmed_at %v, stopping_at %v", got.State, got.StartedAt, got.WarmedAt, got.StoppingAt)
	}
	if got, err := c.Sandboxes.Start(ctx, sb.ID); err != nil || got.State != "active" {
		t.Fatalf("start: %+v %v", got, err)
	} else if got.StartedAt == nil || got.WarmedAt == nil || got.StartedAt.Before(firstWarm) || got.WarmedAt.Before(*got.StartedAt) {
		t.Fatalf("after start: started_at %v, warmed_at %v (the first warm-up: %v)", got.StartedAt, got.WarmedAt, firstWarm)
	}
	res, err = c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Argv: []string{"cat", "/workspace/greeting"}})
	if err != nil || res.Stdout != "hello\n" {
		t.Fatalf("workspace lost across stop/start: %+v %v", res, err)
	}
	b, err := c.Sandboxes.ReadFile(ctx, sb.ID, "dir/data.bin")
	if err != nil || !bytes.Equal(b, []byte{0, 1, 2, 255}) {
		t.Fatalf("read file: %v %v", b, err)
	}
	// Files are bounded by sandbox.max_file_bytes, not by the JSON body limit.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	if err := c.Sandboxes.WriteFile(ctx, sb.ID, "big.bin", bytes.NewReader(big), 0); err != nil {
		t.Fatalf("3 MiB upload: %v", err)
	}
	if b, err := c.Sandboxes.ReadFile(ctx, sb.ID, "big.bin"); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("3 MiB download: %d bytes, %v", len(b), err)
	}
	var out, errOut bytes.Buffer
	sres, err := c.Sandboxes.ExecStream(ctx, sb.ID, agentkernel.ExecParams{Command: "for i in 1 2 3; do echo $i; done; echo e >&2"}, &out, &errOut)
	if err != nil || sres.ExitCode != 0 || out.String() != "1\n2\n3\n" || errOut.String() != "e\n" {
		t.Fatalf("stream: %q %q %+v %v", out.String(), errOut.String(), sres, err)
	}
	res, err = c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Argv: []string{"no-such-binary"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing binary: %+v %v", res, err)
	}
	bs, err := c.Sandboxes.Backups(ctx, sb.ID)
	if err != nil || len(bs) != 1 || bs[0].Size == 0 || len(bs[0].SHA256) != 64 {
		t.Fatalf("backups: %+v %v", bs, err)
	}
	resp, err := http.Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`agentkernel_sandboxes{driver="process",state="active"} 1`,
		`agentkernel_sandbox_warmup_duration_seconds_count{driver="process"} 2`,
		`agentkernel_sandbox_snapshot_duration_seconds_count{driver="process"} 1`,
		`agentkernel_sandbox_snapshot_bytes_total{driver="process"}`,
		`agentkernel_sandbox_hibernations_total{driver="process",reason="requested"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "true"}); !isStatus(err, 409) {
		t.Fatalf("exec on a destroyed sandbox: %v", err)
	}

	// The state history outlives the instances: both warm-ups, the stop,
	// the destroy (its final snapshot taken while active), each dated by
	// its fact, in order.
	trs, err := c.Sandboxes.Transitions(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for i, tr := range trs {
		seq = append(seq, tr.State)
		if tr.Seq != int64(i+1) || (i > 0 && tr.At.Before(trs[i-1].At)) {
			t.Errorf("transition %d: %+v after %+v", i, tr, trs[max(i-1, 0)])
		}
	}
	if got, want := strings.Join(seq, " "), "cold warming active stopping cold warming active destroyed"; got != want {
		t.Fatalf("transitions:\n got %s\nwant %s", got, want)
	}
	if !trs[2].At.Equal(firstWarm) || trs[6].Generation < trs[2].Generation {
		t.Fatalf("the first warm-up at %v, want warmed_at %v; generations %d then %d", trs[2].At, firstWarm, trs[2].Generation, trs[6].Generation)
	}
	other := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(tenantKey(t, d, "other")))
	if _, err := other.Sandboxes.Transitions(ctx, sb.ID); !isStatus(err, 404) {
		t.Fatalf("another tenant's transitions: %v", err)
	}
	if _, err := c.Sandboxes.Transitions(ctx, "sbx_unknown"); !isStatus(err, 404) {
		t.Fatalf("an unknown sandbox's transitions: %v", err)
	}
}

func TestSandboxBadInput(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.MaxFileBytes = 1 << 20 })
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := admin.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	// Unknown driver or image: 422 naming it.
	if _, err := admin.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Driver: "vmware"}); !isStatus(err, 422) || !strings.Contains(err.Error(), "vmware") {
		t.Fatalf("unknown driver: %v", err)
	}
	if _, err := admin.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Image: "nope"}); !isStatus(err, 422) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown image: %v", err)
	}
	if _, err := admin.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{SleepAfter: "soon"}); !isStatus(err, 422) || !strings.Contains(err.Error(), "sleep_after") {
		t.Fatalf("bad sleep_after: %v", err)
	}
	// agentkernel's own metadata marks (a shared object sandbox's) are not
	// the API's to set.
	if _, err := admin.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Metadata: map[string]string{object.SharedMetadataKey: "counter/0"}}); !isStatus(err, 422) || !strings.Contains(err.Error(), object.SharedMetadataKey) {
		t.Fatalf("reserved metadata key: %v", err)
	}
	// Path traversal: literal and encoded dots are refused before anything is read.
	for _, p := range []string{"/v1/sandboxes/" + sb.ID + "/files/a/%2e%2e/%2e%2e/etc/passwd", "/v1/sandboxes/" + sb.ID + "/files/%2E%2E%2Fescape"} {
		code, body := call(t, "GET", d.URL+p, d.AdminKey, "")
		if typ, msg := errType(body); code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, "..") {
			t.Fatalf("%s: %d %v", p, code, body)
		}
	}
	// A symlink in the workspace pointing out is not followed.
	if res, err := admin.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "ln -s /etc escape"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("ln: %+v %v", res, err)
	}
	if _, err := admin.Sandboxes.ReadFile(ctx, sb.ID, "escape/hostname"); err == nil {
		t.Fatal("read through a symlink pointing out of /workspace")
	}
	// Another tenant's sandbox answers 404.
	tn, _ := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "other"})
	k, _ := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "o", TenantID: tn.ID})
	other := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(k.Secret))
	if _, err := other.Sandboxes.Get(ctx, sb.ID); !agentkernel.IsNotFound(err) {
		t.Fatalf("other tenant get: %v", err)
	}
	if _, err := other.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "true"}); !agentkernel.IsNotFound(err) {
		t.Fatalf("other tenant exec: %v", err)
	}
	if list, err := other.Sandboxes.List(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("other tenant list: %v %v", list, err)
	}
	// A cwd that is not a directory is the caller's mistake, named.
	for _, cwd := range []string{"/nonexistent", "/etc/passwd"} {
		if _, err := admin.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "pwd", Cwd: cwd}); !isStatus(err, 400) || !strings.Contains(err.Error(), "cwd") {
			t.Fatalf("exec in cwd %s: %v", cwd, err)
		}
	}
	// Exec without a command, and an oversized file.
	if _, err := admin.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{}); !isStatus(err, 400) || !strings.Contains(err.Error(), "command") {
		t.Fatalf("empty exec: %v", err)
	}
	big := bytes.NewReader(make([]byte, d.Config.Sandbox.MaxFileBytes+1))
	if err := admin.Sandboxes.WriteFile(ctx, sb.ID, "big", big, 0); !isStatus(err, 413) || !strings.Contains(err.Error(), "max_file_bytes") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := admin.Sandboxes.List(ctx, "sleeping"); !isStatus(err, 400) {
		t.Fatalf("bad state filter: %v", err)
	}
}

// TestSandboxWithSpecialFilesHibernates: a FIFO or a unix socket in the
// workspace cannot be archived and is skipped, which must not fail the
// snapshot's verification — else the sandbox could never stop or be
// deleted. The regular files around it survive the round trip.
func TestSandboxWithSpecialFilesHibernates(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	script := `mkfifo pipe && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")' && echo kept > note && echo too > 'back\slash'`
	if res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: script}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if got, err := c.Sandboxes.Stop(ctx, sb.ID); err != nil || got.State != "cold" {
		t.Fatalf("stop with a FIFO, a socket and a backslash name in the workspace: %+v %v", got, err)
	}
	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: `cat note 'back\slash'`})
	if err != nil || res.Stdout != "kept\ntoo\n" {
		t.Fatalf("after wake: %+v %v", res, err)
	}
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

func TestUnavailable(t *testing.T) {
	d, err := New("", nil, client.WithHost("unix:///nonexistent/agentkernel/docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := t.Context()
	var ue *sandbox.UnavailableError
	err = d.Check(ctx)
	if !errors.As(err, &ue) || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Check = %v, want *sandbox.UnavailableError", err)
	}
	if ue.Driver != Name || !strings.Contains(ue.Reason, "/nonexistent/agentkernel/docker.sock") || !strings.Contains(ue.Reason, "start dockerd") {
		t.Errorf("reason %q must name the socket and say what to do", ue.Reason)
	}
	spec := newSpec(t, scriptGuest(t, ""))
	if _, err := d.Start(ctx, spec); !errors.As(err, &ue) {
		t.Errorf("Start = %v, want *sandbox.UnavailableError", err)
	}
	h := &sandbox.Handle{ID: spec.ID, Driver: Name, State: encodeState("abc")}
	if _, err := d.Inspect(ctx, h); !errors.As(err, &ue) {
		t.Errorf("Inspect = %v, want *sandbox.UnavailableError", err)
	}
	if _, err := d.List(ctx); !errors.As(err, &ue) {
		t.Errorf("List = %v, want *sandbox.UnavailableError", err)
	}
	if err := d.CheckImage(ctx, ""); !errors.As(err, &ue) {
		t.Errorf("CheckImage = %v, want *sandbox.UnavailableError", err)
	}
}

func TestUnknownImage(t *testing.T) {
	d := engine(t)
	spec := newSpec(t, scriptGuest(t, ""))
	spec.Image = "agentkernel/no-such-image:" + spec.ID
	h, err := d.Start(t.Context(), spec)
	if err == nil {
		d.Destroy(context.Background(), h)
		t.Fatal("Start with a missing image succeeded")
	}
	if !errors.Is(err, sandbox.ErrUnknownImage) || !strings.Contains(err.Error(), spec.Image) {
		t.Fatalf("err = %v, want ErrUnknownImage naming %s", err, spec.Image)
	}
	if err := d.CheckImage(t.Context(), spec.Image); !errors.Is(err, sandbox.ErrUnknownImage) || !strings.Contains(err.Error(), spec.Image) {
		t.Errorf("CheckImage = %v, want ErrUnknownImage naming %s", err, spec.Image)
	}
	for _, img := range []string{"", DefaultImage} {
		if err := d.CheckImage(t.Context(), img); err != nil {
			t.Errorf("CheckImage(%q) = %v, want the built test image found", img, err)
		}
	}
}

func TestLifecycle(t *testing.T) {
	d := engine(t)
	ctx := t.Context()
	spec := newSpec(t, scriptGuest(t, report("pid", "echo $$")))
	h := start(t, d, spec)
	if h.ID != spec.ID || h.Driver != Name || string(h.Secret) != string(spec.Secret) {
		t.Errorf("handle = %+v", h)
	}
	if pid := waitFile(t, filepath.Join(spec.WorkspaceDir, "pid")); pid != "1" {
		t.Errorf("guest runs as pid %s, want 1", pid)
	}

	st, err := d.Inspect(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.StartedAt.IsZero() || st.LimitsApplied != "none" {
		t.Errorf("running status = %+v", st)
	}

	if err := d.Stop(ctx, h, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if st, err = d.Inspect(ctx, h); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.ExitCode != 0 {
		t.Errorf("after Stop: running %v exit %d, want a clean exit on SIGTERM", st.Running, st.ExitCode)
	}
	if err := d.Stop(ctx, h, time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := os.Stat(spec.WorkspaceDir); err != nil {
		t.Errorf("workspace must survive stop: %v", err)
	}

	if err := d.Destroy(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(ctx, h); !isGone(err) {
		t.Errorf("Inspect after Destroy = %v, want ErrGone", err)
	}
	if err := d.Destroy(ctx, h); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if err := d.Stop(ctx, h, time.Second); err != nil {
		t.Errorf("Stop after Destroy: %v", err)
	}
}

func TestStopKillsAfterTimeout(t *testing.T) {
	d := engine(t)
	// A guest that ignores SIGTERM must be killed once the timeout expires.
	guest := filepath.Join(t.TempDir(), "stubborn.sh")
	os.WriteFile(guest, []byte("#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 1; done\n"), 0o755)
	h := start(t, d, newSpec(t, guest))
	if err := d.Stop(t.Context(), h, 0); err != nil {
		t.Fatal(err)
	}
	st, err := d.Inspect(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || st.ExitCode != 137 {
		t.Errorf("running %v exit %d, want killed (137)", st.Running, st.ExitCode)
	}
}

func TestRestartSameID(t *testing.T) {
	d := engine(t)
	ctx := t.Context()
	spec := newSpec(t, scriptGuest(t, ""))
	h1 := start(t, d, spec)
	if _, err := d.Start(ctx, spec); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start while running = %v, want an 'already running' error", err)
	}
	if err := d.Stop(ctx, h1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Waking a stopped sandbox starts it again under the same name.
	h2 := start(t, d, spec)
	if string(h2.State) == string(h1.State) {
		t.Errorf("restart reused the old container %s", h1.State)
	}
	if st, err := d.Inspect(ctx, h2); err != nil || !st.Running {
		t.Errorf("restarted sandbox: %+v, %v", st, err)
	}
	if _, err := d.Inspect(ctx, h1); !isGone(err) {
		t.Errorf("old container: %v, want ErrGone", err)
	}
}

func TestSpecApplied(t *testing.T) {
	d := engine(t)
	appDir := t.TempDir()
	os.WriteFile(filepath.Join(appDir, "app.txt"), []byte("hello app"), 0o644)
	spec := newSpec(t, scriptGuest(t, report("seen", `echo "env=$GREETING"; echo "cwd=$(pwd)"; cat /app/app.txt; echo; touch /app/x 2>/dev/null && echo app-writable || echo app-readonly; touch /.agentkernel/guest 2>/dev/null && echo guest-writable || echo guest-readonly; touch /run/agentkernel/probe && echo run-writable; touch /.agentkernel/sock/probe && echo sock-writable; touch /etc/x 2>/dev/null && echo etc-writable || echo etc-readonly; touch /tmp/x && echo tmp-writable`)))
	spec.Env = map[string]string{"GREETING": "hi there"}
	spec.Mounts = []sandbox.Mount{{Source: appDir, Target: sandbox.AppPath, ReadOnly: true}}
	spec.Labels = map[string]string{"agentkernel.tenant": "t1"}
	h := start(t, d, spec)
	got := waitFile(t, filepath.Join(spec.WorkspaceDir, "seen"))
	want := "env=hi there\ncwd=/workspace\nhello app\napp-readonly\nguest-readonly\nrun-writable\nsock-writable\netc-readonly\ntmp-writable"
	if got != want {
		t.Errorf("inside the sandbox:\n%s\nwant:\n%s", got, want)
	}
	// Only the socket directory is shared with the host; /run/agentkernel
	// (the agent socket) is the container's own.
	if _, err := os.Stat(filepath.Join(spec.RunDir, sockDirName, "probe")); err != nil {
		t.Errorf("the socket dir is not shared with the host: %v", err)
	}
	if _, err := os.Stat(filepath.Join(spec.RunDir, "probe")); err == nil {
		t.Errorf("/run/agentkernel is the host's run dir")
	}
	res, err := d.cli.ContainerInspect(t.Context(), mustID(t, h), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := res.Container.Config.Labels; l["agentkernel.tenant"] != "t1" || l[LabelSandbox] != spec.ID || l[LabelManaged] != "true" {
		t.Errorf("labels = %v", l)
	}
	if res.Container.Name != "/agentkernel-"+spec.ID {
		t.Errorf("name = %q", res.Container.Name)
	}
}

func TestNetwork(t *testing.T) {
	d := engine(t)
	hostIfs, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Skip("cannot list host interfaces:", err)
	}
	for _, tc := range []struct {
		network string
		want    []string
	}{
		{sandbox.NetworkNone, []string{"lo"}},
		{"", []string{"lo"}},
		{sandbox.NetworkHost, names(hostIfs)},
	} {
		t.Run("network="+tc.network, func(t *testing.T) {
			spec := newSpec(t, scriptGuest(t, report("ifs", "ls /sys/class/net")))
			spec.Network = tc.network
			start(t, d, spec)
			got := strings.Fields(waitFile(t, filepath.Join(spec.WorkspaceDir, "ifs")))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("interfaces %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	d := engine(t)
	// cgroup v1 and v2 paths; whichever exists answers.
	probe := `cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max`
	spec := newSpec(t, scriptGuest(t, report("limits", probe)))
	spec.Limits = sandbox.Limits{MemoryMB: 96, Pids: 40, CPUs: 0.5}
	h := start(t, d, spec)

	res, err := d.cli.ContainerInspect(t.Context(), mustID(t, h), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := res.Container.HostConfig
	if hc.Memory != 96<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 40 || hc.NanoCPUs != 500_000_000 {
		t.Errorf("engine reports memory %d pids %v nanocpus %d", hc.Memory, hc.PidsLimit, hc.NanoCPUs)
	}
	if hc.NetworkMode != "none" || hc.Init == nil || *hc.Init || hc.RestartPolicy.Name != "no" {
		t.Errorf("engine reports network %q init %v restart %q", hc.NetworkMode, hc.Init, hc.RestartPolicy.Name)
	}
	got := strings.Fields(waitFile(t, filepath.Join(spec.WorkspaceDir, "limits")))
	if want := []string{"100663296", "40"}; !slices.Equal(got, want) {
		t.Errorf("cgroup limits seen inside = %v, want %v", got, want)
	}
	st, err := d.Inspect(t.Context(), h)
	if err != nil || st.LimitsApplied != "docker" {
		t.Errorf("Inspect = %+v, %v", st, err)
	}
}

func TestListAndRecover(t *testing.T) {
	d := engine(t)
	ctx := t.Context()
	spec := newSpec(t, scriptGuest(t, ""))
	h := start(t, d, spec)

	list, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(l *sandbox.Handle) bool { return l.ID == spec.ID })
	if i < 0 {
		t.Fatalf("List does not find %s among %d handles", spec.ID, len(list))
	}
	if got := list[i]; got.Driver != Name || mustID(t, got) != mustID(t, h) || got.Secret != nil {
		t.Errorf("listed handle %+v, want %+v without the secret", got, h)
	}

	// A fresh driver (a restarted daemon) reattaches from the persisted
	// handle alone.
	saved, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d2 := engine(t)
	var back sandbox.Handle
	if err := json.Unmarshal(saved, &back); err != nil {
		t.Fatal(err)
	}
	if err := d2.Recover(ctx, &back); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if err := d2.Stop(ctx, &back, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := d2.Recover(ctx, &back); !isGone(err) {
		t.Errorf("Recover of a stopped sandbox = %v, want ErrGone", err)
	}
	if err := d2.Destroy(ctx, &back); err != nil {
		t.Fatal(err)
	}
	if err := d2.Recover(ctx, &back); !isGone(err) {
		t.Errorf("Recover of a destroyed sandbox = %v, want ErrGone", err)
	}
	list, err = d2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(list, func(l *sandbox.Handle) bool { return l.ID == spec.ID }) {
		t.Errorf("List still shows destroyed %s", spec.ID)
	}
}

func TestStartRejectsMissingGuest(t *testing.T) {
	d := engine(t)
	spec := newSpec(t, filepath.Join(t.TempDir(), "no-guest"))
	if _, err := d.Start(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "spec.GuestBinary") {
		t.Fatalf("Start = %v, want an error naming spec.GuestBinary", err)
	}
}

func TestFailedStartLeavesNothing(t *testing.T) {
	d := engine(t)
	// Created fine, but the engine cannot exec a guest without the x bit.
	guest := filepath.Join(t.TempDir(), "guest")
	os.WriteFile(guest, []byte("#!/bin/sh\nsleep 3600\n"), 0o644)
	spec := newSpec(t, guest)
	if h, err := d.Start(t.Context(), spec); err == nil {
		d.Destroy(context.Background(), h)
		t.Fatal("Start of a non-executable guest succeeded")
	}
	list, err := d.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(list, func(l *sandbox.Handle) bool { return l.ID == spec.ID }) {
		t.Error("a failed Start left a container behind")
	}
}

func mustID(t testing.TB, h *sandbox.Handle) string {
	t.Helper()
	id, err := containerID(h)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func names(des []os.DirEntry) []string {
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	slices.Sort(out)
	return out
}

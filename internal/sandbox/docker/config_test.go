package docker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/mount"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

func testSpec() sandbox.Spec {
	return sandbox.Spec{
		ID:           "sbx_abc",
		WorkspaceDir: "/srv/ws",
		RunDir:       "/srv/run",
		Secret:       []byte("0123456789abcdef0123456789abcdef"),
		GuestBinary:  "/usr/lib/agentkernel/guest",
		Env:          map[string]string{"B": "2", "A": "1"},
		Labels:       map[string]string{"team": "x", LabelManaged: "false"},
		Mounts:       []sandbox.Mount{{Source: "/srv/app", Target: sandbox.AppPath, ReadOnly: true}},
		Limits:       sandbox.Limits{MemoryMB: 128, Pids: 64, CPUs: 1.5},
	}
}

func TestBuildCreate(t *testing.T) {
	o, err := buildCreate(testSpec(), "img:1")
	if err != nil {
		t.Fatal(err)
	}
	if o.name != "agentkernel-sbx_abc" {
		t.Errorf("name = %q", o.name)
	}
	c, h := o.config, o.host
	if c.Image != "img:1" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != sandbox.GuestBinaryPath {
		t.Errorf("image/entrypoint = %q %q", c.Image, c.Entrypoint)
	}
	if !h.ReadonlyRootfs || h.Tmpfs["/tmp"] == "" || h.Tmpfs[guestStateDir] == "" || h.Tmpfs[sandbox.AgentDir] == "" {
		t.Errorf("rootfs read-only %v, tmpfs %v: want read-only with tmpfs /tmp, %s and %s", h.ReadonlyRootfs, h.Tmpfs, guestStateDir, sandbox.AgentDir)
	}
	// The secret goes to the guest on stdin, never into the container's
	// configuration.
	if !c.OpenStdin || !c.StdinOnce || strings.Contains(fmt.Sprint(c.Cmd, c.Env, c.Entrypoint, c.Labels), "0123456789abcdef") {
		t.Errorf("stdin %v/%v, cmd %q env %q: want the secret on stdin only", c.OpenStdin, c.StdinOnce, c.Cmd, c.Env)
	}
	if got := strings.Join(c.Env, ","); got != "A=1,B=2" {
		t.Errorf("env = %q, want sorted A=1,B=2", got)
	}
	if c.Labels[LabelSandbox] != "sbx_abc" || c.Labels[LabelManaged] != "true" || c.Labels["team"] != "x" {
		t.Errorf("labels = %v (caller must not override %s)", c.Labels, LabelManaged)
	}
	if h.NetworkMode != "none" {
		t.Errorf("network = %q, want none by default", h.NetworkMode)
	}
	if h.Init == nil || *h.Init {
		t.Errorf("init = %v, want explicit false (the guest is PID 1)", h.Init)
	}
	if h.RestartPolicy.Name != "no" {
		t.Errorf("restart policy = %q", h.RestartPolicy.Name)
	}
	if h.Memory != 128<<20 || h.MemorySwap != 128<<20 || h.PidsLimit == nil || *h.PidsLimit != 64 || h.NanoCPUs != 1_500_000_000 {
		t.Errorf("resources = mem %d swap %d pids %v cpus %d", h.Memory, h.MemorySwap, h.PidsLimit, h.NanoCPUs)
	}
	want := map[string]mount.Mount{
		sandbox.GuestBinaryPath: {Type: mount.TypeBind, Source: "/usr/lib/agentkernel/guest", Target: sandbox.GuestBinaryPath, ReadOnly: true},
		sandbox.WorkspacePath:   {Type: mount.TypeBind, Source: "/srv/ws", Target: sandbox.WorkspacePath},
		guestSockDir:            {Type: mount.TypeBind, Source: "/srv/run/sock", Target: guestSockDir},
		sandbox.AppPath:         {Type: mount.TypeBind, Source: "/srv/app", Target: sandbox.AppPath, ReadOnly: true},
	}
	if len(h.Mounts) != len(want) {
		t.Fatalf("mounts = %+v", h.Mounts)
	}
	for _, m := range h.Mounts {
		w, ok := want[m.Target]
		if !ok || m.Type != w.Type || m.Source != w.Source || m.ReadOnly != w.ReadOnly {
			t.Errorf("mount %+v, want %+v", m, w)
		}
	}
}

func TestBuildCreateNoLimits(t *testing.T) {
	s := testSpec()
	s.Limits = sandbox.Limits{}
	s.Network = sandbox.NetworkHost
	o, err := buildCreate(s, "img")
	if err != nil {
		t.Fatal(err)
	}
	if h := o.host; h.Memory != 0 || h.MemorySwap != 0 || h.PidsLimit != nil || h.NanoCPUs != 0 {
		t.Errorf("zero limits must leave resources unset: %+v", h.Resources)
	}
	if o.host.NetworkMode != "host" {
		t.Errorf("network = %q, want host", o.host.NetworkMode)
	}
}

func TestBuildCreateRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*sandbox.Spec)
		field string
	}{
		{"empty id", func(s *sandbox.Spec) { s.ID = "" }, "spec.ID"},
		{"id with slash", func(s *sandbox.Spec) { s.ID = "a/b" }, "spec.ID"},
		{"relative workspace", func(s *sandbox.Spec) { s.WorkspaceDir = "ws" }, "spec.WorkspaceDir"},
		{"missing run dir", func(s *sandbox.Spec) { s.RunDir = "" }, "spec.RunDir"},
		{"relative guest", func(s *sandbox.Spec) { s.GuestBinary = "guest" }, "spec.GuestBinary"},
		{"relative mount", func(s *sandbox.Spec) { s.Mounts[0].Target = "app" }, "spec.Mounts[0]"},
		{"negative memory", func(s *sandbox.Spec) { s.Limits.MemoryMB = -1 }, "spec.Limits"},
		// 2^62 MB shifted to bytes wraps to 0: no limit at all.
		{"memory overflowing bytes", func(s *sandbox.Spec) { s.Limits.MemoryMB = 1 << 62 }, "out of range"},
		{"bad network", func(s *sandbox.Spec) { s.Network = "bridge" }, "spec.Network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			tc.edit(&s)
			_, err := buildCreate(s, "img")
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want one naming %s", err, tc.field)
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	h := &sandbox.Handle{ID: "sbx_1", Driver: Name, State: encodeState("c0ffee")}
	id, err := containerID(h)
	if err != nil || id != "c0ffee" {
		t.Fatalf("containerID = %q, %v", id, err)
	}
	for _, bad := range []*sandbox.Handle{
		nil,
		{ID: "x", Driver: "process", State: encodeState("c")},
		{ID: "x", Driver: Name, State: []byte(`{}`)},
		{ID: "x", Driver: Name, State: []byte(`not json`)},
	} {
		if _, err := containerID(bad); err == nil {
			t.Errorf("containerID(%+v) accepted a bad handle", bad)
		}
	}
}

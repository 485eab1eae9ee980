package packages

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

func newTestService(t *testing.T) (*Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := New(Config{Store: st, Dir: t.TempDir(), PipIndexURL: "http://127.0.0.1:4321/simple"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, st
}

// A build's staging directory (read-write) and its egress policy belong
// to the one sandbox its row names: another sandbox that carries the same
// metadata (any tenant can set metadata on its own sandboxes) gets
// neither, and a ready layer is mounted only for its own tenant.
func TestOnlyTheBuildSandboxGetsTheBuild(t *testing.T) {
	ctx := context.Background()
	s, st := newTestService(t)
	if _, err := st.CreatePackageBuild(ctx, &store.PackageBuild{TenantID: "t1", Key: "k1", Status: store.BuildBuilding, SandboxID: "sbx_build"}); err != nil {
		t.Fatal(err)
	}
	h := s.Hooks()
	builder := &store.Sandbox{ID: "sbx_build", TenantID: "t1", Metadata: map[string]string{MetaBuild: "k1"}}
	for _, sb := range []*store.Sandbox{
		{ID: "sbx_other", TenantID: "t1", Metadata: map[string]string{MetaBuild: "k1"}},
		{ID: "sbx_build", TenantID: "t2", Metadata: map[string]string{MetaBuild: "k1"}},
		{ID: "sbx_plain", TenantID: "t1"},
	} {
		if _, err := s.Policy(ctx, sb); !errors.Is(err, egress.ErrNoPolicy) {
			t.Errorf("%s of %s: policy err %v, want ErrNoPolicy", sb.ID, sb.TenantID, err)
		}
		if m := h.Mounts(sb); len(m) != 0 {
			t.Errorf("%s of %s: mounts %v", sb.ID, sb.TenantID, m)
		}
	}
	pol, err := s.Policy(ctx, builder)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, hp := range pol.Allow {
		hosts = append(hosts, hp.String())
	}
	if all := strings.Join(hosts, " "); !strings.Contains(all, "127.0.0.1:4321") || !strings.Contains(all, "pypi.org") || pol.Unrestricted {
		t.Fatalf("build policy allows %s (unrestricted %v)", all, pol.Unrestricted)
	}
	if m := h.Mounts(builder); len(m) != 1 || m[0].ReadOnly || m[0].Target != Path {
		t.Fatalf("build sandbox mounts %v", m)
	}

	// Ready: its layer, read-only, for its tenant's sandboxes only.
	b, err := st.GetPackageBuild(ctx, "t1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	b.Status, b.SandboxID = store.BuildReady, ""
	if _, err := st.UpdatePackageBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.layerDir("t1", "k1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if m := h.Mounts(builder); len(m) != 0 {
		t.Fatalf("a finished build's sandbox still gets %v", m)
	}
	own := &store.Sandbox{ID: "sbx_a", TenantID: "t1", Metadata: map[string]string{MetaLayer: "k1"}}
	if m := h.Mounts(own); len(m) != 1 || !m[0].ReadOnly || m[0].Source != s.layerDir("t1", "k1") {
		t.Fatalf("layer mounts %v", m)
	}
	if env := h.Env(own); !strings.HasPrefix(env["PATH"], Path) || env["PYTHONPATH"] == "" {
		t.Fatalf("layer env %v", env)
	}
	other := &store.Sandbox{ID: "sbx_b", TenantID: "t2", Metadata: map[string]string{MetaLayer: "k1"}}
	if m := h.Mounts(other); len(m) != 0 {
		t.Fatalf("another tenant's sandbox gets the layer: %v", m)
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"requests", "requests==2.31.0", "numpy>=1.2,<2", "lodash@4.17.21", "@scope/pkg@^1.0.0", "pkg[extra]"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-e", "--index-url=x", "a b", "a;b", "a\nb", "$(x)", strings.Repeat("a", 257)} {
		if CheckName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

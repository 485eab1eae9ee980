package resources

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// gitRemote is a repository served over git's dumb HTTP protocol, counting
// the clones it serves.
type gitRemote struct {
	url    string
	work   string
	clones atomic.Int32
	run    func(dir string, args ...string) string
}

func newGitRemote(t *testing.T) *gitRemote {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	g := &gitRemote{work: filepath.Join(root, "work")}
	bare := filepath.Join(root, "srv", "r.git")
	g.run = func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(g.work, 0o755); err != nil {
		t.Fatal(err)
	}
	g.run(g.work, "init", "-q", "-b", "main")
	g.run(root, "init", "-q", "--bare", "-b", "main", bare)
	g.commit(t, "one\n")
	fs := http.FileServer(http.Dir(filepath.Join(root, "srv")))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			g.clones.Add(1)
		}
		fs.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/r.git"
	return g
}

// commit writes README, commits it and publishes it; it returns the commit.
func (g *gitRemote) commit(t *testing.T, readme string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.work, "README"), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	g.run(g.work, "add", "README")
	g.run(g.work, "commit", "-q", "-m", readme)
	bare := filepath.Join(filepath.Dir(g.work), "srv", "r.git")
	g.run(g.work, "push", "-q", bare, "main")
	g.run(bare, "update-server-info")
	return g.run(g.work, "rev-parse", "HEAD")
}

func newJournalService(t *testing.T, g *gitRemote) (*Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	host := strings.TrimPrefix(strings.TrimSuffix(g.url, "/r.git"), "http://")
	_, port, _ := net.SplitHostPort(host)
	allowed, err := egress.ParseHosts([]string{"127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return New(Config{Store: st, GitInternalHosts: allowed, Resolver: fakeResolver{netip.MustParseAddr("127.0.0.1")},
		Now: func() time.Time { return now }}), st
}

func readme(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "README"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCloneIsJournalled: the clone of a repository resource is an
// outbound call of the session in the op journal, completed with the
// commit it got; asked again for the same sandbox instance (a crash
// between the clone and the copy into the sandbox), it is replayed at
// that commit even though the branch moved on; a new instance is a new
// clone, a new op.
func TestCloneIsJournalled(t *testing.T) {
	g := newGitRemote(t)
	s, st := newJournalService(t, g)
	ctx := context.Background()
	const sess = "sesn_clone1"
	r := &store.SessionResource{ID: "sesrsc_1", SessionID: sess, Kind: KindGitHub}
	d := repoDoc{URL: g.url}
	first := g.run(g.work, "rev-parse", "HEAD")

	dir := filepath.Join(t.TempDir(), "c")
	if err := s.journalledClone(ctx, sess, "sb_1@1", r, d, "", dir); err != nil {
		t.Fatal(err)
	}
	opID, _, err := cloneOpID(sess, "sb_1@1", r, d)
	if err != nil {
		t.Fatal(err)
	}
	op, err := st.GetOp(ctx, sess, opID)
	if err != nil {
		t.Fatalf("the clone is not in the op journal: %v", err)
	}
	if op.Kind != journal.KindOutboundCall || op.Status != store.OpCompleted || !strings.Contains(string(op.Result), first) {
		t.Fatalf("op %s: kind %s status %s result %s; want a completed outbound_call with commit %s", op.ID, op.Kind, op.Status, op.Result, first)
	}

	g.commit(t, "two\n")
	if err := s.journalledClone(ctx, sess, "sb_1@1", r, d, "", dir); err != nil {
		t.Fatal(err)
	}
	if got := readme(t, dir); got != "one\n" {
		t.Fatalf("replayed clone has README %q, want the recorded commit's %q", got, "one\n")
	}
	if err := s.journalledClone(ctx, sess, "sb_1@2", r, d, "", dir); err != nil {
		t.Fatal(err)
	}
	if got := readme(t, dir); got != "two\n" {
		t.Fatalf("a new sandbox instance's clone has README %q, want the branch head's %q", got, "two\n")
	}
	if n := g.clones.Load(); n != 3 {
		t.Fatalf("%d clones served, want 3", n)
	}
}

// TestStartedCloneIsRedoneOnce: a clone the journal shows started and
// never completed (the daemon died while git ran) is redone, once, into a
// fresh directory — a clone only reads the remote — and then completed.
func TestStartedCloneIsRedoneOnce(t *testing.T) {
	g := newGitRemote(t)
	s, st := newJournalService(t, g)
	ctx := context.Background()
	const sess = "sesn_clone2"
	r := &store.SessionResource{ID: "sesrsc_2", SessionID: sess, Kind: KindGitHub}
	d := repoDoc{URL: g.url}
	opID, args, err := cloneOpID(sess, "sb_1@1", r, d)
	if err != nil {
		t.Fatal(err)
	}
	// What the dead process left: the op started, a half-written clone.
	if _, err := st.StartOp(ctx, &store.Op{ID: opID, SessionID: sess, Kind: journal.KindOutboundCall, Args: args,
		Status: store.OpStarted, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "c")
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "half-written"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := s.journalledClone(ctx, sess, "sb_1@1", r, d, "", dir); err != nil {
		t.Fatal(err)
	}
	if n := g.clones.Load(); n != 1 {
		t.Fatalf("%d clones served, want the redo only", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "half-written")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the redo did not start from a fresh directory: %v", err)
	}
	if got := readme(t, dir); got != "one\n" {
		t.Fatalf("README %q", got)
	}
	op, err := st.GetOp(ctx, sess, opID)
	if err != nil || op.Status != store.OpCompleted {
		t.Fatalf("op after the redo: %+v, %v; want completed", op, err)
	}
}

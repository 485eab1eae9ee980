package memory_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/postgres"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// The crash test re-executes this test binary as a child that syncs a
// memory store and is SIGKILLed in the middle of a Sync, at a chosen
// change (the service's BeforeWrite hook hangs there). The parent then
// checks that everything an earlier, acknowledged Sync wrote is there, and
// that running the interrupted Sync again — as recovery does from the
// surviving workspace — completes it without writing any change twice.

const (
	childEngine = "MEMCRASH_ENGINE"
	childDSN    = "MEMCRASH_DSN"
	childSchema = "MEMCRASH_SCHEMA"
	childStore  = "MEMCRASH_STORE"
	childFlag   = "MEMCRASH_FLAG"
	crashTenant = "tnt_crash"
	hangPath    = "/b/4.md"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEngine) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

type engine struct{ name, dsn, schema string }

func (e engine) open(ctx context.Context) (store.Store, error) {
	if e.name == "postgres" {
		return postgres.Open(ctx, e.dsn, postgres.WithSchema(e.schema))
	}
	return sqlite.Open(ctx, e.dsn)
}

func strp(s string) *string { return &s }

// firstSync is acknowledged before the crash; secondSync is interrupted
// before its fourth change.
func firstSync() []memory.Change {
	return []memory.Change{{Path: "/a/1.md", Content: strp("a1")}, {Path: "/a/2.md", Content: strp("a2")}, {Path: "/b/old.md", Content: strp("old")}}
}

func secondSync(base map[string]string) []memory.Change {
	return []memory.Change{
		{Path: "/a/1.md", Content: strp("a1 v2"), BaseVersionID: base["/a/1.md"]},
		{Path: "/b/old.md", BaseVersionID: base["/b/old.md"]},
		{Path: "/b/3.md", Content: strp("b3")},
		{Path: hangPath, Content: strp("b4")},
		{Path: "/a/2.md", Content: strp("a2 v2"), BaseVersionID: base["/a/2.md"]},
	}
}

func runChild() int {
	ctx := context.Background()
	e := engine{os.Getenv(childEngine), os.Getenv(childDSN), os.Getenv(childSchema)}
	st, err := e.open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	flag := os.Getenv(childFlag)
	svc := memory.New(memory.Config{Store: st, BeforeWrite: func(_, path string) {
		if path == hangPath {
			_ = os.WriteFile(flag, nil, 0o600)
			select {} // SIGKILL arrives here
		}
	}})
	storeID := os.Getenv(childStore)
	entries, err := svc.Sync(ctx, crashTenant, storeID, memory.Actor{SessionID: "sesn_crash"}, firstSync())
	if err != nil {
		fmt.Fprintln(os.Stderr, "first sync:", err)
		return 2
	}
	base := map[string]string{}
	for _, en := range entries {
		base[en.Path] = en.VersionID
	}
	fmt.Println("acked", len(entries))
	if _, err := svc.Sync(ctx, crashTenant, storeID, memory.Actor{SessionID: "sesn_crash"}, secondSync(base)); err != nil {
		fmt.Fprintln(os.Stderr, "second sync:", err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "second sync returned; the hook never hung")
	return 3
}

func TestSyncSurvivesKill9(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		crashSync(t, engine{name: "sqlite", dsn: filepath.Join(t.TempDir(), "state.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		u := testenv.PostgresURL(t)
		crashSync(t, engine{name: "postgres", dsn: u, schema: freshSchema(t, u)})
	})
}

func freshSchema(t *testing.T, url string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "memcrash_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	return schema
}

func crashSync(t *testing.T, e engine) {
	ctx := context.Background()
	st, err := e.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := st.CreateMemoryStore(ctx, &store.MemoryStore{TenantID: crashTenant, Name: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	flag := filepath.Join(t.TempDir(), "reached")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEngine+"="+e.name, childDSN+"="+e.dsn, childSchema+"="+e.schema,
		childStore+"="+ms.ID, childFlag+"="+flag)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	acked := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "acked") {
				acked <- sc.Text()
			}
		}
		close(acked)
	}()
	if line, ok := <-acked; !ok || line != "acked 3" {
		_ = cmd.Wait()
		t.Fatalf("child did not acknowledge the first sync (%q)\n%s", line, stderr.String())
	}
	// The child writes the flag from inside the hook and then blocks; the
	// flag's existence is the signal, not a time.
	for {
		if _, err := os.Stat(flag); err == nil {
			break
		}
		select {
		case _, open := <-acked:
			if !open { // stdout closed: the child is gone
				t.Fatalf("child exited before the failpoint\n%s", stderr.String())
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child was not killed: %v\n%s", err, stderr.String())
	}

	st, err = e.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := memory.New(memory.Config{Store: st})
	state := func() map[string]string {
		snap, err := svc.Snapshot(ctx, crashTenant, ms.ID)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, en := range snap {
			m[en.Path] = en.Content
		}
		return m
	}
	// What the first (acknowledged) sync wrote is there, and the second
	// sync's changes before the kill are whole; nothing after it is.
	got := state()
	want := map[string]string{"/a/1.md": "a1 v2", "/a/2.md": "a2", "/b/3.md": "b3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the kill: %v, want %v", got, want)
	}
	versions := func() []*store.MemoryVersion {
		vs, err := st.ListMemoryVersions(ctx, store.MemoryVersionListParams{StoreID: ms.ID})
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	if n := len(versions()); n != 6 {
		t.Fatalf("%d versions after the kill, want 3 + 3", n)
	}

	// Recovery syncs again from the workspace, which still holds the
	// session's files: the same changes, the same bases.
	var base = map[string]string{}
	for _, v := range versions() {
		if v.Operation == store.MemoryCreated && strings.HasPrefix(v.Path, "/a/") || v.Path == "/b/old.md" && v.Operation == store.MemoryCreated {
			base[v.Path] = v.ID
		}
	}
	if _, err := svc.Sync(ctx, crashTenant, ms.ID, memory.Actor{SessionID: "sesn_crash"}, secondSync(base)); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"/a/1.md": "a1 v2", "/a/2.md": "a2 v2", "/b/3.md": "b3", hangPath: "b4"}
	if got := state(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the re-run: %v, want %v", got, want)
	}
	vs := versions()
	if len(vs) != 8 {
		t.Fatalf("%d versions after the re-run, want 8: every change once", len(vs))
	}
	for _, v := range vs {
		if v.CreatedBy != (store.MemoryActor{Type: "session_actor", ID: "sesn_crash"}) {
			t.Fatalf("version %s by %+v", v.ID, v.CreatedBy)
		}
	}
}

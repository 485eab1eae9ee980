package agentkernel_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The stand-ins the session resources tests run against: the files and
// memory services of issue 12's other parts, and a git server.

// memFiles stands in for the files service (internal/files, another part
// of issue 12) until the daemon wires it: tenant-scoped files in memory,
// with the API the resources layer consumes.
type memFiles struct {
	mu    sync.Mutex
	files map[string]*memFile
}

type memFile struct {
	tenant, session string
	info            resources.FileInfo
	data            []byte
}

func (f *memFiles) add(tenant, session, name string, data []byte) resources.FileInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	sum := sha256.Sum256(data)
	info := resources.FileInfo{ID: ids.New("file"), Filename: name, SizeBytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	f.files[info.ID] = &memFile{tenant: tenant, session: session, info: info, data: data}
	return info
}

func (f *memFiles) Get(ctx context.Context, tenantID, id string) (resources.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.files[id]
	if x == nil || x.tenant != tenantID {
		return resources.FileInfo{}, fmt.Errorf("file %s: %w", id, store.ErrNotFound)
	}
	return x.info, nil
}

func (f *memFiles) Open(ctx context.Context, tenantID, id string) (io.ReadCloser, resources.FileInfo, error) {
	info, err := f.Get(ctx, tenantID, id)
	if err != nil {
		return nil, info, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return io.NopCloser(bytes.NewReader(f.files[id].data)), info, nil
}

func (f *memFiles) CreateOutput(ctx context.Context, tenantID, sessionID, name string, body io.Reader) (resources.FileInfo, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return resources.FileInfo{}, err
	}
	return f.add(tenantID, sessionID, name, b), nil
}

func (f *memFiles) ListBySession(ctx context.Context, tenantID, sessionID string) ([]resources.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []resources.FileInfo
	for _, x := range f.files {
		if x.tenant == tenantID && x.session == sessionID {
			out = append(out, x.info)
		}
	}
	return out, nil
}

func (f *memFiles) session(tenant, session string) map[string]string {
	list, _ := f.ListBySession(context.Background(), tenant, session)
	out := map[string]string{}
	for _, x := range list {
		f.mu.Lock()
		out[x.Filename] = string(f.files[x.ID].data)
		f.mu.Unlock()
	}
	return out
}

// gitServer serves a repository with git http-backend on 127.0.0.1 and
// answers 401 to any request without the token (as GitHub's basic auth:
// x-access-token:<token>). It returns the repository's URL and its two
// commits, oldest first.
func gitServer(t *testing.T, token string) (string, []string) {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run(work, "init", "-q", "-b", "main")
	var commits []string
	for _, text := range []string{"first version", "second version"} {
		if err := os.WriteFile(filepath.Join(work, "README"), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run(work, "add", "README")
		run(work, "commit", "-q", "-m", text)
		commits = append(commits, run(work, "rev-parse", "HEAD"))
	}
	run(root, "clone", "-q", "--bare", work, filepath.Join(root, "srv", "repo.git"))
	execPath := run(root, "--exec-path")
	h := &cgi.Handler{Path: filepath.Join(execPath, "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Join(root, "srv"), "GIT_HTTP_EXPORT_ALL=1"}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git", commits
}

// memMemory stands in for the memory service (internal/memory, another
// part of issue 12) until the daemon wires it.
type memMemory struct {
	mu     sync.Mutex
	stores map[string]*memStore
	syncs  [][]resources.MemoryChange
	seq    int
}

type memStore struct {
	tenant, name string
	entries      map[string]resources.MemoryEntry
}

func (m *memMemory) add(tenant, name string, memories map[string]string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := ids.New("memstore")
	st := &memStore{tenant: tenant, name: name, entries: map[string]resources.MemoryEntry{}}
	for p, c := range memories {
		m.seq++
		st.entries[p] = resources.MemoryEntry{Path: p, Content: c, MemoryID: ids.New("mem"), VersionID: fmt.Sprintf("v%d", m.seq)}
	}
	m.stores[id] = st
	return id
}

func (m *memMemory) store(tenantID, id string) (*memStore, error) {
	st := m.stores[id]
	if st == nil || st.tenant != tenantID {
		return nil, fmt.Errorf("memory store %s: %w", id, store.ErrNotFound)
	}
	return st, nil
}

func (m *memMemory) GetStore(ctx context.Context, tenantID, id string) (resources.MemoryStoreInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.store(tenantID, id)
	if err != nil {
		return resources.MemoryStoreInfo{}, err
	}
	return resources.MemoryStoreInfo{ID: id, Name: st.name}, nil
}

func (m *memMemory) Snapshot(ctx context.Context, tenantID, id string) ([]resources.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.store(tenantID, id)
	if err != nil {
		return nil, err
	}
	var out []resources.MemoryEntry
	for _, e := range st.entries {
		out = append(out, e)
	}
	return out, nil
}

func (m *memMemory) Sync(ctx context.Context, tenantID, id, sessionID string, changes []resources.MemoryChange) ([]resources.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.store(tenantID, id)
	if err != nil {
		return nil, err
	}
	m.syncs = append(m.syncs, changes)
	var out []resources.MemoryEntry
	for _, c := range changes {
		if c.Content == nil {
			delete(st.entries, c.Path)
			continue
		}
		m.seq++
		e := resources.MemoryEntry{Path: c.Path, Content: *c.Content, MemoryID: st.entries[c.Path].MemoryID, VersionID: fmt.Sprintf("v%d", m.seq)}
		st.entries[c.Path] = e
		out = append(out, e)
	}
	return out, nil
}

package agentkernel_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// What the session resources tests stand on: the daemon's own Files API
// and memory stores, used through anthropic-sdk-go as a client would, and
// a git server.

// uploadFile uploads data as a File through the SDK and returns its id.
func uploadFile(t testing.TB, c anthropic.Client, name string, data []byte) string {
	t.Helper()
	f, err := c.Beta.Files.Upload(context.Background(), anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader(string(data)), name, "")})
	if err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
	return f.ID
}

// sessionOutputs lists the Files scoped to a session (its outputs) and
// downloads each: filename → content.
func sessionOutputs(t testing.TB, c anthropic.Client, sessionID string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := c.Beta.Files.ListAutoPaging(ctx, anthropic.BetaFileListParams{ScopeID: anthropic.String(sessionID)})
	for iter.Next() {
		f := iter.Current()
		if !f.Downloadable {
			t.Fatalf("session output %s (%s) is not downloadable", f.ID, f.Filename)
		}
		resp, err := c.Beta.Files.Download(ctx, f.ID, anthropic.BetaFileDownloadParams{})
		if err != nil {
			t.Fatalf("download %s: %v", f.ID, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[f.Filename]; dup {
			t.Fatalf("session output %s collected twice", f.Filename)
		}
		out[f.Filename] = string(b)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// newMemoryStore makes a memory store with memories (path → content)
// through the SDK; it returns the store's id and each memory's version id.
func newMemoryStore(t testing.TB, c anthropic.Client, name string, memories map[string]string) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, err := c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: name})
	if err != nil {
		t.Fatalf("memory store %s: %v", name, err)
	}
	versions := map[string]string{}
	for p, content := range memories {
		m, err := c.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String(content)})
		if err != nil {
			t.Fatalf("memory %s: %v", p, err)
		}
		versions[p] = m.MemoryVersionID
	}
	return st.ID, versions
}

// sessionVersions lists the versions a session made in a store; each must
// name the session as its actor.
func sessionVersions(t testing.TB, c anthropic.Client, storeID, sessionID string) []anthropic.BetaManagedAgentsMemoryVersion {
	t.Helper()
	var out []anthropic.BetaManagedAgentsMemoryVersion
	iter := c.Beta.MemoryStores.MemoryVersions.ListAutoPaging(context.Background(), storeID,
		anthropic.BetaMemoryStoreMemoryVersionListParams{SessionID: anthropic.String(sessionID)})
	for iter.Next() {
		v := iter.Current()
		if v.CreatedBy.Type != "session_actor" || v.CreatedBy.SessionID != sessionID {
			t.Fatalf("version %s listed for session %s was made by %s", v.ID, sessionID, v.CreatedBy.RawJSON())
		}
		out = append(out, v)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// gitHost is the [resources] git_internal_hosts entry that lets the
// daemon clone from a test's git server on the loopback (host:port).
func gitHost(t *testing.T, repoURL string) string {
	t.Helper()
	u, err := url.Parse(repoURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
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

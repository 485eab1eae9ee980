package crashtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/resources"
)

// TestCrashAfterCloneBeforeItsRecord: the daemon clones a session's
// github_repository resource (an outbound call through the op journal)
// and is SIGKILLed after git finished, before the op was recorded
// completed. The restarted daemon recovers the turn, finds the clone
// started and not completed, and — a clone only reads the remote — redoes
// it once: the remote serves exactly two clones, and the tool call reads
// the repository in the sandbox.
func TestCrashAfterCloneBeforeItsRecord(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		repoURL, host, clones := serveRepo(t, "cloned-content")
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if hasToolResult(r) {
				return anthropictest.Turn{Text: "Read it."}
			}
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "cat /workspace/repo/README"}}}}
		})
		n := newNode(t, engine, fake.URL, fmt.Sprintf("[resources]\ngit_internal_hosts = [%q]\n", host))
		n.start()
		c := n.client()
		sid := newSessionWith(t, c, anthropic.BetaSessionNewParamsResourceUnion{OfGitHubRepository: &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{
			Type: "github_repository", URL: repoURL, MountPath: anthropic.String("/workspace/repo"), AuthorizationToken: "ghp-crash"}})

		n.arm(resources.FailAfterClone)
		send(t, c, sid, "read the repository")
		n.waitReached(resources.FailAfterClone)
		n.kill()
		n.disarm(resources.FailAfterClone)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		if errs := ofType(evs, "session.error"); len(errs) != 0 {
			t.Fatalf("session.error after the restart: %v", errs)
		}
		results := ofType(evs, "agent.tool_result")
		if len(results) != 1 || strings.TrimSpace(results[0].text()) != "cloned-content" {
			t.Fatalf("tool results %v, want one reading the cloned README", results)
		}
		if got := clones.Load(); got != 2 {
			t.Fatalf("the remote served %d clones; want 2 (the cut-off one and its redo)", got)
		}
		// The second one was the journal's redo of the started op, not a
		// clone that knew nothing of the first.
		if !strings.Contains(n.logs(), "repository clone cut off by a crash: cloning again") {
			t.Fatalf("the restarted daemon did not redo the started clone op:\n%s", n.logs())
		}
	})
}

// serveRepo serves a one-commit repository over git's dumb HTTP protocol
// on loopback; it returns its URL, its host:port and a count of the
// clones served.
func serveRepo(t *testing.T, readme string) (string, string, *atomic.Int32) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	work, bare := filepath.Join(root, "work"), filepath.Join(root, "srv", "r.git")
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte(readme+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(work, "add", "README")
	run(work, "commit", "-q", "-m", "one")
	run(root, "clone", "-q", "--bare", work, bare)
	run(bare, "update-server-info")
	var clones atomic.Int32
	fs := http.FileServer(http.Dir(filepath.Join(root, "srv")))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			clones.Add(1)
		}
		fs.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	return srv.URL + "/r.git", host, &clones
}

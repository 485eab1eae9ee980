package agentkernel_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestSessionResourcesThroughTheSDK: a session created with anthropic-sdk-go
// with a file, a file at a path of its own and a private repository: the
// first bash call sees the repository at the asked commit without its
// token anywhere in .git, the files read-only; what bash writes under
// /mnt/session/outputs becomes the session's Files when the turn ends
// (once); a deleted file resource is gone at the next tool call. The
// resources API answers in the SDK's shapes and never shows the token.
func TestSessionResourcesThroughTheSDK(t *testing.T) {
	const token = "ghp-secret-5b3c9e0d"
	repoURL, commits := gitServer(t, token)
	steps := []anthropictest.Turn{
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `cd /workspace/repo && cat .git/HEAD README
echo "token-in-git=$(grep -r ` + halves(token) + ` .git | wc -l)"
echo "uploads=$(cat /mnt/session/uploads/*)"
echo "linked=$(cat /workspace/data/in.txt)"
if echo x > /mnt/session/uploads/FILE 2>/dev/null; then echo upload-writable; else echo upload-read-only; fi
if echo x > /workspace/data/in.txt 2>/dev/null; then echo link-writable; else echo link-read-only; fi
mkdir -p /mnt/session/outputs/sub && echo report > /mnt/session/outputs/report.txt && echo deep > /mnt/session/outputs/sub/b.txt && echo wrote-outputs
ln -s /etc/passwd /mnt/session/outputs/leak; ln -s / /mnt/session/outputs/root; mkfifo /mnt/session/outputs/fifo`}}}},
		{Text: "done"},
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `ls /mnt/session/uploads/ | wc -l; ls /workspace/data/ | wc -l; echo listed`}}}},
		{Text: "done again"},
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `echo "added=$(cat /mnt/session/uploads/NEWFILE)"; cat /workspace/repo/.git/HEAD`}}}},
		{Text: "done at last"},
	}
	var fileID, newFileID string
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		n := r.AssistantTurns()
		if n >= len(steps) {
			return anthropictest.Turn{Text: "no more steps"}
		}
		st := steps[n]
		if len(st.ToolUses) > 0 {
			cmd := st.ToolUses[0].Input.(map[string]any)["command"].(string)
			st.ToolUses = []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": strings.NewReplacer("NEWFILE", newFileID, "FILE", fileID).Replace(cmd)}}}
		}
		return st
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
		c.Resources.GitInternalHosts = []string{gitHost(t, repoURL)}
	})
	ctx := context.Background()
	tn, err := d.Store().GetTenantByName(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	c := sdkClient(d, d.AdminKey)
	upload := uploadFile(t, c, "upload.txt", []byte("uploaded bytes"))
	linked := uploadFile(t, c, "in.txt", []byte("linked bytes"))
	fileID = upload
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "res", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}})
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, c, "res")
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)}, EnvironmentID: env.ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{
			{OfFile: &anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: upload}},
			{OfFile: &anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: linked, MountPath: anthropic.String("/workspace/data/in.txt")}},
			{OfGitHubRepository: &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{Type: "github_repository", URL: repoURL,
				MountPath: anthropic.String("/workspace/repo"), AuthorizationToken: token,
				Checkout: anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfCommit: &anthropic.BetaManagedAgentsCommitCheckoutParam{Type: "commit", Sha: commits[0]}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Resources) != 3 || s.Resources[0].Type != "file" || s.Resources[0].MountPath != "/mnt/session/uploads/"+upload ||
		s.Resources[2].URL != repoURL || s.Resources[2].Checkout.Sha != commits[0] || s.Resources[2].ID == "" {
		t.Fatalf("session resources %s", s.RawJSON())
	}
	bodies := []string{s.RawJSON()}

	list, err := c.Beta.Sessions.Resources.List(ctx, s.ID, anthropic.BetaSessionResourceListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 3 {
		t.Fatalf("resources list %s", list.RawJSON())
	}
	bodies = append(bodies, list.RawJSON())
	repo, err := c.Beta.Sessions.Resources.Get(ctx, s.Resources[2].ID, anthropic.BetaSessionResourceGetParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if repo.Type != "github_repository" || repo.MountPath != "/workspace/repo" || repo.Checkout.Type != "commit" {
		t.Fatalf("repository resource %s", repo.RawJSON())
	}
	bodies = append(bodies, repo.RawJSON())
	for _, b := range bodies {
		if strings.Contains(b, token) || strings.Contains(b, "authorization_token") {
			t.Fatalf("the API shows the token: %s", b)
		}
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	var results []string
	untilIdle := func() {
		t.Helper()
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "agent.tool_result":
				var b strings.Builder
				for _, blk := range ev.AsAgentToolResult().Content {
					b.WriteString(blk.Text)
				}
				results = append(results, b.String())
			case "session.error":
				t.Fatalf("session.error %s", ev.RawJSON())
			}
			if ev.Type == "session.status_idle" {
				return
			}
		}
		t.Fatalf("stream ended: %v", stream.Err())
	}
	send := func(text string) {
		t.Helper()
		if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText(text)}}); err != nil {
			t.Fatal(err)
		}
	}
	send("look")
	untilIdle()
	if len(results) != 1 {
		t.Fatalf("tool results %q", results)
	}
	for _, want := range []string{commits[0], "first version", "token-in-git=0", "uploads=uploaded bytes", "linked=linked bytes",
		"upload-read-only", "link-read-only", "wrote-outputs"} {
		if !strings.Contains(results[0], want) {
			t.Fatalf("the first bash call's output lacks %q:\n%s", want, results[0])
		}
	}
	// Symlinks (to a file, to /) and a FIFO the sandbox left are not read.
	outs := sessionOutputs(t, c, s.ID)
	if len(outs) != 2 || outs["report.txt"] != "report\n" || outs["sub/b.txt"] != "deep\n" {
		t.Fatalf("session files after the turn: %v", outs)
	}

	// Deleting a resource removes it at the next tool call; the outputs,
	// unchanged, are not collected again.
	for _, id := range []string{s.Resources[0].ID, s.Resources[1].ID} {
		del, err := c.Beta.Sessions.Resources.Delete(ctx, id, anthropic.BetaSessionResourceDeleteParams{SessionID: s.ID})
		if err != nil || del.ID != id || del.Type != "session_resource_deleted" {
			t.Fatalf("delete %s: %v %+v", id, err, del)
		}
	}
	send("again")
	untilIdle()
	if len(results) != 2 || strings.Join(strings.Fields(results[1]), " ") != "0 0 listed" {
		t.Fatalf("after the file resources were deleted: %q", results[1:])
	}
	if got := sessionOutputs(t, c, s.ID); len(got) != 2 {
		t.Fatalf("session files after a second turn with unchanged outputs: %v", got)
	}

	// A file added later appears; the sandbox hibernates and its host tree
	// is lost (a restore on another disk): the next tool call finds the
	// file made again from durable state and the repository in the
	// restored workspace.
	later := uploadFile(t, c, "later.txt", []byte("added later"))
	newFileID = later
	if _, err := c.Beta.Sessions.Resources.Add(ctx, s.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: later}}); err != nil {
		t.Fatal(err)
	}
	ms, err := d.Store().GetManagedSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sandboxes().Hibernate(ctx, tn.ID, ms.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(d.Config.Home, "resources", s.ID)); err != nil {
		t.Fatal(err)
	}
	send("and again")
	untilIdle()
	if len(results) != 3 || !strings.Contains(results[2], "added=added later") || !strings.Contains(results[2], commits[0]) {
		t.Fatalf("after hibernation without the host tree: %q", results[2:])
	}

	// The token is sealed in the database, never in clear.
	var dbText []byte
	_ = filepath.WalkDir(d.Config.Home, func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && strings.Contains(filepath.Base(p), "state") {
			b, _ := os.ReadFile(p)
			dbText = append(dbText, b...)
		}
		return nil
	})
	if len(dbText) == 0 || bytes.Contains(dbText, []byte(token)) {
		t.Fatalf("the store's files (%d bytes) hold the token in clear, or were not found", len(dbText))
	}
}

// TestSessionResourcesInputIsChecked: bad resources are a 4xx naming the
// field, and nothing is written; the resources API adds, rotates a token
// and refuses what the SDK does not allow.
func TestSessionResourcesInputIsChecked(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	oc := sdkClient(d, tenantKey(t, d, "other"))
	mine := uploadFile(t, c, "a.txt", []byte("a"))
	theirs := uploadFile(t, oc, "b.txt", []byte("b"))
	ag := newAgent(t, c, "res")
	env := newEnv(t, c, "res")
	file := func(id, mount string) anthropic.BetaSessionNewParamsResourceUnion {
		p := &anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: id}
		if mount != "" {
			p.MountPath = anthropic.String(mount)
		}
		return anthropic.BetaSessionNewParamsResourceUnion{OfFile: p}
	}
	repo := func(url, sha string) anthropic.BetaSessionNewParamsResourceUnion {
		p := &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{Type: "github_repository", URL: url}
		if sha != "" {
			p.Checkout.OfCommit = &anthropic.BetaManagedAgentsCommitCheckoutParam{Type: "commit", Sha: sha}
		}
		return anthropic.BetaSessionNewParamsResourceUnion{OfGitHubRepository: p}
	}
	create := func(rs ...anthropic.BetaSessionNewParamsResourceUnion) (*anthropic.BetaManagedAgentsSession, error) {
		return c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)},
			EnvironmentID: env.ID, Resources: rs})
	}
	for _, tc := range []struct {
		what      string
		rs        []anthropic.BetaSessionNewParamsResourceUnion
		status    int
		mentioned []string
	}{
		{"a relative mount path", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "data/a.txt")}, 400, []string{"resources[0].mount_path"}},
		{"a mount path with ..", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "/workspace/../etc/passwd")}, 400, []string{"resources[0].mount_path", ".."}},
		{"an unclean mount path", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "/workspace//a")}, 400, []string{"resources[0].mount_path"}},
		{"a mount path under /proc", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "/proc/self/x")}, 400, []string{"resources[0].mount_path", "/proc"}},
		{"a mount path under /.agentkernel", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "/.agentkernel/x")}, 400, []string{"resources[0].mount_path"}},
		{"a mount path in the outputs", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "/mnt/session/outputs/a")}, 400, []string{"resources[0].mount_path"}},
		{"two resources on one path", []anthropic.BetaSessionNewParamsResourceUnion{file(mine, "/workspace/a"), file(mine, "/workspace/a")}, 409, []string{"resources[1].mount_path"}},
		{"a path below another resource's", []anthropic.BetaSessionNewParamsResourceUnion{repo("https://github.com/o/r", ""), file(mine, "/workspace/r/a")}, 409, []string{"resources[1].mount_path"}},
		{"an unknown file", []anthropic.BetaSessionNewParamsResourceUnion{file("file_nope", "")}, 404, []string{"resources[0].file_id", "file_nope"}},
		{"another tenant's file", []anthropic.BetaSessionNewParamsResourceUnion{file(theirs, "")}, 404, []string{"resources[0].file_id", theirs}},
		{"a repository URL that is not http(s)", []anthropic.BetaSessionNewParamsResourceUnion{repo("ext::sh -c touch% /tmp/pwned", "")}, 400, []string{"resources[0].url"}},
		{"a repository URL with credentials", []anthropic.BetaSessionNewParamsResourceUnion{repo("https://user:pw@github.com/o/r", "")}, 400, []string{"resources[0].url"}},
		{"a short commit", []anthropic.BetaSessionNewParamsResourceUnion{repo("https://github.com/o/r", "abc123")}, 400, []string{"resources[0].checkout.sha"}},
	} {
		_, err := create(tc.rs...)
		wantStatus(t, tc.what, err, tc.status, tc.mentioned...)
	}
	// Nothing was written by the refused requests.
	page, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	if err != nil || len(page.Data) != 0 {
		t.Fatalf("sessions after refused creates: %v %d", err, len(page.Data))
	}

	s, err := create(repo("https://github.com/o/r", ""))
	if err != nil {
		t.Fatal(err)
	}
	if s.Resources[0].MountPath != "/workspace/r" {
		t.Fatalf("default repository mount path %s", s.Resources[0].RawJSON())
	}
	added, err := c.Beta.Sessions.Resources.Add(ctx, s.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: mine}})
	if err != nil {
		t.Fatal(err)
	}
	if added.FileID != mine || added.MountPath != "/mnt/session/uploads/"+mine || added.Type != "file" || added.ID == "" || added.CreatedAt.IsZero() {
		t.Fatalf("added %s", added.RawJSON())
	}
	_, err = c.Beta.Sessions.Resources.Add(ctx, s.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: mine}})
	wantStatus(t, "the same mount path again", err, 409, "mount_path")
	_, err = c.Beta.Sessions.Resources.Add(ctx, s.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: theirs, MountPath: anthropic.String("/data/b")}})
	wantStatus(t, "another tenant's file, added", err, 404, "file_id")

	_, err = c.Beta.Sessions.Resources.Update(ctx, added.ID, anthropic.BetaSessionResourceUpdateParams{SessionID: s.ID, AuthorizationToken: "t"})
	wantStatus(t, "a token for a file", err, 400, "authorization_token")
	up, err := c.Beta.Sessions.Resources.Update(ctx, s.Resources[0].ID, anthropic.BetaSessionResourceUpdateParams{SessionID: s.ID, AuthorizationToken: "rotated-token-77"})
	if err != nil || up.ID != s.Resources[0].ID || strings.Contains(up.RawJSON(), "rotated-token-77") {
		t.Fatalf("rotate the token: %v %s", err, up.RawJSON())
	}
	r, err := d.Store().GetSessionResource(ctx, up.ID)
	if err != nil || len(r.Secret) == 0 || bytes.Contains(r.Secret, []byte("rotated-token-77")) {
		t.Fatalf("stored token: %v %q", err, r.Secret)
	}

	// Memory stores: named by an id of the tenant, attached at create only.
	otherStore, _ := newMemoryStore(t, oc, "theirs", nil)
	badName, _ := newMemoryStore(t, c, "../up", nil)
	memRes := func(id, access string) anthropic.BetaSessionNewParamsResourceUnion {
		return anthropic.BetaSessionNewParamsResourceUnion{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{
			Type: "memory_store", MemoryStoreID: id, Access: anthropic.BetaManagedAgentsMemoryStoreResourceParamAccess(access)}}
	}
	_, err = create(memRes("memstore_nope", ""))
	wantStatus(t, "an unknown memory store", err, 404, "resources[0].memory_store_id", "memstore_nope")
	_, err = create(memRes(otherStore, ""))
	wantStatus(t, "another tenant's memory store", err, 404, "resources[0].memory_store_id")
	_, err = create(memRes(badName, ""))
	wantStatus(t, "a memory store whose name is no directory name", err, 400, "resources[0].memory_store_id")
	_, err = create(memRes(func() string { id, _ := newMemoryStore(t, c, "m", nil); return id }(), "write_only"))
	wantStatus(t, "an unknown access", err, 400, "resources[0].access")
	code, out := call(t, "POST", d.URL+"/v1/sessions/"+s.ID+"/resources", d.AdminKey, `{"type":"memory_store","memory_store_id":"`+otherStore+`"}`, "Content-Type", "application/json")
	if typ, msg := errType(out); code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, "type") {
		t.Fatalf("adding a memory store later: %d %q", code, msg)
	}

	// Another tenant sees neither the session nor its resources.
	_, err = oc.Beta.Sessions.Resources.Get(ctx, added.ID, anthropic.BetaSessionResourceGetParams{SessionID: s.ID})
	wantStatus(t, "another tenant's resource", err, 404)
	_, err = c.Beta.Sessions.Resources.Get(ctx, "sesrsc_nope", anthropic.BetaSessionResourceGetParams{SessionID: s.ID})
	wantStatus(t, "an unknown resource", err, 404, "sesrsc_nope")
}

// TestSessionResourcesAfterRestart: a session created with a private
// repository and a file under one daemon gets both at its first tool call
// under the next daemon on the same home (the token unsealed with the
// home's key), on the process driver and on Docker.
func TestSessionResourcesAfterRestart(t *testing.T) {
	for _, driver := range []string{"process", "docker"} {
		t.Run(driver, func(t *testing.T) {
			if driver == "docker" {
				requireDocker(t)
			}
			const token = "ghp-restart-0c4e1a"
			repoURL, _ := gitServer(t, token)
			fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
				if r.AssistantTurns() == 0 {
					return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `cat /workspace/repo/README /mnt/session/uploads/*
echo "token-in-git=$(grep -r ` + halves(token) + ` /workspace/repo/.git | wc -l)"; echo out > /mnt/session/outputs/o.txt`}}}}
				}
				return anthropictest.Turn{Text: "done"}
			})
			home := t.TempDir()
			start := func() *daemontest.Daemon {
				return daemontest.Start(t, func(c *config.Config) {
					c.Home = home
					c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
					c.Resources.GitInternalHosts = []string{gitHost(t, repoURL)}
				})
			}
			ctx := context.Background()
			d := start()
			tn, err := d.Store().GetTenantByName(ctx, "default")
			if err != nil {
				t.Fatal(err)
			}
			c := sdkClient(d, d.AdminKey)
			f := uploadFile(t, c, "f.txt", []byte("file after restart\n"))
			ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "r", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
				Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
					Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}})
			if err != nil {
				t.Fatal(err)
			}
			env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "r", Metadata: map[string]string{"agentkernel.driver": driver}})
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
				Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)}, EnvironmentID: env.ID,
				Resources: []anthropic.BetaSessionNewParamsResourceUnion{
					{OfFile: &anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: f}},
					{OfGitHubRepository: &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{Type: "github_repository", URL: repoURL,
						MountPath: anthropic.String("/workspace/repo"), AuthorizationToken: token,
						Checkout: anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfBranch: &anthropic.BetaManagedAgentsBranchCheckoutParam{Type: "branch", Name: "main"}}}},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Stop(); err != nil {
				t.Fatal(err)
			}
			d = start()
			c = sdkClient(d, d.AdminKey)
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
			defer stream.Close()
			if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("go")}}); err != nil {
				t.Fatal(err)
			}
			var result, raw string
			for stream.Next() {
				ev := stream.Current()
				raw += ev.RawJSON() + "\n"
				if ev.Type == "agent.tool_result" {
					for _, blk := range ev.AsAgentToolResult().Content {
						result += blk.Text
					}
				}
				if ev.Type == "session.error" {
					t.Fatalf("session.error %s", ev.RawJSON())
				}
				if ev.Type == "session.status_idle" {
					break
				}
			}
			// What the sandbox holds, read through its guest (the Docker
			// test image has no bash): the branch's head is the second
			// commit; .git/config names the repository without the token.
			ms, err := d.Store().GetManagedSession(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if sb, err := d.Store().GetSandbox(ctx, ms.SandboxID); err != nil || sb.Driver != driver {
				t.Fatalf("the session's sandbox: %v %+v; want driver %s", err, sb, driver)
			}
			err = d.Sandboxes().Client(ctx, tn.ID, ms.SandboxID, func(g *guest.Client) error {
				for p, want := range map[string]string{"/workspace/repo/README": "second version\n", "/mnt/session/uploads/" + f: "file after restart\n"} {
					if b, err := g.ReadFileMax(ctx, p, 1<<20); err != nil || string(b) != want {
						t.Errorf("%s in the sandbox: %q %v; want %q", p, b, err, want)
					}
				}
				cfg, err := g.ReadFileMax(ctx, "/workspace/repo/.git/config", 1<<20)
				if err != nil || !strings.Contains(string(cfg), repoURL) || strings.Contains(string(cfg), token) {
					t.Errorf(".git/config %q %v", cfg, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if driver == "docker" {
				return
			}
			for _, want := range []string{"second version", "file after restart", "token-in-git=0"} {
				if !strings.Contains(result, want) {
					t.Fatalf("bash output lacks %q:\n%s\nevents:\n%s", want, result, raw)
				}
			}
			if got := sessionOutputs(t, c, s.ID); got["o.txt"] != "out\n" {
				t.Fatalf("outputs %v", got)
			}
		})
	}
}

// TestSessionResourcesGeneratedCalls makes the calls of anthropic-sdk-go's
// generated betasessionresource_test.go (every optional parameter and
// header as it sends them) with real ids: each is answered.
func TestSessionResourcesGeneratedCalls(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	f := uploadFile(t, c, "a.txt", []byte("a"))
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(newAgent(t, c, "gen").ID)}, EnvironmentID: newEnv(t, c, "gen").ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{{OfGitHubRepository: &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{
			Type: "github_repository", URL: "https://github.com/o/r"}}}})
	if err != nil {
		t.Fatal(err)
	}
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")
	repoID := s.Resources[0].ID
	if _, err := c.Beta.Sessions.Resources.Get(ctx, repoID, anthropic.BetaSessionResourceGetParams{SessionID: s.ID, Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.Beta.Sessions.Resources.Update(ctx, repoID, anthropic.BetaSessionResourceUpdateParams{SessionID: s.ID,
		AuthorizationToken: "ghp_exampletoken", Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatalf("update: %v", err)
	}
	added, err := c.Beta.Sessions.Resources.Add(ctx, s.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{FileID: f, Type: "file", MountPath: anthropic.String("/uploads/receipt.pdf")},
		Betas:                               betas, WorkspaceID: ws})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	page, err := c.Beta.Sessions.Resources.List(ctx, s.ID, anthropic.BetaSessionResourceListParams{Limit: anthropic.Int(1), Betas: betas, WorkspaceID: ws})
	if err != nil || len(page.Data) != 1 || page.NextPage == "" {
		t.Fatalf("list a page of 1: %v %s", err, page.RawJSON())
	}
	next, err := c.Beta.Sessions.Resources.List(ctx, s.ID, anthropic.BetaSessionResourceListParams{Limit: anthropic.Int(1), Page: anthropic.String(page.NextPage)})
	if err != nil || len(next.Data) != 1 || next.Data[0].ID == page.Data[0].ID {
		t.Fatalf("next page: %v %s", err, next.RawJSON())
	}
	if _, err := c.Beta.Sessions.Resources.Delete(ctx, added.ID, anthropic.BetaSessionResourceDeleteParams{SessionID: s.ID, Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

package agentkernel_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

const skillMD = "---\nname: pdf-tools\ndescription: Fills PDF forms; use it whenever the user mentions a PDF.\n---\n# PDF tools\nRun scripts/fill.py with the form and the values.\n"

func skillFile(name, body string) io.Reader {
	return anthropic.File(strings.NewReader(body), name, "application/octet-stream")
}

func zipSkill(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tgzSkill writes a gzip tar; a header with Linkname set is written as a
// symlink.
func tgzSkill(t *testing.T, hdrs []tar.Header, bodies []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i, h := range hdrs {
		h.Mode = 0o644
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(bodies[i]))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(bodies[i]))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// TestSkillsThroughTheSDK: a skill uploaded with anthropic-sdk-go (one part
// per file, then a new version as a zip) is listed, fetched and downloaded
// in the SDK's shapes; an agent pinned to it runs a turn in which the
// model's system prompt lists the skill and the agent's bash reads its
// SKILL.md at /workspace/skills/<name>/, where the SDK's agent toolset
// puts skills.
func TestSkillsThroughTheSDK(t *testing.T) {
	const readCmd = "cat /workspace/skills/pdf-tools/SKILL.md; ls /workspace/skills/pdf-tools/scripts"
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		for _, b := range r.Blocks(len(r.Messages) - 1) {
			if b.Type == "tool_result" {
				return anthropictest.Turn{Text: "done"}
			}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": readCmd}}}}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)

	sk, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files:       []io.Reader{skillFile("pdf-tools/SKILL.md", "---\nname: pdf-tools\ndescription: the first version\n---\n"), skillFile("pdf-tools/scripts/fill.py", "print('v1')\n")},
		DisplayName: anthropic.String("PDF tools"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sk.ID, "skill_") || sk.DisplayName != "PDF tools" || sk.Source.Type != "custom" || sk.LatestVersionID == "" || sk.CreatedAt.IsZero() {
		t.Fatalf("created skill %s", sk.RawJSON())
	}
	v1 := sk.LatestVersionID
	v2, err := c.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{
		Files: []io.Reader{anthropic.File(bytes.NewReader(zipSkill(t, map[string]string{
			"pdf-tools/SKILL.md": skillMD, "pdf-tools/scripts/fill.py": "print('v2')\n"})), "pdf-tools.zip", "application/zip")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v2.SkillID != sk.ID || v2.Name != "pdf-tools" || !strings.HasPrefix(v2.Description, "Fills PDF forms") || v2.ID <= v1 {
		t.Fatalf("version 2 %s (version 1 %s)", v2.RawJSON(), v1)
	}
	got, err := c.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{})
	if err != nil || got.LatestVersionID != v2.ID {
		t.Fatalf("skill after a new version: %v %s", err, got.RawJSON())
	}
	vs, err := c.Beta.Skills.Versions.List(ctx, sk.ID, anthropic.BetaSkillVersionListParams{})
	if err != nil || len(vs.Data) != 2 || vs.Data[0].ID != v2.ID || vs.Data[1].ID != v1 {
		t.Fatalf("versions: %v %s", err, vs.RawJSON())
	}
	resp, err := c.Beta.Skills.Versions.Download(ctx, v2.ID, anthropic.BetaSkillVersionDownloadParams{SkillID: sk.ID})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("download is not a zip: %v", err)
	}
	names := []string{}
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "pdf-tools/SKILL.md,pdf-tools/scripts/fill.py" {
		t.Fatalf("downloaded archive holds %v", names)
	}

	// No version: pinned to the latest when the agent is made.
	a, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "skilled", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}},
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{{OfCustom: &anthropic.BetaManagedAgentsCustomSkillParams{
			Type: anthropic.BetaManagedAgentsCustomSkillParamsTypeCustom, SkillID: sk.ID}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Skills) != 1 || a.Skills[0].Type != "custom" || a.Skills[0].SkillID != sk.ID || a.Skills[0].Version != v2.ID {
		t.Fatalf("agent skills %s", a.RawJSON())
	}

	env := newEnv(t, c, "skills")
	s := newSession(t, c, a.ID, env.ID)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("fill my PDF")}}); err != nil {
		t.Fatal(err)
	}
	var result string
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "agent.tool_result":
			for _, blk := range ev.AsAgentToolResult().Content {
				result += blk.Text
			}
		case "session.error":
			t.Fatalf("session.error %s", ev.RawJSON())
		}
		if ev.Type == "session.status_idle" {
			break
		}
	}
	if !strings.Contains(result, "Run scripts/fill.py with the form") || !strings.Contains(result, "fill.py") {
		t.Fatalf("bash read %q from the skill's directory, want version 2's SKILL.md and its script", result)
	}
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was never called")
	}
	var blocks []struct{ Text string }
	if err := json.Unmarshal(reqs[0].System, &blocks); err != nil {
		t.Fatalf("system %s: %v", reqs[0].System, err)
	}
	sys := ""
	for _, b := range blocks {
		sys += b.Text
	}
	for _, want := range []string{"<name>pdf-tools</name>", "Fills PDF forms; use it whenever the user mentions a PDF.", "/workspace/skills/pdf-tools/SKILL.md"} {
		if !strings.Contains(sys, want) {
			t.Fatalf("system prompt %s does not hold %q", sys, want)
		}
	}

	// Deleting: a version, then the skill with the rest.
	if del, err := c.Beta.Skills.Versions.Delete(ctx, v1, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID}); err != nil || del.ID != v1 || del.Type != "skill_version_deleted" {
		t.Fatalf("delete version: %v %s", err, del.RawJSON())
	}
	_, err = c.Beta.Skills.Versions.Delete(ctx, v2.ID, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID})
	wantStatus(t, "delete the only version", err, 409, "delete the skill instead")
	if del, err := c.Beta.Skills.Delete(ctx, sk.ID, anthropic.BetaSkillDeleteParams{}); err != nil || del.ID != sk.ID || del.Type != "skill_deleted" {
		t.Fatalf("delete skill: %v %s", err, del.RawJSON())
	}
	_, err = c.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{})
	wantStatus(t, "get a deleted skill", err, 404, sk.ID)
	// The agent still names it: the next turn says which skill is gone.
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("again")}}); err != nil {
		t.Fatal(err)
	}
	var sessionErr string
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "session.error" {
			sessionErr = ev.AsSessionError().Error.Message
		}
		if ev.Type == "session.status_idle" {
			break
		}
	}
	if !strings.Contains(sessionErr, sk.ID) {
		t.Fatalf("a turn of an agent whose skill was deleted: session.error %q, want one naming %s", sessionErr, sk.ID)
	}
	if left := skillBlobs(t, d); len(left) != 0 {
		t.Fatalf("blobs of the deleted skill remain: %v", left)
	}
}

// skillBlobs lists the skill archives in the daemon's blob store.
func skillBlobs(t *testing.T, d *daemontest.Daemon) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(d.Config.BlobPath(), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.Contains(filepath.ToSlash(p), "/skills/") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestSkillUploadsAreChecked: bad uploads — paths out of the skill, links,
// a compression bomb, too many files, no SKILL.md — are a 4xx that names
// the problem or the limit, and nothing is stored.
func TestSkillUploadsAreChecked(t *testing.T) {
	d := daemontest.Start(t, func(c *config.Config) { c.Skills.MaxFiles, c.Skills.MaxUploadBytes = 3, 64<<10 })
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	md := tar.Header{Name: "s/SKILL.md", Typeflag: tar.TypeReg}
	one := func(data []byte, name string) []io.Reader {
		return []io.Reader{anthropic.File(bytes.NewReader(data), name, "application/octet-stream")}
	}
	for _, tc := range []struct {
		name   string
		files  []io.Reader
		status int
		want   string
	}{
		{"absolute path", one(zipSkill(t, map[string]string{"s/SKILL.md": skillMD, "/etc/cron.d/x": "x"}), "s.zip"), 400, "absolute path"},
		{"dot-dot", []io.Reader{skillFile("s/SKILL.md", skillMD), skillFile("s/../../x", "x")}, 400, `\"..\"`},
		{"symlink out", one(tgzSkill(t, []tar.Header{md, {Name: "s/passwd", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, []string{skillMD, ""}), "s.tgz"), 400, "links are not allowed"},
		{"hardlink out", one(tgzSkill(t, []tar.Header{md, {Name: "s/h", Typeflag: tar.TypeLink, Linkname: "../../etc/shadow"}}, []string{skillMD, ""}), "s.tgz"), 400, "links are not allowed"},
		{"compression bomb", one(tgzSkill(t, []tar.Header{md, {Name: "s/zeros", Typeflag: tar.TypeReg}}, []string{skillMD, strings.Repeat("\x00", 8<<20)}), "s.tgz"), 413, "skills.max_expansion_ratio"},
		{"too many files", []io.Reader{skillFile("s/SKILL.md", skillMD), skillFile("s/a", "a"), skillFile("s/b", "b"), skillFile("s/c", "c")}, 413, "skills.max_files"},
		{"upload too large", []io.Reader{skillFile("s/SKILL.md", skillMD), skillFile("s/big", strings.Repeat("x", 100<<10))}, 413, "skills.max_upload_bytes"},
		{"no SKILL.md", []io.Reader{skillFile("s/README.md", "hi")}, 400, "SKILL.md is missing"},
		{"no description", []io.Reader{skillFile("s/SKILL.md", "---\nname: s\n---\n")}, 400, `\"description\" is required`},
		{"the generated test's bytes", []io.Reader{io.Reader(bytes.NewBuffer([]byte("Example data")))}, 400, "files[0] has no name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: tc.files})
			wantStatus(t, tc.name, err, tc.status, tc.want)
		})
	}
	page, err := c.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{})
	if err != nil || len(page.Data) != 0 {
		t.Fatalf("refused uploads left skills: %v %s", err, page.RawJSON())
	}
	if left := skillBlobs(t, d); len(left) != 0 {
		t.Fatalf("refused uploads left blobs: %v", left)
	}
}

// TestAgentSkillsAreChecked: an agent's skills name a skill of the
// caller's tenant and a version it has; anything else is a 400 naming the
// field.
func TestAgentSkillsAreChecked(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	other := sdkClient(d, tenantKey(t, d, "other"))
	mine, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: []io.Reader{skillFile("pdf-tools/SKILL.md", skillMD)}})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: []io.Reader{skillFile("pdf-tools/SKILL.md", skillMD)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Beta.Skills.Get(ctx, mine.ID, anthropic.BetaSkillGetParams{}); err == nil {
		t.Fatal("another tenant reads my skill")
	}
	agent := func(cl anthropic.Client, sk anthropic.BetaManagedAgentsSkillParamsUnion) error {
		_, err := cl.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "a", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
			Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{sk}})
		return err
	}
	custom := func(id, version string) anthropic.BetaManagedAgentsSkillParamsUnion {
		p := &anthropic.BetaManagedAgentsCustomSkillParams{Type: anthropic.BetaManagedAgentsCustomSkillParamsTypeCustom, SkillID: id}
		if version != "" {
			p.Version = anthropic.String(version)
		}
		return anthropic.BetaManagedAgentsSkillParamsUnion{OfCustom: p}
	}
	wantStatus(t, "unknown skill", agent(c, custom("skill_nope", "")), 400, `skills[0].skill_id`, "skill_nope", "not found")
	wantStatus(t, "another tenant's skill", agent(c, custom(theirs.ID, "")), 400, `skills[0].skill_id`, theirs.ID, "not found")
	wantStatus(t, "unknown version", agent(c, custom(mine.ID, "123")), 400, `skills[0].version`, `no version \"123\"`)
	wantStatus(t, "anthropic skill", agent(c, anthropic.BetaManagedAgentsSkillParamsUnion{OfAnthropic: &anthropic.BetaManagedAgentsAnthropicSkillParams{
		Type: anthropic.BetaManagedAgentsAnthropicSkillParamsTypeAnthropic, SkillID: "xlsx"}}), 400, `skills[0].type`, "not supported yet")
	if err := agent(c, custom(mine.ID, mine.LatestVersionID)); err != nil {
		t.Fatalf("my own skill at its version: %v", err)
	}
}

// TestSkillsGeneratedSDKCalls: the calls of the SDK's generated
// betaskill_test.go and betaskillversion_test.go, with every optional
// parameter (beta and workspace headers, limits), given real ids.
func TestSkillsGeneratedSDKCalls(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.TODO()
	c := sdkClient(d, d.AdminKey)
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")
	sk, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files:       []io.Reader{skillFile("pdf-tools/SKILL.md", skillMD)},
		DisplayName: anthropic.String("display_name"), Betas: betas, WorkspaceID: ws,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: []io.Reader{skillFile("b/SKILL.md", "---\nname: b\ndescription: b\n---\n")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{Limit: anthropic.Int(1)})
	if err != nil || len(first.Data) != 1 || first.NextPage == "" {
		t.Fatalf("first page: %v %s", err, first.RawJSON())
	}
	second, err := c.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{Limit: anthropic.Int(1), Page: anthropic.String(first.NextPage),
		Source: anthropic.String("custom"), Betas: betas, WorkspaceID: ws})
	if err != nil || len(second.Data) != 1 || second.Data[0].ID == first.Data[0].ID || second.NextPage != "" {
		t.Fatalf("second page: %v %s", err, second.RawJSON())
	}
	var n int
	for it := c.Beta.Skills.ListAutoPaging(ctx, anthropic.BetaSkillListParams{Limit: anthropic.Int(1)}); it.Next(); {
		n++
	}
	if n != 2 {
		t.Fatalf("auto-paging saw %d skills, want 2", n)
	}
	v, err := c.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{
		Files: []io.Reader{skillFile("pdf-tools/SKILL.md", skillMD)}, Betas: betas, WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Skills.Versions.Get(ctx, v.ID, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID, Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
	latest, err := c.Beta.Skills.Versions.Get(ctx, "latest", anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	if err != nil || latest.ID != v.ID {
		t.Fatalf("latest: %v %s, want %s", err, latest.RawJSON(), v.ID)
	}
	vp, err := c.Beta.Skills.Versions.List(ctx, sk.ID, anthropic.BetaSkillVersionListParams{Limit: anthropic.Int(1), Betas: betas, WorkspaceID: ws})
	if err != nil || len(vp.Data) != 1 || vp.Data[0].ID != v.ID || vp.NextPage == "" {
		t.Fatalf("versions page: %v %s", err, vp.RawJSON())
	}
	vp2, err := c.Beta.Skills.Versions.List(ctx, sk.ID, anthropic.BetaSkillVersionListParams{Limit: anthropic.Int(1), Page: anthropic.String(vp.NextPage)})
	if err != nil || len(vp2.Data) != 1 || vp2.Data[0].ID != sk.LatestVersionID {
		t.Fatalf("versions second page: %v %s", err, vp2.RawJSON())
	}
	resp, err := c.Beta.Skills.Versions.Download(ctx, v.ID, anthropic.BetaSkillVersionDownloadParams{SkillID: sk.ID, Betas: betas, WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.HasPrefix(b, []byte("PK\x03\x04")) || resp.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("download: %q… %s", b[:min(len(b), 8)], resp.Header.Get("Content-Type"))
	}
	if _, err := c.Beta.Skills.Versions.Delete(ctx, v.ID, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID, Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Skills.Delete(ctx, sk.ID, anthropic.BetaSkillDeleteParams{Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
}

package agentkernel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestSessionMemoryStoresThroughTheSDK: a read_only store is mounted
// read-only at /mnt/memory/<name>/; what bash changes in a read_write one
// (a changed, a new and a deleted memory) is synced back when the turn
// ends, on the versions it read — a symlink planted there is not
// followed — and a turn that changes nothing syncs nothing.
func TestSessionMemoryStoresThroughTheSDK(t *testing.T) {
	steps := []anthropictest.Turn{
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `cat /mnt/memory/facts/a.md
if echo x > /mnt/memory/facts/a.md 2>/dev/null; then echo facts-writable; else echo facts-read-only; fi
cat /mnt/memory/notes/n.md
echo changed > /mnt/memory/notes/n.md
mkdir -p /mnt/memory/notes/dir && echo new > /mnt/memory/notes/dir/new.md
rm /mnt/memory/notes/gone.md
ln -s /etc/hostname /mnt/memory/notes/link.md
head -c 200000 /dev/zero | tr '\\0' a > /mnt/memory/notes/big.md
echo edited`}}}},
		{Text: "done"},
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `ls -R /mnt/memory/notes`}}}},
		{Text: "done again"},
	}
	var systemMu sync.Mutex
	var system string
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		systemMu.Lock()
		system = string(r.System)
		systemMu.Unlock()
		if n := r.AssistantTurns(); n < len(steps) {
			return steps[n]
		}
		return anthropictest.Turn{Text: "no more steps"}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	facts, _ := newMemoryStore(t, c, "facts", map[string]string{"/a.md": "fact a\n"})
	notes, bases := newMemoryStore(t, c, "notes", map[string]string{"/n.md": "note n\n", "/gone.md": "to delete\n"})
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "mem", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}})
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, c, "mem")
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)}, EnvironmentID: env.ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{
			{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{Type: "memory_store", MemoryStoreID: facts, Access: "read_only"}},
			{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{Type: "memory_store", MemoryStoreID: notes, Instructions: anthropic.String("keep notes here")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Resources) != 2 || s.Resources[0].MountPath != "/mnt/memory/facts" || s.Resources[0].Access != "read_only" ||
		s.Resources[1].Access != "read_write" || s.Resources[1].Name != "notes" || s.Resources[1].Instructions != "keep notes here" {
		t.Fatalf("session resources %s", s.RawJSON())
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	var results []string
	turn := func(text string) {
		t.Helper()
		if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText(text)}}); err != nil {
			t.Fatal(err)
		}
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
			case "session.status_idle":
				return
			}
		}
		t.Fatalf("stream ended: %v", stream.Err())
	}
	turn("remember")
	for _, want := range []string{"fact a", "facts-read-only", "note n", "edited"} {
		if !strings.Contains(results[0], want) {
			t.Fatalf("the bash call's output lacks %q:\n%s", want, results[0])
		}
	}
	// The model was told where the stores are, and the attachment's
	// instructions.
	systemMu.Lock()
	sys := system
	systemMu.Unlock()
	for _, want := range []string{"/mnt/memory/facts/, read-only", "/mnt/memory/notes/, read-write", "keep notes here"} {
		if !strings.Contains(sys, want) {
			t.Fatalf("the system prompt lacks %q: %s", want, sys)
		}
	}
	// One sync, by the session: a version of each changed memory, made on
	// the version the session read (the memory's previous version).
	versions := sessionVersions(t, c, notes, s.ID)
	got := map[string]string{}
	for _, v := range versions {
		if _, dup := got[v.Path]; dup {
			t.Fatalf("%s synced twice: %d versions by the session", v.Path, len(versions))
		}
		got[v.Path] = string(v.Operation) + " @" + previousVersion(t, c, notes, v)
	}
	want := map[string]string{"/n.md": "modified @" + bases["/n.md"], "/dir/new.md": "created @", "/gone.md": "deleted @" + bases["/gone.md"]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("synced versions %v; want %v", got, want)
	}
	live := map[string]string{}
	iter := c.Beta.MemoryStores.Memories.ListAutoPaging(ctx, notes, anthropic.BetaMemoryStoreMemoryListParams{View: "full"})
	for iter.Next() {
		if m := iter.Current(); m.Type == "memory" {
			live[m.Path] = m.Content
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(live) != fmt.Sprint(map[string]string{"/n.md": "changed\n", "/dir/new.md": "new\n"}) {
		t.Fatalf("the store after the turn: %v", live)
	}
	turn("look")
	if again := sessionVersions(t, c, notes, s.ID); len(again) != len(versions) {
		t.Fatalf("a turn that changed nothing synced again: %d versions, was %d", len(again), len(versions))
	}
}

// previousVersion is the id of the version of v's memory made just before
// v ("" when v made the memory).
func previousVersion(t *testing.T, c anthropic.Client, storeID string, v anthropic.BetaManagedAgentsMemoryVersion) string {
	t.Helper()
	var all []anthropic.BetaManagedAgentsMemoryVersion
	iter := c.Beta.MemoryStores.MemoryVersions.ListAutoPaging(context.Background(), storeID,
		anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(v.MemoryID)})
	for iter.Next() {
		all = append(all, iter.Current())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].CreatedAt.Before(all[j].CreatedAt) })
	prev := ""
	for _, x := range all {
		if x.ID == v.ID {
			return prev
		}
		prev = x.ID
	}
	t.Fatalf("version %s is not among its memory's versions", v.ID)
	return ""
}

// TestSessionMemorySyncedBeforeTheSandboxStops: what lands in a read_write
// store after the turn's end sync (a process the agent left running wrote
// it; here the test writes through the sandbox's guest) is synced, by the
// session, before the sandbox hibernates and before the session (and its
// sandbox) is deleted — the host copy goes with the session.
func TestSessionMemorySyncedBeforeTheSandboxStops(t *testing.T) {
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		if r.AssistantTurns() == 0 {
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo first > /mnt/memory/notes/a.md"}}}}
		}
		return anthropictest.Turn{Text: "done"}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	notes, _ := newMemoryStore(t, c, "notes", nil)
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "mem", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)}, EnvironmentID: newEnv(t, c, "mem").ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{
			Type: "memory_store", MemoryStoreID: notes}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("go")}}); err != nil {
		t.Fatal(err)
	}
	for stream.Next() && stream.Current().Type != "session.status_idle" {
		if ev := stream.Current(); ev.Type == "session.error" {
			t.Fatalf("session.error %s", ev.RawJSON())
		}
	}
	ms, err := d.Store().GetManagedSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	write := func(p, content string) {
		t.Helper()
		err := d.Sandboxes().Client(ctx, ms.TenantID, ms.SandboxID, func(g *guest.Client) error {
			return g.WriteFile(ctx, guest.WriteFileRequest{Path: p, Data: []byte(content)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ops := func() string {
		t.Helper()
		var out []string
		for _, v := range sessionVersions(t, c, notes, s.ID) {
			out = append(out, string(v.Operation)+" "+v.Path)
		}
		sort.Strings(out)
		return strings.Join(out, ", ")
	}
	if got := ops(); got != "created /a.md" {
		t.Fatalf("versions after the turn: %s", got)
	}

	write("/mnt/memory/notes/late.md", "late\n")
	if _, err := d.Sandboxes().Hibernate(ctx, ms.TenantID, ms.SandboxID); err != nil {
		t.Fatal(err)
	}
	if got := ops(); got != "created /a.md, created /late.md" {
		t.Fatalf("versions after hibernation: %s", got)
	}

	write("/mnt/memory/notes/late.md", "later\n") // wakes the sandbox
	if _, err := c.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	if got := ops(); got != "created /a.md, created /late.md, modified /late.md" {
		t.Fatalf("versions after the session was deleted: %s", got)
	}
	live := map[string]string{}
	iter := c.Beta.MemoryStores.Memories.ListAutoPaging(ctx, notes, anthropic.BetaMemoryStoreMemoryListParams{View: "full"})
	for iter.Next() {
		if m := iter.Current(); m.Type == "memory" {
			live[m.Path] = m.Content
		}
	}
	if err := iter.Err(); err != nil || fmt.Sprint(live) != fmt.Sprint(map[string]string{"/a.md": "first\n", "/late.md": "later\n"}) {
		t.Fatalf("the store after the session: %v %v", live, err)
	}
}

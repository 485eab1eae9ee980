package agentkernel_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
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
	mem := &memMemory{stores: map[string]*memStore{}}
	d.Resources().SetMemory(mem)
	tn, err := d.Store().GetTenantByName(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	facts := mem.add(tn.ID, "facts", map[string]string{"/a.md": "fact a\n"})
	notes := mem.add(tn.ID, "notes", map[string]string{"/n.md": "note n\n", "/gone.md": "to delete\n"})
	baseN := mem.stores[notes].entries["/n.md"].VersionID
	baseGone := mem.stores[notes].entries["/gone.md"].VersionID
	c := sdkClient(d, d.AdminKey)
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
	mem.mu.Lock()
	syncs := mem.syncs
	mem.mu.Unlock()
	if len(syncs) != 1 {
		t.Fatalf("%d syncs after the turn; want 1", len(syncs))
	}
	got := map[string]string{}
	for _, ch := range syncs[0] {
		content := "<deleted>"
		if ch.Content != nil {
			content = *ch.Content
		}
		got[ch.Path] = content + " @" + ch.BaseVersionID
	}
	want := map[string]string{"/n.md": "changed\n @" + baseN, "/dir/new.md": "new\n @", "/gone.md": "<deleted> @" + baseGone}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("synced changes %v; want %v", got, want)
	}
	turn("look")
	mem.mu.Lock()
	n := len(mem.syncs)
	mem.mu.Unlock()
	if n != 1 {
		t.Fatalf("a turn that changed nothing synced again: %v", mem.syncs[1:])
	}
}

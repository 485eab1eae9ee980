package crashtest

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/session"
)

// TestMemoryWriteKilledBeforeTheSync: the agent changes a memory of a
// read_write store, and the daemon is SIGKILLed before the turn's end
// synced it (after-tool-exec), or once the sync wrote the version but
// before the daemon saved the new base beside the session's tree
// (after-memory-sync). The restarted daemon recovers the turn and syncs
// from what the store's directory holds — on the version the agent read,
// which the daemon kept on disk, not in memory — so the change is exactly
// one new version by the session, and nothing the agent wrote is lost or
// overwritten by a fresh copy of the store.
func TestMemoryWriteKilledBeforeTheSync(t *testing.T) {
	for _, fp := range []string{session.FailAfterToolExec, resources.FailAfterMemorySync} {
		t.Run(fp, func(t *testing.T) { memoryWriteKilledAt(t, fp) })
	}
}

func memoryWriteKilledAt(t *testing.T, fp string) {
	engines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if hasToolResult(r) {
				return anthropictest.Turn{Text: "Noted."}
			}
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{
				"command": "cat /mnt/memory/notes/n.md && echo changed > /mnt/memory/notes/n.md && rm /mnt/memory/notes/gone.md"}}}}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		st, err := c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "notes"})
		if err != nil {
			t.Fatal(err)
		}
		base, err := c.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/n.md", Content: anthropic.String("v0\n")})
		if err != nil {
			t.Fatal(err)
		}
		gone, err := c.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/gone.md", Content: anthropic.String("old\n")})
		if err != nil {
			t.Fatal(err)
		}
		sid := newSessionWith(t, c, anthropic.BetaSessionNewParamsResourceUnion{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{
			Type: "memory_store", MemoryStoreID: st.ID, Access: "read_write"}})

		n.arm(fp)
		send(t, c, sid, "remember")
		n.waitReached(fp)
		n.kill()
		n.disarm(fp)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		if errs := ofType(evs, "session.error"); len(errs) != 0 {
			t.Fatalf("session.error after the restart: %v", errs)
		}

		// One version per change, by the session. The deletion is seen
		// only against the bases kept from before the kill.
		mine := map[string]anthropic.BetaManagedAgentsMemoryVersion{}
		it := c.Beta.MemoryStores.MemoryVersions.ListAutoPaging(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{})
		var all int
		for it.Next() {
			v := it.Current()
			all++
			if v.CreatedBy.Type == "session_actor" && v.CreatedBy.SessionID == sid {
				if _, dup := mine[v.MemoryID]; dup {
					t.Fatalf("two versions of %s by the session", v.Path)
				}
				mine[v.MemoryID] = v
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if all != 4 || len(mine) != 2 || mine[base.ID].Operation != "modified" || mine[gone.ID].Operation != "deleted" {
			var got []string
			for _, v := range mine {
				got = append(got, string(v.Operation)+" "+v.Path)
			}
			t.Fatalf("versions after the kill and the restart: %d in all, by the session %q; want 4, a modification of /n.md and a deletion of /gone.md", all, got)
		}
		m, err := c.Beta.MemoryStores.Memories.Get(ctx, base.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID, View: "full"})
		if err != nil || m.Content != "changed\n" || m.MemoryVersionID != mine[base.ID].ID {
			t.Fatalf("the memory after the restart: %v %s", err, m.RawJSON())
		}
		if _, err := c.Beta.MemoryStores.Memories.Get(ctx, gone.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID}); err == nil {
			t.Fatalf("the memory the agent deleted is still there")
		}
	})
}

// newSessionWith creates an agent with the built-in toolset, an
// environment and a session with resources through the SDK.
func newSessionWith(t testing.TB, c anthropic.Client, rs ...anthropic.BetaSessionNewParamsResourceUnion) string {
	t.Helper()
	ctx := context.Background()
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:  "crash",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID, Resources: rs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

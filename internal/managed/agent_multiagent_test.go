package managed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// rosterFixture is a tenant's agents a roster can name: a has versions 1
// and 2, b version 1 only; gone is archived, coord has a roster of its own,
// and foreign is another tenant's.
type rosterFixture struct {
	a, b, gone, coord, foreign string
}

func newRosterFixture(t *testing.T, s *Service) rosterFixture {
	t.Helper()
	ctx := context.Background()
	create := func(tenant, extra string) string {
		t.Helper()
		a, err := s.CreateAgent(ctx, tenant, body(t, `{"name": "n", "model": "m"`+extra+`}`))
		if err != nil {
			t.Fatal(err)
		}
		return a["id"].(string)
	}
	f := rosterFixture{a: create("ten_a", ""), b: create("ten_a", ""), gone: create("ten_a", ""), foreign: create("ten_b", "")}
	if _, err := s.UpdateAgent(ctx, "ten_a", f.a, body(t, `{"system": "v2"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ArchiveAgent(ctx, "ten_a", f.gone); err != nil {
		t.Fatal(err)
	}
	f.coord = create("ten_a", `, "multiagent": {"type": "coordinator", "agents": ["`+f.b+`"]}`)
	return f
}

// multiagentOf is an agent answer's multiagent as JSON.
func multiagentOf(t *testing.T, a map[string]any) string {
	t.Helper()
	b, err := json.Marshal(a["multiagent"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCoordinatorRosterIsResolved(t *testing.T) {
	s, ctx := newService(t), context.Background()
	f := newRosterFixture(t, s)
	// a by id (its latest, version 2), b pinned at version 1 and self,
	// in the order sent.
	created, err := s.CreateAgent(ctx, "ten_a", body(t, `{"name": "boss", "model": "m", "multiagent": {"type": "coordinator", "agents": [
		"`+f.a+`", {"type": "agent", "id": "`+f.b+`", "version": 1}, {"type": "self"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	id := created["id"].(string)
	roster := func(selfVersion string) string {
		return `{"type":"coordinator","agents":[{"type":"agent","id":"` + f.a + `","version":2},{"type":"agent","id":"` + f.b + `","version":1},{"type":"agent","id":"` + id + `","version":` + selfVersion + `}]}`
	}
	if got := multiagentOf(t, created); got != roster("1") {
		t.Fatalf("created multiagent = %s\nwant %s", got, roster("1"))
	}
	got, err := s.GetAgent(ctx, "ten_a", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := multiagentOf(t, got); m != roster("1") {
		t.Fatalf("stored multiagent = %s\nwant %s", m, roster("1"))
	}

	// An update that keeps the roster moves self to the version it writes;
	// one that sends the same roster again changes nothing.
	v2, err := s.UpdateAgent(ctx, "ten_a", id, body(t, `{"name": "boss 2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if v2["version"] != int64(2) || multiagentOf(t, v2) != roster("2") {
		t.Fatalf("kept roster: version %v multiagent %s, want version 2 and %s", v2["version"], multiagentOf(t, v2), roster("2"))
	}
	same, err := s.UpdateAgent(ctx, "ten_a", id, body(t, `{"multiagent": {"type": "coordinator", "agents": [
		{"type": "agent", "id": "`+f.a+`"}, {"type": "agent", "id": "`+f.b+`", "version": 1}, {"type": "self"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if same["version"] != int64(2) || multiagentOf(t, same) != roster("2") {
		t.Fatalf("same roster again: version %v multiagent %s, want version 2 unchanged", same["version"], multiagentOf(t, same))
	}
	// null clears it; an agent without one, or with {}, has none.
	cleared, err := s.UpdateAgent(ctx, "ten_a", id, body(t, `{"multiagent": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if cleared["version"] != int64(3) || multiagentOf(t, cleared) != "null" {
		t.Fatalf("cleared: version %v multiagent %s, want version 3 and null", cleared["version"], multiagentOf(t, cleared))
	}
	for _, extra := range []string{``, `, "multiagent": null`, `, "multiagent": {}`} {
		single, err := s.CreateAgent(ctx, "ten_a", body(t, `{"name": "one", "model": "m"`+extra+`}`))
		if err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
		if m := multiagentOf(t, single); m != "null" {
			t.Fatalf("%q: multiagent %s, want null", extra, m)
		}
	}
}

func TestCoordinatorRosterRefusals(t *testing.T) {
	s, ctx := newService(t), context.Background()
	f := newRosterFixture(t, s)
	many := make([]string, 21)
	for i := range many {
		many[i] = `"` + f.a + `"`
	}
	const agents = "multiagent.agents"
	for _, c := range []struct {
		name       string
		multiagent string
		status     int
		field, msg string
	}{
		{"no entries", `{"type": "coordinator", "agents": []}`,
			http.StatusBadRequest, agents, `field "multiagent.agents" must list at least 1 agent`},
		{"no agents field", `{"type": "coordinator"}`,
			http.StatusBadRequest, agents, `field "multiagent.agents" is required: 1 to 20 agents the coordinator may spawn`},
		{"21 entries", `{"type": "coordinator", "agents": [` + strings.Join(many, ", ") + `]}`,
			http.StatusBadRequest, agents, `field "multiagent.agents" has 21 agents; the limit is 20`},
		{"duplicate agent", `{"type": "coordinator", "agents": ["` + f.a + `", {"type": "agent", "id": "` + f.a + `", "version": 1}]}`,
			http.StatusBadRequest, agents + "[1]", `field "multiagent.agents[1]": agent "` + f.a + `" is already listed at multiagent.agents[0]; entries must name distinct agents`},
		{"two selfs", `{"type": "coordinator", "agents": [{"type": "self"}, "` + f.a + `", {"type": "self"}]}`,
			http.StatusBadRequest, agents + "[2]", `field "multiagent.agents[2]": {"type": "self"} is already listed at multiagent.agents[0]; a roster lists itself at most once`},
		{"unknown agent", `{"type": "coordinator", "agents": ["agent_nope"]}`,
			http.StatusNotFound, agents + "[0]", `field "multiagent.agents[0]": agent "agent_nope" not found`},
		{"another tenant's agent", `{"type": "coordinator", "agents": [{"type": "agent", "id": "` + f.foreign + `"}]}`,
			http.StatusNotFound, agents + "[0]", `field "multiagent.agents[0]": agent "` + f.foreign + `" not found`},
		{"archived agent", `{"type": "coordinator", "agents": ["` + f.gone + `"]}`,
			http.StatusConflict, agents + "[0]", `field "multiagent.agents[0]": agent "` + f.gone + `" is archived; archived agents cannot be in a roster`},
		{"a coordinator in the roster", `{"type": "coordinator", "agents": ["` + f.a + `", "` + f.coord + `"]}`,
			http.StatusBadRequest, agents + "[1]", `field "multiagent.agents[1]": agent "` + f.coord + `" version 1 has multiagent set itself; a roster's agents must be single agents (one level deep)`},
		{"advisor entry", `{"type": "coordinator", "agents": [{"type": "advisor", "model": "claude-opus-4-5"}]}`,
			http.StatusBadRequest, agents + "[0].type", `field "multiagent.agents[0].type" is not supported yet: advisor roster entries; list agents ({"type": "agent", "id": …}) or {"type": "self"}`},
		{"multiagent_20261001", `{"type": "multiagent_20261001", "subagents": {"type": "enabled"}}`,
			http.StatusBadRequest, "multiagent.type", `field "multiagent.type" is not supported yet: type multiagent_20261001 (advisor, subagents, workflows); use {"type": "coordinator", "agents": [...]}`},
		{"unknown multiagent type", `{"type": "swarm", "agents": ["` + f.a + `"]}`,
			http.StatusBadRequest, "multiagent.type", `field "multiagent.type": unknown multiagent type "swarm" (want coordinator)`},
		{"missing version", `{"type": "coordinator", "agents": [{"type": "agent", "id": "` + f.a + `", "version": 7}]}`,
			http.StatusNotFound, agents + "[0].version", `field "multiagent.agents[0].version": agent "` + f.a + `" has no version 7; its latest version is 2`},
		{"version 0", `{"type": "coordinator", "agents": [{"type": "agent", "id": "` + f.a + `", "version": 0}]}`,
			http.StatusBadRequest, agents + "[0].version", `field "multiagent.agents[0].version" must be at least 1`},
		{"unknown entry type", `{"type": "coordinator", "agents": [{"type": "team"}]}`,
			http.StatusBadRequest, agents + "[0].type", `field "multiagent.agents[0].type": unknown roster entry type "team" (want agent or self)`},
		{"entry without id", `{"type": "coordinator", "agents": [{"type": "agent"}]}`,
			http.StatusBadRequest, agents + "[0].id", `field "multiagent.agents[0].id" is required`},
		{"unknown key in an entry", `{"type": "coordinator", "agents": [{"type": "agent", "id": "` + f.a + `", "colour": 1}]}`,
			http.StatusBadRequest, agents + "[0].colour", `unknown field "multiagent.agents[0].colour"`},
		{"unknown key in multiagent", `{"type": "coordinator", "agents": ["` + f.a + `"], "colour": 1}`,
			http.StatusBadRequest, "multiagent.colour", `unknown field "multiagent.colour"`},
		{"not an object", `"coordinator"`,
			http.StatusBadRequest, "multiagent", `field "multiagent" must be an object`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.CreateAgent(ctx, "ten_a", body(t, `{"name": "boss", "model": "m", "multiagent": `+c.multiagent+`}`))
			wantInput(t, err, c.status, c.field, c.msg)
			// The same roster on an update is refused the same way.
			_, err = s.UpdateAgent(ctx, "ten_a", f.b, body(t, `{"multiagent": `+c.multiagent+`}`))
			wantInput(t, err, c.status, c.field, c.msg)
		})
	}
	// An agent names itself only as self.
	_, err := s.UpdateAgent(ctx, "ten_a", f.a, body(t, `{"multiagent": {"type": "coordinator", "agents": ["`+f.a+`"]}}`))
	wantInput(t, err, http.StatusBadRequest, agents+"[0]", `field "multiagent.agents[0]": agent "`+f.a+`" is this agent; list it as {"type": "self"}`)
	if a, err := s.GetAgent(ctx, "ten_a", f.b, 0); err != nil || a["version"] != int64(1) || multiagentOf(t, a) != "null" {
		t.Fatalf("after refused updates b is %v %v, want version 1 without multiagent", a, err)
	}
}

// TestCoordinatorRosterInTheSDKsTypes sends a roster as the SDK marshals
// BetaAgentNewParams and reads the answer back as the SDK's
// BetaManagedAgentsAgent.
func TestCoordinatorRosterInTheSDKsTypes(t *testing.T) {
	s, ctx := newService(t), context.Background()
	f := newRosterFixture(t, s)
	pinned := anthropic.BetaManagedAgentsMultiagentRosterEntryParamsOfBetaManagedAgentsAgents(f.b, anthropic.BetaManagedAgentsAgentParamsTypeAgent)
	pinned.OfBetaManagedAgentsAgents.Version = anthropic.Int(1)
	params := anthropic.BetaAgentNewParams{
		Name:  "boss",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "m"},
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsOfCoordinator([]anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion{
			{OfString: anthropic.String(f.a)},
			pinned,
			anthropic.BetaManagedAgentsMultiagentRosterEntryParamsOfBetaManagedAgentsMultiagentSelfs(anthropic.BetaManagedAgentsMultiagentSelfParamsTypeSelf),
		}),
	}
	sent, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CreateAgent(ctx, "ten_a", body(t, string(sent)))
	if err != nil {
		t.Fatalf("%s: %v", sent, err)
	}
	answer, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var a anthropic.BetaManagedAgentsAgent
	if err := json.Unmarshal(answer, &a); err != nil {
		t.Fatal(err)
	}
	if a.Multiagent.Type != "coordinator" {
		t.Fatalf("multiagent type %q, want coordinator: %s", a.Multiagent.Type, answer)
	}
	var got []string
	for _, e := range a.Multiagent.AsCoordinator().Agents {
		r := e.AsAgent()
		got = append(got, fmt.Sprintf("%s %s %d", r.Type, r.ID, r.Version))
	}
	want := []string{"agent " + f.a + " 2", "agent " + f.b + " 1", "agent " + a.ID + " 1"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("roster %v, want %v", got, want)
	}

	// An advisor entry is refused.
	params.Multiagent = anthropic.BetaManagedAgentsMultiagentParamsOfCoordinator([]anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion{
		anthropic.BetaManagedAgentsMultiagentRosterEntryParamsOfBetaManagedAgentsAdvisors("claude-opus-4-5", anthropic.BetaManagedAgentsAdvisorParamsTypeAdvisor),
	})
	if sent, err = json.Marshal(params); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateAgent(ctx, "ten_a", body(t, string(sent)))
	var ie *InputError
	if !errors.As(err, &ie) || ie.Status != http.StatusBadRequest || ie.Field != "multiagent.agents[0].type" {
		t.Fatalf("advisor entry: %v, want a 400 naming multiagent.agents[0].type", err)
	}
}

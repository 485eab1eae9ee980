package agentkernel_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// wantRefused asserts a 400 invalid_request_error whose message mentions
// every string in mentions.
func wantRefused(t *testing.T, what string, code int, body map[string]any, mentions ...string) {
	t.Helper()
	typ, msg := errType(body)
	if code != 400 || typ != "invalid_request_error" {
		t.Fatalf("%s: got %d %v, want 400 invalid_request_error", what, code, body)
	}
	for _, m := range mentions {
		if !strings.Contains(msg, m) {
			t.Fatalf("%s: message %q does not mention %q", what, msg, m)
		}
	}
}

// TestManagedRefusesUnknownFields: like /v1/sandboxes (and Anthropic's
// API), the Managed Agents endpoints refuse fields they do not know, at
// any depth, naming the field's path, and write nothing.
func TestManagedRefusesUnknownFields(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	a := newAgent(t, c, "coder")
	e := newEnv(t, c, "env")
	s := newSession(t, c, a.ID, e.ID)
	post := func(path, body string) (int, map[string]any) {
		return call(t, "POST", d.URL+path, d.AdminKey, body, "Content-Type", "application/json")
	}
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/sandboxes", `{"colour":"red"}`, `"colour"`},
		{"/v1/agents", `{"name":"a","model":"m","colour":"red"}`, `"colour"`},
		{"/v1/agents", `{"name":"a","model":{"id":"m","colour":"red"}}`, `"model.colour"`},
		{"/v1/agents", `{"name":"a","model":"m","tools":[{"type":"agent_toolset_20260401","colour":"red"}]}`, `"tools[0].colour"`},
		{"/v1/agents", `{"name":"a","model":"m","tools":[{"type":"agent_toolset_20260401","default_config":{"enabled":true,"colour":"red"}}]}`, `"tools[0].default_config.colour"`},
		{"/v1/agents", `{"name":"a","model":"m","tools":[{"type":"agent_toolset_20260401","configs":[{"name":"bash","permission_policy":{"type":"always_ask","colour":"red"}}]}]}`, `"tools[0].configs[0].permission_policy.colour"`},
		{"/v1/agents", `{"name":"a","model":"m","tools":[{"type":"custom","name":"t","input_schema":{"type":"object"},"colour":"red"}]}`, `"tools[0].colour"`},
		{"/v1/agents/" + a.ID, `{"colour":"red"}`, `"colour"`},
		{"/v1/environments", `{"name":"e","colour":"red"}`, `"colour"`},
		{"/v1/environments", `{"name":"e","config":{"type":"cloud","networking":{"type":"limited","colour":"red"}}}`, `"config.networking.colour"`},
		{"/v1/environments", `{"name":"e","config":{"type":"cloud","packages":{"colour":[]}}}`, `"config.packages.colour"`},
		{"/v1/environments/" + e.ID, `{"config":{"colour":"red"}}`, `"config.colour"`},
		{"/v1/sessions", `{"agent":"` + a.ID + `","environment_id":"` + e.ID + `","colour":"red"}`, `"colour"`},
		{"/v1/sessions", `{"agent":{"type":"agent","id":"` + a.ID + `","name":"x"},"environment_id":"` + e.ID + `"}`, `"agent.name"`},
		{"/v1/sessions", `{"agent":"` + a.ID + `","environment_id":"` + e.ID + `","initial_events":[{"type":"user.message","content":[{"type":"text","text":"hi","colour":"red"}]}]}`, `"initial_events[0].content[0].colour"`},
		{"/v1/sessions/" + s.ID, `{"title":"t","colour":"red"}`, `"colour"`},
		{"/v1/sessions/" + s.ID + "/events", `{"events":[{"type":"user.message","content":[{"type":"text","text":"hi"}],"colour":"red"}]}`, `"events[0].colour"`},
		{"/v1/sessions/" + s.ID + "/events", `{"events":[{"type":"user.interrupt"}],"colour":"red"}`, `"colour"`},
	} {
		code, body := post(tc.path, tc.body)
		wantRefused(t, "POST "+tc.path+" "+tc.body, code, body, "unknown field "+tc.field)
	}
	// Nothing was written by the refused requests.
	if got, err := c.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{}); err != nil || got.Version != 1 {
		t.Fatalf("agent after refused updates: %v %v", got, err)
	}
	if list, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{}); err != nil || len(list.Data) != 1 {
		t.Fatalf("sessions after refused creates: %v %v", list, err)
	}
	if evs, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{}); err != nil || len(evs.Data) != 0 {
		t.Fatalf("events after refused sends: %v %v", evs, err)
	}
	if got, err := c.Beta.Sessions.Get(ctx, s.ID, anthropic.BetaSessionGetParams{}); err != nil || got.Title != "" {
		t.Fatalf("session after a refused update: %v %v", got, err)
	}
}

// TestManagedQueryParameters: a bad or unknown query parameter is a 400
// naming it, never a listing that ignores it.
func TestManagedQueryParameters(t *testing.T) {
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	a := newAgent(t, c, "coder")
	e := newEnv(t, c, "env")
	s := newSession(t, c, a.ID, e.ID)
	for _, tc := range []struct{ path, query, mention string }{
		{"/v1/agents", "limit=abc", `"limit"`},
		{"/v1/agents", "limit=-1", `"limit"`},
		{"/v1/agents", "limit=0", `"limit"`},
		{"/v1/agents", "limit=101", "1 to 100"},
		{"/v1/agents", "limit=99999999999999999999999", `"limit"`},
		{"/v1/agents", "order=sideways", `"order"`},
		{"/v1/agents", "page=garbage", `"page"`},
		{"/v1/agents", "include_archived=maybe", `"include_archived"`},
		{"/v1/agents", "created_at[gte]=yesterday", `"created_at[gte]"`},
		{"/v1/agents", "colour=red", `"colour"`},
		{"/v1/agents/" + a.ID, "version=0", `"version"`},
		{"/v1/agents/" + a.ID, "colour=red", `"colour"`},
		{"/v1/agents/" + a.ID + "/versions", "order=asc", `"order"`},
		{"/v1/environments", "limit=abc", `"limit"`},
		{"/v1/environments", "colour=red", `"colour"`},
		{"/v1/environments/" + e.ID, "colour=red", `"colour"`},
		{"/v1/sessions", "limit=1001", `"limit"`},
		{"/v1/sessions", "agent_version=latest", `"agent_version"`},
		{"/v1/sessions", "statuses[]=sleeping", `"statuses"`},
		{"/v1/deployments", "status=sleeping", `"status"`},
		{"/v1/deployments", "colour=red", `"colour"`},
		{"/v1/deployment_runs", "trigger_type=cron", `"trigger_type"`},
		{"/v1/deployment_runs", "has_error=maybe", `"has_error"`},
		{"/v1/deployment_runs", "limit=1001", `"limit"`},
		{"/v1/sessions", "memory_store_id=mem_1", "not supported yet"},
		{"/v1/sessions", "colour=red", `"colour"`},
		{"/v1/sessions/" + s.ID, "colour=red", `"colour"`},
		{"/v1/sessions/" + s.ID + "/events", "limit=abc", `"limit"`},
		{"/v1/sessions/" + s.ID + "/events", "limit=1001", `"limit"`},
		{"/v1/sessions/" + s.ID + "/events", "colour=red", `"colour"`},
		{"/v1/sessions/" + s.ID + "/events/stream", "event_deltas[]=agent.message", "not supported yet"},
		{"/v1/sessions/" + s.ID + "/events/stream", "colour=red", `"colour"`},
	} {
		code, body := call(t, "GET", d.URL+tc.path+"?"+tc.query, d.AdminKey, "")
		wantRefused(t, tc.path+"?"+tc.query, code, body, tc.mention)
	}
	// The SDK's own flag and every parameter it sends are accepted.
	q := url.Values{"beta": {"true"}, "limit": {"5"}, "include_archived": {"true"}, "order": {"asc"},
		"created_at[gte]": {"2020-01-01T00:00:00Z"}, "agent_id": {a.ID}, "agent_version": {"1"}, "statuses[]": {"idle"}}
	if code, body := call(t, "GET", d.URL+"/v1/sessions?"+q.Encode(), d.AdminKey, ""); code != 200 || len(body["data"].([]any)) != 1 {
		t.Fatalf("sessions with every SDK filter: %d %v", code, body)
	}
	for _, limit := range []int{1, 100} {
		if code, body := call(t, "GET", fmt.Sprintf("%s/v1/agents?limit=%d", d.URL, limit), d.AdminKey, ""); code != 200 {
			t.Fatalf("limit=%d: %d %v", limit, code, body)
		}
	}
}

package crashtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// post sends a JSON body with the node's key.
func (n *node) post(path, body string) (int, map[string]any, error) {
	req, err := http.NewRequest("POST", n.url()+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("x-api-key", n.key)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, nil
}

// TestForkKilledMidway: the daemon dies inside a fork's transaction (the
// fork's rows written, not committed). After the restart there is no
// fork at all — no session, no events — and the source is as it was; a
// fork made then is complete and has the source's workspace.
func TestForkKilledMidway(t *testing.T) {
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		switch {
		case lastUserText(r) == "build":
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo one > a.txt"}}}}
		case lastUserText(r) == "look":
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "ls -1; cat a.txt"}}}}
		}
		return anthropictest.Turn{Text: "done"}
	})
	n := newNode(t, "sqlite", fake.URL)
	n.start()
	c := n.client()
	sid := newSession(t, c)
	send(t, c, sid, "build")
	before := waitIdle(t, n, c, sid, 1)

	n.arm("fork-hang")
	forked := make(chan int, 1)
	go func() {
		code, _, _ := n.post("/v1/sessions/"+sid+"/fork", "{}")
		forked <- code
	}()
	n.waitReached("fork-hang")
	n.kill()
	n.disarm("fork-hang")
	if code := <-forked; code == 200 {
		t.Fatal("the fork answered 200 before its transaction committed")
	}
	n.start()
	c = n.client()
	var ids []string
	it := c.Beta.Sessions.ListAutoPaging(context.Background(), anthropic.BetaSessionListParams{})
	for it.Next() {
		ids = append(ids, it.Current().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != sid {
		t.Fatalf("sessions after a fork killed before its commit: %v, want the source alone", ids)
	}
	if after := events(t, c, sid); len(after) != len(before) {
		t.Fatalf("the source has %d events, had %d", len(after), len(before))
	}
	code, fork, err := n.post("/v1/sessions/"+sid+"/fork", "{}")
	if err != nil || code != 200 {
		t.Fatalf("fork after the restart: %d %v %v", code, fork, err)
	}
	fid := fork["id"].(string)
	send(t, c, fid, "look")
	evs := waitIdle(t, n, c, fid, 2)
	results := ofType(evs, "agent.tool_result")
	if got := strings.TrimSpace(results[len(results)-1].text()); got != "a.txt\none" {
		t.Fatalf("the fork's workspace: %q", got)
	}
}

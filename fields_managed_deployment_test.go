package agentkernel_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// TestEveryDeploymentFieldWorksOrIsRefused is the field walk of
// TestEveryManagedFieldWorksOrIsRefused for the deployment bodies: each
// field either shows in the session a run of the deployment creates (what
// a deployment is for), is stored and returned (name, schedule, …), or is
// refused with a 400 naming it.
func TestEveryDeploymentFieldWorksOrIsRefused(t *testing.T) {
	w := newManagedWalker(t)
	rules := deploymentRules(w)
	n := walkBodies(t, rules, []walkBody{
		{"deployment.create", anthropic.BetaDeploymentNewParams{}},
		{"deployment.update", anthropic.BetaDeploymentUpdateParams{}},
	}, w.newCase)
	t.Logf("%d fields checked", n)
}

// runHolds sends the case, runs the deployment now and checks the run's
// session holds the value at path.
func (w *managedWalker) runHolds(path string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		run := w.post(t, "/v1/deployments/"+out["id"].(string)+"/run", nil)
		sid, _ := run["session_id"].(string)
		if sid == "" {
			t.Errorf("%s %s: the run made no session: %v", c.body, c.leaf.path, run)
			return
		}
		_, sess := w.do(t, "GET", "/v1/sessions/"+sid, nil)
		holds(t, c, "the run's session"+path, jsonAt(sess, path), c.value)
	}
}

// runSends is runHolds for an initial event: the run's session has the
// marker in its events.
func (w *managedWalker) runSends(t *testing.T, c *fieldCase) {
	out := ok(t, c)
	if out == nil {
		return
	}
	run := w.post(t, "/v1/deployments/"+out["id"].(string)+"/run", nil)
	sid, _ := run["session_id"].(string)
	if sid == "" {
		t.Errorf("%s %s: the run made no session: %v", c.body, c.leaf.path, run)
		return
	}
	if evs := w.events(t, sid); len(evs) == 0 || !strings.Contains(fmt.Sprint(evs[0]), c.marker) {
		t.Errorf("%s %s: the run's session's first event %v does not carry %s", c.body, c.leaf.path, evs, c.marker)
	}
}

func deploymentRules(w *managedWalker) []fieldRule {
	const body = `^deployment\.(create|update) `
	agentID := func(t *testing.T, c *fieldCase) any { return c.state["agent"] }
	return []fieldRule{
		rule(body + `\.agent<OfString>$`).with(agentID).does(w.runHolds(".agent.id")),
		rule(body + `\.agent<OfBetaManagedAgentsAgents>\.id$`).with(agentID).does(w.runHolds(".agent.id")),
		rule(body + `\.agent<OfBetaManagedAgentsAgents>\.type$`).with("agent").does(w.runHolds(".agent.type")),
		rule(body + `\.agent<OfBetaManagedAgentsAgents>\.version$`).with(1).does(w.runHolds(".agent.version")),
		rule(body + `\.environment_id$`).with(func(t *testing.T, c *fieldCase) any {
			return w.post(t, "/v1/environments", map[string]any{"name": "walk " + c.marker})["id"]
		}).does(w.runHolds(".environment_id")),
		rule(body + `\.(name|description)$`).does(func(t *testing.T, c *fieldCase) { w.echoes(c.leaf.path)(t, c) }),
		rule(body + `\.metadata$`).does(w.echoes(".metadata")),
		rule(body + `\.budget`).refuse("budget"),
		rule(body + `\.vault_ids\[\]$`).with(func(t *testing.T, c *fieldCase) any {
			return w.post(t, "/v1/vaults", map[string]any{"display_name": "walk " + c.marker})["id"]
		}).does(w.runHolds(".vault_ids[0]")),
		rule(body + `\.schedule\.`).with(func(t *testing.T, c *fieldCase) any {
			c.state["fill.schedule.expression"], c.state["fill.schedule.timezone"] = "0 9 * * 1-5", "UTC"
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, ".type"):
				return "cron"
			case strings.HasSuffix(p, ".timezone"):
				return "America/Los_Angeles"
			}
			return "15 3 * * *"
		}).does(func(t *testing.T, c *fieldCase) {
			w.echoes(".schedule."+c.leaf.path[strings.LastIndex(c.leaf.path, ".")+1:])(t, c)
		}),
		// Initial events: what the session create path takes, and refuses.
		rule(body + `\.initial_events\[\]<OfUserMessage>(\.type|\.content\[\]<OfText>\.(text|type))$`).does(w.runSends),
		rule(body + `\.initial_events\[\]<OfUserMessage>\.content\[\]<Of(Image|Document|Redacted)>`).refuse("initial_events[0].content[0].type"),
		// An outcome in the initial events is the run's session's outcome.
		rule(body + `\.initial_events\[\]<OfUserDefineOutcome>\.rubric<OfFile>`).refuse("initial_events[0].rubric.type"),
		rule(body + `\.initial_events\[\]<OfUserDefineOutcome>`).does(func(t *testing.T, c *fieldCase) {
			out := ok(t, c)
			if out == nil {
				return
			}
			run := w.post(t, "/v1/deployments/"+out["id"].(string)+"/run", nil)
			if sid, _ := run["session_id"].(string); sid != "" {
				w.outcomeHolds(t, c, sid)
			} else {
				t.Errorf("%s %s: the run made no session: %v", c.body, c.leaf.path, run)
			}
		}),
		rule(body + `\.initial_events\[\]<OfSystemMessage>`).refuse("initial_events[0].type"),
		// Resources: shown on each run's session as sent.
		rule(body + `\.resources\[\]<OfGitHubRepository>\.authorization_token$`).refuse("authorization_token"),
		rule(body + `\.resources\[\]<OfFile>\.`).with(func(t *testing.T, c *fieldCase) any {
			const f = ".resources[]<OfFile>"
			c.state["fill"+f+".file_id"] = w.upload(t, c.marker+".txt", c.marker)
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, ".type"):
				return "file"
			case strings.HasSuffix(p, ".mount_path"):
				return "/mnt/session/uploads/" + c.marker + ".txt"
			}
			return c.state["fill"+f+".file_id"]
		}).does(func(t *testing.T, c *fieldCase) { w.runHolds(".resources[0]"+resourceField(c))(t, c) }),
		rule(body + `\.resources\[\]<OfMemoryStore>\.`).with(func(t *testing.T, c *fieldCase) any {
			const m = ".resources[]<OfMemoryStore>"
			c.state["fill"+m+".memory_store_id"] = w.memoryStore(t, c.marker)
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, ".type"):
				return "memory_store"
			case strings.HasSuffix(p, ".access"):
				return "read_only"
			case strings.HasSuffix(p, ".instructions"):
				return "instructions of " + c.marker
			}
			return c.state["fill"+m+".memory_store_id"]
		}).does(func(t *testing.T, c *fieldCase) { w.runHolds(".resources[0]"+resourceField(c))(t, c) }),
		rule(body + `\.resources\[\]<OfGitHubRepository>\.`).with(func(t *testing.T, c *fieldCase) any {
			const repo = ".resources[]<OfGitHubRepository>"
			c.state["fill"+repo+".url"] = "https://github.com/o/walk"
			c.state["fill"+repo+".checkout<OfBranch>.name"] = "main"
			c.state["fill"+repo+".checkout<OfCommit>.sha"] = strings.Repeat("a", 40)
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, repo+".type"):
				return "github_repository"
			case strings.HasSuffix(p, "<OfBranch>.type"):
				return "branch"
			case strings.HasSuffix(p, "<OfCommit>.type"):
				return "commit"
			case strings.HasSuffix(p, ".url"):
				return "https://github.com/o/" + c.marker
			case strings.HasSuffix(p, ".mount_path"):
				return "/workspace/" + c.marker
			case strings.HasSuffix(p, ".name"):
				return "branch-" + c.marker
			}
			return strings.Repeat("b", 40)
		}).does(func(t *testing.T, c *fieldCase) { w.runHolds(".resources[0]"+resourceField(c))(t, c) }),
	}
}

// resourceField is the leaf's path inside its resource, union markers
// dropped: ".checkout<OfBranch>.name" → ".checkout.name".
func resourceField(c *fieldCase) string {
	p := c.leaf.path[strings.Index(c.leaf.path, ">")+1:]
	for strings.Contains(p, "<") {
		i, j := strings.Index(p, "<"), strings.Index(p, ">")
		p = p[:i] + p[j+1:]
	}
	return p
}

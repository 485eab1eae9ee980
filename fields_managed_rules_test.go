package agentkernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// What each Managed Agents field does, for TestEveryManagedFieldWorksOrIsRefused:
// the first rule whose regexp matches "<body> <path>" decides.

// The agent's fields, wherever they are sent: on an agent, as a session's
// agent_with_overrides, or as a session update's agent.
const agentFields = `^(?:agent\.(?:create|update) |session\.create \.agent<OfBetaManagedAgentsAgentWithOverridess>|session\.update \.agent)`
const toolset = agentFields + `\.tools\[\]<OfAgentToolset20260401>`
const mcpToolset = agentFields + `\.tools\[\]<OfMCPToolset>`

func managedRules(w *managedWalker) []fieldRule {
	notYet := func(re, mention string) fieldRule { return rule(re).refuse(mention) }
	// resultRule: a result event (of kind, whose type is typ and whose id
	// field is idField) answers the call pending sets up; the model sees
	// the result, its is_error and its content.
	resultRule := func(kind, typ, idField string, pending func(*testing.T, *fieldCase)) fieldRule {
		return rule(`^events\.send \.events\[\]<Of` + kind + `>(\.type|\` + idField + `|\.is_error|\.content\[\]<OfText>\.(text|type))$`).with(func(t *testing.T, c *fieldCase) any {
			pending(t, c)
			switch {
			case strings.HasSuffix(c.leaf.path, "<Of"+kind+">.type"):
				return typ
			case strings.HasSuffix(c.leaf.path, idField):
				return c.state["call"]
			case strings.HasSuffix(c.leaf.path, ".is_error"):
				return true
			case strings.HasSuffix(c.leaf.path, "<OfText>.type"):
				return "text"
			}
			return c.marker
		}).does(func(t *testing.T, c *fieldCase) {
			w.resumes(t, c, func(b anthropictest.Block) bool {
				switch {
				case strings.HasSuffix(c.leaf.path, ".is_error"):
					return b.IsError
				case strings.Contains(c.leaf.path, ".content"):
					return strings.Contains(b.ToolResultText(), c.marker)
				}
				return b.ToolUseID != ""
			})
		})
	}
	toolOf := func(c *fieldCase) string {
		_, after, _ := strings.Cut(c.leaf.path, "configs[]<Of")
		name, _, _ := strings.Cut(after, ">")
		return strings.ToLower(name)
	}
	rules := []fieldRule{
		// Stored and returned: that is what they are for.
		rule(agentFields + `\.(name|description)$`).does(func(t *testing.T, c *fieldCase) { w.echoesAgent(c.leaf.path)(t, c) }),
		rule(agentFields + `\.metadata$`).does(w.echoesAgent(".metadata")),
		// What the model is sent.
		rule(agentFields + `\.system$`).does(w.modelSees("the system prompt", func(r anthropictest.Request, c *fieldCase) bool {
			return strings.Contains(string(r.System), c.value.(string))
		})),
		rule(agentFields + `\.model\.id$`).does(w.modelSees("the model id", func(r anthropictest.Request, c *fieldCase) bool { return r.Model == c.value })),
		notYet(agentFields+`\.model\.speed$`, "model.speed"),
		notYet(agentFields+`\.model\.effort`, "model.effort"),
		notYet(agentFields+`\.model\.inference_geo$`, "model.inference_geo"),
		notYet(agentFields+`\.execution_identity<OfAWSRole>`, "execution_identity.type"),
		rule(agentFields + `\.execution_identity<OfServiceAccount>\.type$`).does(w.echoesAgent(".execution_identity.type")),
		// A coordinator's roster: stored and returned resolved to agent
		// versions (a multi-agent session's threads are the runtime's).
		notYet(agentFields+`\.multiagent<OfCoordinator>\.agents\[\]<OfBetaManagedAgentsAdvisors>`, "multiagent.agents[0].type"),
		rule(agentFields + `\.multiagent<OfCoordinator>\.(type|agents\[\]<(OfString|OfBetaManagedAgentsAgents|OfBetaManagedAgentsMultiagentSelfs)>(\.id|\.type|\.version)?)$`).with(w.rosterValue).does(w.rosterHolds),
		notYet(agentFields+`\.multiagent<OfMultiagent20261001>`, "multiagent.type"),
		// Skills: a skill uploaded for the case, which the model's system
		// prompt then lists (TestSkillsThroughTheSDK reads it in the
		// sandbox). A session's agent takes new skills only at create.
		notYet(`^session\.update \.agent\.skills`, "agent.skills"),
		notYet(agentFields+`\.skills\[\]<OfAnthropic>`, "skills[0].type"),
		rule(agentFields + `\.skills\[\]<OfCustom>\.(skill_id|type|version)$`).with(w.skillValue).does(w.modelSees("the skill", func(r anthropictest.Request, c *fieldCase) bool {
			return strings.Contains(string(r.System), "walk skill "+c.marker)
		})),
		rule(`^agent\.update \.version$`).with(1).does(func(t *testing.T, c *fieldCase) {
			w.post(t, "/v1/agents/"+c.state["agent"].(string), map[string]any{"system": "now version 2"})
			if code, out := c.send(); code != 409 || !strings.Contains(fmt.Sprint(out), `version`) {
				t.Errorf("agent.update version 1 of an agent at version 2: %d %v, want 409", code, out)
			}
		}),
		// Tools.
		// MCP servers and toolsets: a server and the toolset that uses it
		// go together (mcpValue sends the other half), and the model is
		// offered the server's echo tool as mcp__<server>__echo.
		rule(agentFields + `\.mcp_servers\[\]\.(name|type|url)$`).with(w.mcpValue).does(w.seesMCPTool(true)),
		rule(mcpToolset + `\.(type|mcp_server_name)$`).with(w.mcpValue).does(w.seesMCPTool(true)),
		rule(mcpToolset + `\.(default_config|configs\[\])\.enabled$`).with(w.mcpValue).does(w.seesMCPTool(false)),
		rule(mcpToolset + `\.configs\[\]\.name$`).with(w.mcpValue).does(func(t *testing.T, c *fieldCase) {
			w.echoesAgent(".tools[0].configs[0].name")(t, c)
		}),
		rule(mcpToolset + `\.(default_config|configs\[\])\.permission_policy<OfAlwaysAsk>\.type$`).with(w.mcpValue).does(w.mcpPermission("ask")),
		rule(mcpToolset + `\.(default_config|configs\[\])\.permission_policy<OfAlwaysAllow>\.type$`).with(w.mcpValue).does(w.mcpPermission("allow")),
		notYet(mcpToolset+`\.(default_config|configs\[\])\.permission_policy<OfAuto>`, "permission_policy.type").with(w.mcpValue),
		rule(toolset + `\.type$`).does(w.modelSees("the toolset", func(r anthropictest.Request, c *fieldCase) bool {
			ts := toolsOf(r)
			for _, n := range toolsetTools {
				if ts[n] == nil {
					return false
				}
			}
			return true
		})),
		rule(toolset + `\.default_config\.enabled$`).with(false).does(w.modelSees("no toolset", func(r anthropictest.Request, c *fieldCase) bool {
			return len(toolsOf(r)) == 0
		})),
		rule(toolset + `\.default_config\.permission_policy<OfAlwaysAsk>\.type$`).does(func(t *testing.T, c *fieldCase) { w.asks(t, c, "bash") }),
		rule(toolset + `\.default_config\.permission_policy<OfAlwaysAllow>\.type$`).does(func(t *testing.T, c *fieldCase) {
			w.echoesAgent(".tools[0].default_config.permission_policy.type")(t, c) // the default, resolved
		}),
		notYet(toolset+`\.(default_config|configs\[\]<Of\w+>)\.permission_policy<OfAuto>`, "permission_policy.type"),
		rule(toolset + `\.configs\[\]<Of(Bash|Edit|Read|Write|Glob|Grep)>\.enabled$`).with(false).does(w.modelSees("the toolset without the disabled tool", func(r anthropictest.Request, c *fieldCase) bool {
			ts, off := toolsOf(r), toolOf(c)
			for _, n := range toolsetTools {
				if (ts[n] == nil) != (n == off) {
					return false
				}
			}
			return true
		})),
		rule(toolset + `\.configs\[\]<Of(Bash|Edit|Read|Write|Glob|Grep)>\.permission_policy<OfAlwaysAsk>\.type$`).does(func(t *testing.T, c *fieldCase) { w.asks(t, c, toolOf(c)) }),
		rule(toolset + `\.configs\[\]<Of(Bash|Edit|Read|Write|Glob|Grep)>\.permission_policy<OfAlwaysAllow>\.type$`).does(func(t *testing.T, c *fieldCase) {
			w.echoesAgent(".tools[0].configs[0].permission_policy.type")(t, c) // the default, resolved
		}),
		rule(toolset + `\.configs\[\]<Of(Bash|Edit|Read|Write|Glob|Grep)>\.(name|type)$`).does(func(t *testing.T, c *fieldCase) {
			w.echoesAgent(".tools[0].configs[0].name")(t, c) // the tool a config is for
		}),
		rule(toolset + `\.configs\[\]<OfWeb(Fetch|Search)>\.enabled$`).with(false).does(w.modelSees("no web tool (agentkernel offers none)", func(r anthropictest.Request, c *fieldCase) bool {
			ts := toolsOf(r)
			return ts["web_fetch"] == nil && ts["web_search"] == nil
		})),
		notYet(toolset+`\.configs\[\]<OfWeb(Fetch|Search)>`, "configs[0]"),
		rule(agentFields + `\.tools\[\]<OfCustom>\.(name|type)$`).with(func(t *testing.T, c *fieldCase) any {
			if strings.HasSuffix(c.leaf.path, ".type") {
				return "custom"
			}
			return strings.ReplaceAll(c.marker, "-", "_")
		}).does(w.modelSees("the custom tool", func(r anthropictest.Request, c *fieldCase) bool {
			name := c.value.(string)
			if name == "custom" {
				name = "walk_tool"
			}
			return toolsOf(r)[name] != nil
		})),
		rule(agentFields + `\.tools\[\]<OfCustom>\.description$`).does(w.modelSees("the tool's description", func(r anthropictest.Request, c *fieldCase) bool {
			return toolsOf(r)["walk_tool"]["description"] == c.value
		})),
		rule(agentFields + `\.tools\[\]<OfCustom>\.input_schema\.(properties|required\[\]|type)$`).does(w.modelSees("the tool's input schema", func(r anthropictest.Request, c *fieldCase) bool {
			schema, _ := toolsOf(r)["walk_tool"]["input_schema"].(map[string]any)
			switch {
			case strings.HasSuffix(c.leaf.path, ".properties"):
				return sameJSON(schema["properties"], c.value)
			case strings.HasSuffix(c.leaf.path, ".required[]"):
				return sameJSON(schema["required"], []any{c.value})
			}
			return schema["type"] == "object"
		})),

		// Sessions.
		rule(`^session\.create \.agent<(OfString|OfBetaManagedAgentsAgents|OfBetaManagedAgentsAgentWithOverridess)>(\.id|\.type)?$`).with(func(t *testing.T, c *fieldCase) any {
			switch {
			case strings.HasSuffix(c.leaf.path, ".type") && strings.Contains(c.leaf.path, "Overrides"):
				return "agent_with_overrides"
			case strings.HasSuffix(c.leaf.path, ".type"):
				return "agent"
			}
			return c.state["agent"]
		}).does(w.modelSees("the agent's system prompt", func(r anthropictest.Request, c *fieldCase) bool {
			return strings.Contains(string(r.System), "v2 of "+c.marker)
		})),
		rule(`^session\.create \.agent<\w+>\.version$`).with(1).does(w.modelSees("version 1 of the agent", func(r anthropictest.Request, c *fieldCase) bool {
			return strings.Contains(string(r.System), "v1 of "+c.marker)
		})),
		rule(`^session\.create \.environment_id$`).with(func(t *testing.T, c *fieldCase) any { return w.envID }).does(w.echoes(".environment_id")),
		rule(`^session\.(create|update) \.title$`).does(w.echoes(".title")),
		rule(`^session\.(create|update) \.metadata$`).does(w.echoes(".metadata")),
		notYet(`^session\.(create|update) \.budget`, "budget"),
		// The session's vaults: their credentials reach the proxy and the
		// tool environment (TestOutboundThroughTheSDK shows that).
		rule(`^session\.(create|update) \.vault_ids\[\]$`).with(func(t *testing.T, c *fieldCase) any {
			return w.post(t, "/v1/vaults", map[string]any{"display_name": "walk " + c.marker})["id"]
		}).does(w.echoes(".vault_ids[0]")),
		// A session's resources. A file resource names a File uploaded
		// through /v1/files, a memory_store resource a store of the tenant;
		// both are shown on the session as sent (their contents in the
		// sandbox are TestSessionResourcesThroughTheSDK's and
		// TestSessionMemoryStoresThroughTheSDK's), and a store's
		// instructions reach the model's system prompt.
		rule(`^session\.create \.resources\[\]<OfFile>\.`).with(func(t *testing.T, c *fieldCase) any {
			const f = ".resources[]<OfFile>"
			c.state["fill"+f+".file_id"] = w.upload(t, c.marker+".txt", c.marker)
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, ".type"):
				return "file"
			case strings.HasSuffix(p, ".mount_path"):
				return "/mnt/session/uploads/" + c.marker + ".txt"
			}
			return c.state["fill"+f+".file_id"]
		}).does(w.holdsResource(".resources[]<OfFile>")),
		rule(`^session\.create \.resources\[\]<OfMemoryStore>\.instructions$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["fill.resources[]<OfMemoryStore>.memory_store_id"] = w.memoryStore(t, c.marker)
			return "instructions of " + c.marker
		}).does(w.modelSees("the store's instructions", func(r anthropictest.Request, c *fieldCase) bool {
			return strings.Contains(string(r.System), "instructions of "+c.marker)
		})),
		rule(`^session\.create \.resources\[\]<OfMemoryStore>\.`).with(func(t *testing.T, c *fieldCase) any {
			const m = ".resources[]<OfMemoryStore>"
			c.state["fill"+m+".memory_store_id"] = w.memoryStore(t, c.marker)
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, ".type"):
				return "memory_store"
			case strings.HasSuffix(p, ".access"):
				return "read_only"
			}
			return c.state["fill"+m+".memory_store_id"]
		}).does(w.holdsResource(".resources[]<OfMemoryStore>")),
		rule(`^session\.create \.resources\[\]<OfGitHubRepository>\.`).with(func(t *testing.T, c *fieldCase) any {
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
			case strings.HasSuffix(p, ".sha"):
				return strings.Repeat("b", 40)
			}
			return "token-" + c.marker
		}).does(func(t *testing.T, c *fieldCase) {
			out := ok(t, c)
			if out == nil {
				return
			}
			_, got := w.do(t, "GET", "/v1/sessions/"+out["id"].(string), nil)
			for _, o := range []map[string]any{out, got} {
				res := jsonAt(o, ".resources[0]")
				field := c.leaf.path[strings.Index(c.leaf.path, ">.")+2:]
				switch {
				case field == "authorization_token":
					if b, _ := json.Marshal(o); strings.Contains(string(b), c.value.(string)) {
						t.Errorf("%s: the session shows the repository's token: %s", c.leaf.path, b)
					}
				default:
					path := "." + strings.NewReplacer("<OfBranch>", "", "<OfCommit>", "").Replace(field)
					holds(t, c, "resources[0]"+path, jsonAt(res, path), c.value)
				}
			}
		}),
		// A session's resources, added and updated: an added file is listed
		// with the session's resources as sent.
		rule(`^resource\.add \.(file_id|type|mount_path)$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["fill.file_id"] = w.upload(t, c.marker+".txt", c.marker)
			switch p := c.leaf.path; {
			case strings.HasSuffix(p, ".type"):
				return "file"
			case strings.HasSuffix(p, ".mount_path"):
				return "/mnt/session/uploads/" + c.marker + ".txt"
			}
			return c.state["fill.file_id"]
		}).does(func(t *testing.T, c *fieldCase) {
			out := ok(t, c)
			if out == nil {
				return
			}
			_, got := w.do(t, "GET", "/v1/sessions/"+c.state["session"].(string)+"/resources/"+out["id"].(string), nil)
			field := c.leaf.path[strings.LastIndex(c.leaf.path, ".")+1:]
			for _, o := range []map[string]any{out, got} {
				holds(t, c, field, jsonAt(o, "."+field), c.value)
			}
		}),
		rule(`^resource\.update \.authorization_token$`).does(func(t *testing.T, c *fieldCase) {
			out := ok(t, c)
			if out == nil {
				return
			}
			if b, _ := json.Marshal(out); strings.Contains(string(b), c.value.(string)) {
				t.Errorf("%s: the answer shows the token: %s", c.leaf.path, b)
			}
			r, err := w.d.Store().GetSessionResource(context.Background(), c.state["resource"].(string))
			if err != nil || len(r.Secret) == 0 || strings.Contains(string(r.Secret), c.value.(string)) {
				t.Errorf("%s: stored secret %q (%v); want the token sealed", c.leaf.path, r.Secret, err)
			}
		}),
		rule(`^session\.create \.initial_events\[\]<OfUserMessage>(\.type|\.content\[\]<OfText>\.(text|type))$`).does(func(t *testing.T, c *fieldCase) {
			out := ok(t, c)
			if out == nil {
				return
			}
			w.waitIdle(t, out["id"].(string), 0)
			w.requestWith(t, c.marker)
		}),
		notYet(`^session\.create \.initial_events\[\]<OfUserMessage>\.content\[\]<Of(Image|Document|Redacted)>`, "initial_events[0].content[0].type"),
		notYet(`^session\.create \.initial_events\[\]<OfUserDefineOutcome>\.rubric<OfFile>`, "initial_events[0].rubric.type"),
		rule(`^session\.create \.initial_events\[\]<OfUserDefineOutcome>`).does(func(t *testing.T, c *fieldCase) {
			if out := ok(t, c); out != nil {
				w.outcomeHolds(t, c, out["id"].(string))
			}
		}),

		// Events.
		rule(`^events\.send \.events\[\]<OfUserMessage>(\.type|\.content\[\]<OfText>\.(text|type))$`).does(func(t *testing.T, c *fieldCase) {
			if ok(t, c) == nil {
				return
			}
			w.waitIdle(t, c.state["session"].(string), 0)
			w.requestWith(t, c.marker)
		}),
		notYet(`^events\.send \.events\[\]<OfUserMessage>\.content\[\]<Of(Image|Document|Redacted)>`, "events[0].content[0].type"),
		notYet(`^events\.send \.events\[\]<OfUserCustomToolResult>\.content\[\]<Of(Image|Document|SearchResult)>`, "events[0].content[0].type").with(func(t *testing.T, c *fieldCase) any {
			w.pendingCustomCall(t, c) // so that only the content is wrong
			return nonDefault(t, c.leaf, c.marker)
		}),
		rule(`^events\.send \.events\[\]<OfUserInterrupt>\.type$`).does(func(t *testing.T, c *fieldCase) {
			// The model hangs mid-answer; only the interrupt ends the turn.
			s := c.state["session"].(string)
			w.post(t, "/v1/sessions/"+s+"/events", map[string]any{"events": []any{
				map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": "hang " + c.marker}}}}})
			select {
			case <-w.fake.Hanging:
			case <-time.After(30 * time.Second):
				t.Fatal("the model request never came")
			}
			if ok(t, c) == nil {
				return
			}
			w.waitIdle(t, s, 0)
		}),
		rule(`^events\.send \.events\[\]<OfUserInterrupt>\.session_thread_id$`).with(func(t *testing.T, c *fieldCase) any {
			// The session's primary thread; child threads are covered by
			// TestSessionThreadsThroughTheSDK.
			s := w.session(t, w.agent(t, nil))
			c.state["session"] = s
			return session.PrimaryThreadID(s)
		}).does(func(t *testing.T, c *fieldCase) {
			if out := ok(t, c); out != nil && jsonAt(out, ".data[0].session_thread_id") != c.value {
				t.Errorf("%s %s: sent %v, the event says %v", c.body, c.leaf.path, c.value, jsonAt(out, ".data[0].session_thread_id"))
			}
		}),
		rule(`^events\.send \.events\[\]<OfUserToolConfirmation>\.(type|tool_use_id|result|deny_message)$`).with(func(t *testing.T, c *fieldCase) any {
			w.pendingCall(t, c, map[string]any{"tools": []any{map[string]any{"type": "agent_toolset_20260401",
				"default_config": map[string]any{"permission_policy": map[string]any{"type": "always_ask"}}}}}, "bash", "agent.tool_use")
			c.state["fill.events[]<OfUserToolConfirmation>.tool_use_id"] = c.state["call"]
			switch {
			case strings.HasSuffix(c.leaf.path, ".type"):
				return "user.tool_confirmation"
			case strings.HasSuffix(c.leaf.path, ".tool_use_id"):
				return c.state["call"]
			case strings.HasSuffix(c.leaf.path, ".result"):
				return "deny"
			}
			return "denied: " + c.marker
		}).does(func(t *testing.T, c *fieldCase) {
			w.resumes(t, c, func(b anthropictest.Block) bool {
				return b.IsError && (!strings.HasSuffix(c.leaf.path, ".deny_message") || strings.Contains(b.ToolResultText(), c.marker))
			})
		}),
		resultRule("UserCustomToolResult", "user.custom_tool_result", ".custom_tool_use_id", w.pendingCustomCall),
		notYet(`^events\.send \.events\[\]<OfUserDefineOutcome>\.rubric<OfFile>`, "events[0].rubric.type"),
		rule(`^events\.send \.events\[\]<OfUserDefineOutcome>`).does(func(t *testing.T, c *fieldCase) {
			if ok(t, c) != nil {
				w.outcomeHolds(t, c, c.state["session"].(string))
			}
		}),
		resultRule("UserToolResult", "user.tool_result", ".tool_use_id", w.pendingRemoteCall),
		notYet(`^events\.send \.events\[\]<OfUserToolResult>\.content\[\]<Of(Image|Document|SearchResult)>`, "events[0].content[0].type").with(func(t *testing.T, c *fieldCase) any {
			w.pendingRemoteCall(t, c) // so that only the content is wrong
			return nonDefault(t, c.leaf, c.marker)
		}),
		notYet(`^events\.send \.events\[\]<OfSystemMessage>`, "events[0].type"),

		// Environments.
		rule(`^environment\.(create|update) \.(name|description)$`).does(func(t *testing.T, c *fieldCase) { w.echoes(c.leaf.path)(t, c) }),
		rule(`^environment\.(create|update) \.metadata$`).does(w.echoes(".metadata")),
		notYet(`^environment\.(create|update) \.scope$`, "scope").with("account"),
		rule(`^environment\.(create|update) \.config<OfCloud>\.type$`).does(w.echoes(".config.type")),
		rule(`^environment\.(create|update) \.config<OfCloud>\.networking<OfLimited>\.type$`).does(w.echoes(".config.networking.type")),
		rule(`^environment\.(create|update) \.config<OfCloud>\.packages\.type$`).does(w.echoes(".config.packages.type")),
		// Networking is the egress proxy's policy for the environment's
		// sessions: stored and returned here, enforced in
		// TestOutboundThroughTheSDK and internal/session's resolver test.
		rule(`^environment\.(create|update) \.config<OfCloud>\.networking<OfLimited>\.allowed_hosts\[\]$`).does(w.echoes(".config.networking.allowed_hosts[0]")),
		rule(`^environment\.(create|update) \.config<OfCloud>\.networking<OfLimited>\.allow_mcp_servers$`).does(w.echoes(".config.networking.allow_mcp_servers")),
		rule(`^environment\.(create|update) \.config<OfCloud>\.networking<OfLimited>\.allow_package_managers$`).does(w.echoes(".config.networking.allow_package_managers")),
		rule(`^environment\.(create|update) \.config<OfCloud>\.networking<OfUnrestricted>\.type$`).does(w.echoes(".config.networking.type")),
		// pip and npm are built into the environment's layer: stored and
		// returned here, built and used in TestEnvironmentPackagesThroughTheSDK.
		rule(`^environment\.(create|update) \.config<OfCloud>\.packages\.(pip|npm)\[\]$`).does(func(t *testing.T, c *fieldCase) {
			w.echoes(".config.packages."+strings.TrimSuffix(c.leaf.path[strings.LastIndex(c.leaf.path, ".")+1:], "[]")+"[0]")(t, c)
		}),
		notYet(`^environment\.(create|update) \.config<OfCloud>\.packages\.(apt|cargo|gem|go)\[\]$`, "config.packages."),
		// A self_hosted environment's sessions are served by workers
		// (TestSelfHostedSessionRunsOnTheSDKWorker); its type is fixed at
		// create, so an update to it is refused.
		rule(`^environment\.create \.config<OfSelfHosted>\.type$`).does(w.echoes(".config.type")),
		notYet(`^environment\.update \.config<OfSelfHosted>\.type$`, "config.type"),
	}
	return rules
}

// skillValue uploads a skill whose description carries the case's marker
// and returns the leaf's value for it; the other fields of the reference
// are filled to name it.
func (w *managedWalker) skillValue(t *testing.T, c *fieldCase) any {
	sk, err := w.c.Beta.Skills.New(context.Background(), anthropic.BetaSkillNewParams{Files: []io.Reader{anthropic.File(
		strings.NewReader("---\nname: walk-skill\ndescription: walk skill "+c.marker+"\n---\n"), "walk-skill/SKILL.md", "text/markdown")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"fill.", "fill.agent<OfBetaManagedAgentsAgentWithOverridess>."} {
		c.state[prefix+"skills[]<OfCustom>.skill_id"] = sk.ID
		c.state[prefix+"skills[]<OfCustom>.type"] = "custom"
	}
	switch {
	case strings.HasSuffix(c.leaf.path, ".type"):
		return "custom"
	case strings.HasSuffix(c.leaf.path, ".version"):
		return sk.LatestVersionID
	}
	return sk.ID
}

// rosterValue makes an agent at version 2 for a coordinator's roster to
// name, fills the roster's other fields to name it, and returns the
// leaf's value.
func (w *managedWalker) rosterValue(t *testing.T, c *fieldCase) any {
	id := w.agent(t, nil)
	w.post(t, "/v1/agents/"+id, map[string]any{"system": "v2 of " + c.marker})
	c.state["roster"] = id
	c.state["fill.multiagent<OfCoordinator>.agents"] = []any{id}
	c.state["fill.multiagent<OfCoordinator>.agents[]<OfBetaManagedAgentsAgents>.id"] = id
	switch p := c.leaf.path; {
	case strings.HasSuffix(p, "<OfBetaManagedAgentsMultiagentSelfs>.type"):
		return "self"
	case strings.HasSuffix(p, "<OfCoordinator>.type"):
		return "coordinator"
	case strings.HasSuffix(p, ".type"):
		return "agent"
	case strings.HasSuffix(p, ".version"):
		return 1
	}
	return id
}

// rosterHolds checks that the agent's roster is stored and returned
// resolved: its one entry is the agent rosterValue made, at the version
// pinned or else its latest, or for self the agent itself at the version
// written.
func (w *managedWalker) rosterHolds(t *testing.T, c *fieldCase) {
	out := ok(t, c)
	if out == nil {
		return
	}
	want := map[string]any{"type": "agent", "id": c.state["roster"], "version": 2}
	switch {
	case strings.HasSuffix(c.leaf.path, "<OfBetaManagedAgentsMultiagentSelfs>.type"):
		want["id"], want["version"] = out["id"], out["version"]
	case strings.HasSuffix(c.leaf.path, ".version"):
		want["version"] = 1
	}
	_, got := w.do(t, "GET", "/v1/agents/"+out["id"].(string), nil)
	for _, o := range []map[string]any{out, got} {
		holds(t, c, "multiagent", o["multiagent"], map[string]any{"type": "coordinator", "agents": []any{want}})
	}
}

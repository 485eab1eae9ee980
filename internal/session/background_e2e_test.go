package session_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

var bgReport = regexp.MustCompile(`^\[background task bgtask_[0-9a-f]+ \(command: sleep 1; exit 3\) exited with code 3 after [0-9]+s\]$`)

// TestBackgroundTaskExitReachesTheModel: the model starts a bash command
// with run_in_background and ends its turn; when the command exits, its
// exit code comes back as a user.message that starts the next turn, and
// the model's next request carries it. A second session making the same
// call at the same position gets a task, and a report, of its own.
func TestBackgroundTaskExitReachesTheModel(t *testing.T) {
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		blocks := r.Blocks(len(r.Messages) - 1)
		switch last := blocks[len(blocks)-1].Text; {
		case strings.HasPrefix(last, "[background task"):
			return anthropictest.Turn{Text: "noted"}
		case r.AssistantTurns() == 0:
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "sleep 1; exit 3", "run_in_background": true}}}}
		}
		return anthropictest.Turn{Text: "started"}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(d.AdminKey), option.WithMaxRetries(0))
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:  "bg",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bg"})
	if err != nil {
		t.Fatal(err)
	}
	// Two sessions whose identical calls sit at the same position: each
	// runs, and is told about, its own task.
	tasks := map[string]bool{}
	for range 2 {
		report := backgroundSession(t, c, fake, agent.ID, env.ID)
		tasks[strings.Fields(report)[2]] = true
	}
	if len(tasks) != 2 {
		t.Fatalf("tasks %v: want one per session", tasks)
	}
}

// backgroundSession runs a session of the test's model to its second
// turn and returns the report the model got.
func backgroundSession(t *testing.T, c anthropic.Client, fake *anthropictest.Server, agentID, envID string) string {
	t.Helper()
	ctx := context.Background()
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}, EnvironmentID: envID,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Bounded, so a report that never comes fails the test instead of
	// hanging it.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	_, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{
				OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: "run it in the background"},
			}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}

	var messages []string // the texts of the user.message events
	var started string    // the tool result of the bash call
	idles := 0
	for idles < 2 && stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "session.status_idle":
			idles++
		case "agent.tool_result":
			started = ev.RawJSON()
		case "user.message":
			var m struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal([]byte(ev.RawJSON()), &m); err != nil || len(m.Content) != 1 || m.Content[0].Type != "text" {
				t.Fatalf("user.message %s: want one text block", ev.RawJSON())
			}
			messages = append(messages, m.Content[0].Text)
		}
	}
	if idles < 2 {
		t.Fatalf("no second turn (user messages %q): %v", messages, stream.Err())
	}
	if !strings.Contains(started, "When it ends you get a message with its exit code") {
		t.Errorf("tool result %s does not say the exit will be reported", started)
	}
	if len(messages) != 2 || !bgReport.MatchString(messages[1]) {
		t.Fatalf("user messages %q: want the request and then the task's report", messages)
	}
	reqs := fake.Requests()
	last := reqs[len(reqs)-1]
	blocks := last.Blocks(len(last.Messages) - 1)
	if got := blocks[len(blocks)-1].Text; got != messages[1] {
		t.Fatalf("the model's last request ends with %q, want the report %q", got, messages[1])
	}
	return messages[1]
}

package session

import (
	"encoding/json"

	"github.com/agentkernel/agentkernel/internal/model"
)

// Compaction strategies, in the order they are tried.
const (
	// compactToolResults replaces the content of old tool results with a
	// placeholder.
	compactToolResults = "drop_tool_results"
	// compactSummary replaces the oldest messages with a summary the
	// model wrote.
	compactSummary = "summary"
)

// keepTurns is how many of the last assistant messages (with what follows
// them) a compaction leaves as they are: the model keeps the exact recent
// exchange, tool results included.
const keepTurns = 2

const droppedToolOutput = "[tool output dropped to fit the context window; the session's event log keeps it]"

// summaryIntro leads the summary message that replaces compacted turns.
const summaryIntro = "[The earlier part of this conversation was compacted to fit the context window. Summary of it:]\n\n"

// compactionBody is the agent.thread_context_compacted event. The SDK's
// type has id, type and processed_at only; the rest is agentkernel's own
// (the SDK keeps it in ExtraFields): what was replaced, by what, and the
// token estimates around it.
type compactionBody struct {
	Strategy string `json:"strategy"`
	Replaced struct {
		FirstEventID string `json:"first_event_id"`
		LastEventID  string `json:"last_event_id"`
		Messages     int    `json:"messages"`
		ToolResults  int    `json:"tool_results"`
	} `json:"replaced"`
	Summary      string `json:"summary,omitempty"`
	TokensBefore int64  `json:"input_tokens_before"`
	TokensAfter  int64  `json:"input_tokens_after"`
}

// compacted applies a recorded compaction, so a rebuilt conversation is
// the one the model saw: the messages up to the replaced range's last
// event lose their tool outputs, or give way to the summary. A range this
// conversation cannot find (the log was rewound before it) changes
// nothing.
func (c *convo) compacted(raw json.RawMessage) {
	var b compactionBody
	if json.Unmarshal(raw, &b) != nil {
		return
	}
	cut := -1
	for i, e := range c.ends {
		if e.last == b.Replaced.LastEventID {
			cut = i
		}
	}
	if cut < 0 {
		return
	}
	switch b.Strategy {
	case compactToolResults:
		dropToolResults(c.msgs[:cut+1])
	case compactSummary:
		for _, m := range c.msgs[:cut+1] {
			if m.Role == model.RoleAssistant {
				c.summarized++
			}
		}
		first := c.ends[0].first
		c.msgs = append([]model.Message{summaryMessage(b.Summary)}, c.msgs[cut+1:]...)
		c.ends = append([]msgEvents{{first: first, last: c.cur}}, c.ends[cut+1:]...)
	}
}

// summaryMessage is the user message that stands for compacted turns. Its
// text ends the request's stable prefix: a prompt-cache breakpoint.
func summaryMessage(summary string) model.Message {
	b := model.Text(summaryIntro + summary)
	b.Cache = true
	return model.Message{Role: model.RoleUser, Content: []model.Block{b}}
}

// dropToolResults replaces the content of the tool results in msgs (in
// place; the blocks are copied) and returns how many it replaced.
func dropToolResults(msgs []model.Message) int {
	n := 0
	for i := range msgs {
		var content []model.Block
		for j, b := range msgs[i].Content {
			if b.Type != model.BlockToolResult || isDropped(b) {
				continue
			}
			if content == nil {
				content = append([]model.Block(nil), msgs[i].Content...)
			}
			content[j].Content = []model.Block{model.Text(droppedToolOutput)}
			n++
		}
		if content != nil {
			msgs[i].Content = content
		}
	}
	return n
}

func isDropped(b model.Block) bool {
	return len(b.Content) == 1 && b.Content[0].Text == droppedToolOutput
}

// cutPoint is the index of the last message a compaction replaces: the
// one before the keepTurns-th last assistant message, so the kept part
// starts with an assistant message (a summary, a user message, goes
// before it) and no tool result is kept without its tool use. -1: the
// conversation is too short to compact (or only its summary would go).
func (c *convo) cutPoint() int {
	var asst []int
	for i, m := range c.msgs {
		if m.Role == model.RoleAssistant {
			asst = append(asst, i)
		}
	}
	if len(asst) <= keepTurns {
		return -1
	}
	cut := asst[len(asst)-keepTurns] - 1
	if cut < 0 || (cut == 0 && c.summarized > 0) {
		return -1
	}
	return cut
}

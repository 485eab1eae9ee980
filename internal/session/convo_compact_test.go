package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// logBuilder makes a session log to fold.
type logBuilder struct{ evs []store.SessionEvent }

func (l *logBuilder) add(typ string, body map[string]any) string {
	ev := newEvent(typ, body)
	l.evs = append(l.evs, store.SessionEvent{ID: ev.ID, Seq: int64(len(l.evs) + 1), Type: typ, Data: ev.Data})
	return ev.ID
}

// turn adds a turn: the user's text, a tool call and its result, an answer.
func (l *logBuilder) turn(i int) {
	l.add(EventUserMessage, map[string]any{"content": textContent(fmt.Sprintf("ask %d", i))})
	l.add(EventStatusRunning, nil)
	use := l.add(EventAgentToolUse, map[string]any{"name": "bash", "input": map[string]any{}, "evaluated_permission": "allow"})
	l.add(EventAgentToolResult, map[string]any{"tool_use_id": use, "content": textContent(fmt.Sprintf("output %d", i))})
	l.add(EventAgentMessage, map[string]any{"content": textContent(fmt.Sprintf("answer %d", i))})
	l.add(EventStatusIdle, map[string]any{"stop_reason": stopReason(StopEndTurn, nil)})
}

func (l *logBuilder) compaction(b compactionBody) string {
	raw, _ := json.Marshal(b)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return l.add(EventThreadContextCompacted, m)
}

func fold(evs []store.SessionEvent) *convo {
	c := newConvo(false)
	for _, ev := range evs {
		c.fold(ev)
	}
	return c
}

func render(msgs []model.Message) string {
	var parts []string
	for _, m := range msgs {
		for _, b := range m.Content {
			s := b.Text
			if b.Type == model.BlockToolResult {
				s = "result:" + b.Content[0].Text
			}
			if b.Type == model.BlockToolUse {
				s = "use"
			}
			parts = append(parts, m.Role[:1]+":"+s)
		}
	}
	return strings.Join(parts, " | ")
}

// TestConvoAppliesRecordedCompactions: a conversation folded from a log
// with compactions is the compacted one — tool outputs dropped up to the
// recorded event, then summaries (the second one replacing the first)
// — and counts the assistant messages the summary stands for.
func TestConvoAppliesRecordedCompactions(t *testing.T) {
	var l logBuilder
	for i := 1; i <= 4; i++ {
		l.turn(i)
	}
	c := fold(l.evs)
	cut := c.cutPoint()
	if cut < 0 || c.msgs[cut+1].Role != model.RoleAssistant {
		t.Fatalf("cut %d of %s", cut, render(c.msgs))
	}
	var b compactionBody
	b.Strategy, b.Replaced.LastEventID = compactToolResults, c.ends[cut].last
	l.compaction(b)
	got := render(fold(l.evs).messages())
	if strings.Count(got, droppedToolOutput) != 3 || !strings.Contains(got, "result:output 4") || !strings.Contains(got, "u:ask 1") {
		t.Fatalf("after dropping tool outputs: %s", got)
	}

	b = compactionBody{Strategy: compactSummary, Summary: "S1"}
	b.Replaced.LastEventID = c.ends[cut].last
	l.compaction(b)
	c = fold(l.evs)
	got = render(c.messages())
	if !strings.HasPrefix(got, "u:"+summaryIntro+"S1 | a:use") || strings.Contains(got, "ask 1") || c.summarized != 6 {
		t.Fatalf("after the summary (%d summarized): %s", c.summarized, got)
	}
	if m := c.messages()[0]; !m.Content[0].Cache {
		t.Fatal("the summary is not a cache breakpoint")
	}

	// Two more turns; the next summary replaces the first one too.
	l.turn(5)
	l.turn(6)
	c = fold(l.evs)
	cut = c.cutPoint()
	b = compactionBody{Strategy: compactSummary, Summary: "S2"}
	b.Replaced.LastEventID = c.ends[cut].last
	l.compaction(b)
	c = fold(l.evs)
	got = render(c.messages())
	if !strings.HasPrefix(got, "u:"+summaryIntro+"S2 | a:use") || strings.Contains(got, "S1") || !strings.Contains(got, "answer 6") || c.summarized != 10 {
		t.Fatalf("after the second summary (%d summarized): %s", c.summarized, got)
	}
}

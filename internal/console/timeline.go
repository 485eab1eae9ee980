package console

import (
	"fmt"
	"time"
)

// The timeline of a session's turns: each turn a bar, its model time and
// its tool time drawn where they fell, all turns on one scale.

// timelineWidth is the drawing's width for the longest turn.
const timelineWidth = 600

type timelineSeg struct {
	X, W int
	Kind string // model or tool
}

type timelineTurn struct {
	Y               int
	W               int
	Label           string
	Model, Tool     time.Duration
	Total           time.Duration
	Segs            []timelineSeg
	ModelMS, ToolMS int64
}

type timelineView struct {
	Turns  []timelineTurn
	Height int
}

// timeline reads the turns in events (a turn runs from
// session.status_running to the next session.status_idle or
// status_terminated): model time from span.model_request_start to its
// end, tool time from agent.tool_use to its result.
func timeline(events []eventView) *timelineView {
	type span struct {
		from, to time.Time
		kind     string
	}
	type turn struct {
		start, end time.Time
		spans      []span
	}
	var turns []turn
	var cur *turn
	var modelStart time.Time
	toolStart := map[string]time.Time{}
	for _, e := range events {
		switch e.Type {
		case "session.status_running":
			turns = append(turns, turn{start: e.At})
			cur = &turns[len(turns)-1]
		case "session.status_idle", "session.status_terminated":
			if cur != nil {
				cur.end = e.At
				cur = nil
			}
		case "span.model_request_start":
			modelStart = e.At
		case "span.model_request_end":
			if cur != nil && !modelStart.IsZero() {
				cur.spans = append(cur.spans, span{modelStart, e.At, "model"})
			}
			modelStart = time.Time{}
		case "agent.tool_use", "agent.mcp_tool_use":
			toolStart[e.ID] = e.At
		case "agent.tool_result", "agent.mcp_tool_result":
			if cur != nil && e.ToolUseID != "" {
				if at, ok := toolStart[e.ToolUseID]; ok {
					cur.spans = append(cur.spans, span{at, e.At, "tool"})
				}
			}
		}
	}
	var longest time.Duration
	for _, t := range turns {
		if !t.end.IsZero() {
			longest = max(longest, t.end.Sub(t.start))
		}
	}
	if longest <= 0 {
		return nil
	}
	scale := func(d time.Duration) int { return int(float64(timelineWidth) * float64(d) / float64(longest)) }
	v := &timelineView{}
	for i, t := range turns {
		if t.end.IsZero() {
			continue
		}
		tt := timelineTurn{Y: len(v.Turns) * 26, W: max(scale(t.end.Sub(t.start)), 1), Total: t.end.Sub(t.start)}
		for _, s := range t.spans {
			d := s.to.Sub(s.from)
			tt.Segs = append(tt.Segs, timelineSeg{X: scale(s.from.Sub(t.start)), W: max(scale(d), 1), Kind: s.kind})
			if s.kind == "model" {
				tt.Model += d
			} else {
				tt.Tool += d
			}
		}
		tt.ModelMS, tt.ToolMS = tt.Model.Milliseconds(), tt.Tool.Milliseconds()
		tt.Label = fmt.Sprintf("turn %d: %s, model %s, tools %s", i+1, tt.Total.Round(time.Millisecond), tt.Model.Round(time.Millisecond), tt.Tool.Round(time.Millisecond))
		v.Turns = append(v.Turns, tt)
	}
	v.Height = len(v.Turns) * 26
	return v
}

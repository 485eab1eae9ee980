package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestRendererShowsToolCallsAndClipsOutput(t *testing.T) {
	var out bytes.Buffer
	r := newRenderer(&out)
	long := strings.Repeat("line\n", renderMaxLines+5)
	for _, raw := range []string{
		`{"id":"sevt_1","type":"agent.tool_use","name":"read","input":{"file_path":"a.txt"},"processed_at":"2026-01-02T03:04:05Z"}`,
		fmt.Sprintf(`{"id":"sevt_2","type":"agent.tool_result","tool_use_id":"sevt_1","is_error":true,"content":[{"type":"text","text":%q}]}`, long),
		`{"id":"sevt_3","type":"span.model_request_start"}`,
		`{"id":"sevt_4","type":"session.error","error":{"type":"model_request_failed_error","message":"no key"}}`,
		`{"id":"sevt_5","type":"session.status_idle","stop_reason":{"type":"requires_action","event_ids":["sevt_9"]}}`,
		`{"id":"sevt_6","type":"agent.message","content":[{"type":"text","text":"two\nlines"}]}`,
		`{"id":"sevt_7","type":"agent.thread_context_compacted","strategy":"summary","replaced":{"messages":7},"input_tokens_before":2888,"input_tokens_after":1405}`,
		`{"id":"sevt_7b","type":"user.define_outcome","description":"Write a haiku.","rubric":{"type":"text","content":"3 lines"}}`,
		`{"id":"sevt_8","type":"span.outcome_evaluation_start","iteration":1}`,
		`{"id":"sevt_9","type":"span.outcome_evaluation_end","iteration":1,"result":"needs_revision","explanation":"four lines"}`,
	} {
		r.event(raw)
	}
	got := out.String()
	for _, want := range []string{
		`tool      read  {"file_path":"a.txt"}`,
		"failed    read\n",
		"… 5 more lines (--json shows all)",
		"error     model_request_failed_error: no key",
		"status    idle (requires_action: sevt_9)",
		"agent     two\n                    lines\n",
		"context   compacted: summarised 7 messages, ~2888 → ~1405 tokens",
		"user      outcome: Write a haiku.",
		"grader    needs_revision (evaluation 2): four lines",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "span.") || strings.Count(got, "line\n") != renderMaxLines {
		t.Errorf("spans shown or output not clipped to %d lines:\n%s", renderMaxLines, got)
	}
}

func TestSettleState(t *testing.T) {
	for _, tc := range []struct {
		events  string
		settled bool
	}{
		{"", true},
		{"user.message", false},
		{"user.message session.status_running", false},
		{"user.message session.status_running session.status_idle", true},
		// A message queued during a turn starts the next one.
		{"session.status_running user.message session.status_idle", false},
		{"session.status_running user.message session.status_idle session.status_running session.status_idle", true},
		{"session.status_running session.status_terminated", true},
		{"user.define_outcome", false},
		{"user.define_outcome session.status_running session.status_idle", true},
	} {
		var s settleState
		for _, e := range strings.Fields(tc.events) {
			s.apply(e)
		}
		if s.settled() != tc.settled {
			t.Errorf("%q: settled = %v, want %v", tc.events, s.settled(), tc.settled)
		}
	}
}

func TestTruncateKeepsUTF8Whole(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	got := truncate(s, 5)
	if !strings.HasPrefix(got, "éé…") {
		t.Fatalf("truncate = %q", got)
	}
}

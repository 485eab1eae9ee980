package managed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Event types clients send (the SDK's BetaManagedAgentsEventParamsUnion)
// that agentkernel accepts.
const (
	EventUserMessage          = "user.message"
	EventUserInterrupt        = "user.interrupt"
	EventUserCustomToolResult = "user.custom_tool_result"
	EventUserToolConfirmation = "user.tool_confirmation"
)

// sdkOnlyEvents are valid in the SDK but not (yet) served by agentkernel.
var sdkOnlyEvents = map[string]string{
	"user.tool_result": "tool results are only for self_hosted environments, which agentkernel does not run",
	"system.message":   "system messages are not supported",
}

// buildEvents validates client events and turns them into events to store,
// each with its id and the time it was received. sessionID is "" before
// the session exists (initial_events, where user.message and
// user.define_outcome fit).
func (s *Service) buildEvents(ctx context.Context, sessionID string, in []Obj, initial bool) ([]store.NewEvent, error) {
	now := s.clock().Format(time.RFC3339Nano)
	out := make([]store.NewEvent, 0, len(in))
	openOutcome, checkedOutcome := "", false
	for _, ev := range in {
		if n := len(MustJSON(ev.Map())); n > s.maxEventBytes {
			return nil, inputErr(http.StatusRequestEntityTooLarge,
				"%s is %d bytes; the limit is %d bytes per event", ev.Path(), n, s.maxEventBytes)
		}
		typ, err := ev.ReqStr("type")
		if err != nil {
			return nil, err
		}
		var body map[string]any
		switch {
		case typ == EventUserMessage:
			body, err = userMessage(ev)
		case typ == EventUserDefineOutcome:
			if !checkedOutcome {
				openOutcome, err = s.openOutcome(ctx, sessionID)
				checkedOutcome = true
			}
			if err == nil {
				body, err = defineOutcome(ev, openOutcome)
			}
			if err == nil {
				openOutcome = body["outcome_id"].(string)
			}
		case initial:
			err = badRequest("field %q: initial_events take user.message and user.define_outcome only, got %q", ev.Field("type"), typ)
		case typ == EventUserInterrupt:
			body, err = userInterrupt(ev)
		case typ == EventUserCustomToolResult:
			body, err = s.customToolResult(ctx, sessionID, ev)
		case typ == EventUserToolConfirmation:
			body, err = s.toolConfirmation(ctx, sessionID, ev)
		case sdkOnlyEvents[typ] != "":
			err = badRequest("field %q: %s events are not accepted: %s", ev.Field("type"), typ, sdkOnlyEvents[typ])
		default:
			err = badRequest("field %q: unknown event type %q (want user.message, user.define_outcome, user.interrupt, user.custom_tool_result or user.tool_confirmation)", ev.Field("type"), typ)
		}
		if err != nil {
			return nil, err
		}
		id := ids.New("sevt")
		body["id"], body["type"], body["processed_at"] = id, typ, now
		out = append(out, store.NewEvent{ID: id, Type: typ, Data: MustJSON(body)})
	}
	return out, nil
}

// contentBlocks validates a content array of text blocks. The other block
// types the SDK defines for the field (known) are refused as not supported
// yet: the conversation passes text only, so an image would be dropped.
func contentBlocks(ev Obj, k string, required bool, known ...string) ([]map[string]json.RawMessage, error) {
	blocks, err := ev.Objects(k)
	if err != nil {
		return nil, err
	}
	if required && len(blocks) == 0 {
		return nil, badRequest("field %q is required: an array of content blocks such as {\"type\": \"text\", \"text\": \"…\"}", ev.Field(k))
	}
	out := make([]map[string]json.RawMessage, 0, len(blocks))
	for _, b := range blocks {
		typ, err := b.ReqStr("type")
		if err != nil {
			return nil, err
		}
		switch {
		case typ == "text":
		case slices.Contains(known, typ):
			return nil, b.NotYet("type", fmt.Sprintf("%s content blocks; agentkernel passes text blocks only", typ))
		default:
			return nil, badRequest("field %q: unknown content block type %q (want text)", b.Field("type"), typ)
		}
		if !b.Set("text") {
			return nil, badRequest("field %q is required", b.Field("text"))
		}
		if _, err := b.Str("text"); err != nil {
			return nil, err
		}
		out = append(out, b.Map())
	}
	return out, nil
}

func userMessage(ev Obj) (map[string]any, error) {
	content, err := contentBlocks(ev, "content", true, "image", "document", "redacted")
	if err != nil {
		return nil, err
	}
	return map[string]any{"content": content}, nil
}

// userInterrupt interrupts the session's turn. Threads exist only with
// multiple agents, which agentkernel does not run.
func userInterrupt(ev Obj) (map[string]any, error) {
	t, err := ev.Str("session_thread_id")
	if err != nil {
		return nil, err
	}
	if t != "" {
		return nil, ev.NotYet("session_thread_id", "a session runs one agent in one thread; interrupt the session itself")
	}
	return map[string]any{}, nil
}

func (s *Service) customToolResult(ctx context.Context, sessionID string, ev Obj) (map[string]any, error) {
	useID, err := ev.ReqStr("custom_tool_use_id")
	if err != nil {
		return nil, err
	}
	if err := s.referencedEvent(ctx, sessionID, ev, "custom_tool_use_id", useID, "agent.custom_tool_use"); err != nil {
		return nil, err
	}
	content, err := contentBlocks(ev, "content", false, "image", "document", "search_result")
	if err != nil {
		return nil, err
	}
	isErr, err := ev.Bool("is_error")
	if err != nil {
		return nil, err
	}
	return map[string]any{"custom_tool_use_id": useID, "content": content, "is_error": isErr}, nil
}

func (s *Service) toolConfirmation(ctx context.Context, sessionID string, ev Obj) (map[string]any, error) {
	useID, err := ev.ReqStr("tool_use_id")
	if err != nil {
		return nil, err
	}
	if err := s.referencedEvent(ctx, sessionID, ev, "tool_use_id", useID, "agent.tool_use", "agent.mcp_tool_use"); err != nil {
		return nil, err
	}
	result, err := ev.ReqStr("result")
	if err != nil {
		return nil, err
	}
	if result != "allow" && result != "deny" {
		return nil, badRequest("field %q must be allow or deny, got %q", ev.Field("result"), result)
	}
	body := map[string]any{"tool_use_id": useID, "result": result}
	if ev.Set("deny_message") {
		if result != "deny" {
			return nil, badRequest("field %q is only allowed when result is deny", ev.Field("deny_message"))
		}
		msg, err := ev.Str("deny_message")
		if err != nil {
			return nil, err
		}
		body["deny_message"] = msg
	}
	return body, nil
}

// referencedEvent checks that id names an event of one of types in the
// session, so a result for a tool call that never happened fails here.
func (s *Service) referencedEvent(ctx context.Context, sessionID string, ev Obj, field, id string, types ...string) error {
	e, err := s.st.GetEvent(ctx, sessionID, id)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("field %q: session %s has no event %q", ev.Field(field), sessionID, id)
	}
	if err != nil {
		return err
	}
	for _, t := range types {
		if e.Type == t {
			return nil
		}
	}
	return badRequest("field %q: event %q is a %s, not %s", ev.Field(field), id, e.Type, fmt.Sprint(types))
}

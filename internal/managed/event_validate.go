package managed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Event types clients send (the SDK's BetaManagedAgentsEventParamsUnion)
// that agentkernel accepts.
const (
	EventUserMessage          = "user.message"
	EventUserInterrupt        = "user.interrupt"
	EventUserCustomToolResult = "user.custom_tool_result"
	EventUserToolConfirmation = "user.tool_confirmation"
	EventUserToolResult       = "user.tool_result"
)

// sdkOnlyEvents are valid in the SDK but not (yet) served by agentkernel.
var sdkOnlyEvents = map[string]string{
	"system.message": "system messages are not supported",
}

// buildEvents validates client events and turns them into events to store,
// each with its id and the time it was received. parent is nil before the
// session exists (initial_events, where user.message and
// user.define_outcome fit). targets[i] is where out[i] goes: "" for the
// session's own log (its primary thread), else the id of the child
// thread whose log it goes to.
func (s *Service) buildEvents(ctx context.Context, parent *store.ManagedSession, in []Obj, initial bool) (out []store.NewEvent, targets []string, err error) {
	sessionID := ""
	if parent != nil {
		sessionID = parent.ID
	}
	now := s.clock().Format(time.RFC3339Nano)
	out = make([]store.NewEvent, 0, len(in))
	targets = make([]string, 0, len(in))
	openOutcome, checkedOutcome := "", false
	for _, ev := range in {
		if n := len(MustJSON(ev.Map())); n > s.maxEventBytes {
			return nil, nil, inputErr(http.StatusRequestEntityTooLarge,
				"%s is %d bytes; the limit is %d bytes per event", ev.Path(), n, s.maxEventBytes)
		}
		typ, err := ev.ReqStr("type")
		if err != nil {
			return nil, nil, err
		}
		var body map[string]any
		target := ""
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
			body, target, err = s.userInterrupt(ctx, parent, ev)
		case typ == EventUserCustomToolResult:
			body, target, err = s.customToolResult(ctx, parent, ev)
		case typ == EventUserToolConfirmation:
			body, target, err = s.toolConfirmation(ctx, parent, ev)
		case typ == EventUserToolResult:
			body, target, err = s.toolResult(ctx, parent, ev)
		case sdkOnlyEvents[typ] != "":
			err = badRequest("field %q: %s events are not accepted: %s", ev.Field("type"), typ, sdkOnlyEvents[typ])
		default:
			err = badRequest("field %q: unknown event type %q (want user.message, user.define_outcome, user.interrupt, user.custom_tool_result, user.tool_result or user.tool_confirmation)", ev.Field("type"), typ)
		}
		if err != nil {
			return nil, nil, err
		}
		id := ids.New("sevt")
		logID := target
		if logID == "" {
			logID = sessionID
		}
		switch typ {
		case EventUserToolResult:
			id = answerID(logID, body["tool_use_id"].(string))
		case EventUserCustomToolResult:
			id = answerID(logID, body["custom_tool_use_id"].(string))
		}
		body["id"], body["type"], body["processed_at"] = id, typ, now
		out = append(out, store.NewEvent{ID: id, Type: typ, Data: MustJSON(body)})
		targets = append(targets, target)
	}
	return out, targets, nil
}

// answerID is the id of the event answering a call: derived from its log
// and the call's id, so a client's resend of a result that did land (its
// answer lost or late: the SDK's tool runner and its HTTP client both
// resend on a timeout or a 5xx) is the same event, which the store will
// not hold twice; SendEvents then answers the stored one.
func answerID(logID, useID string) string {
	h := sha256.Sum256([]byte(logID + "\x00answer\x00" + useID))
	return "sevt_" + hex.EncodeToString(h[:13])
}

// sameAnswer says whether two answers of one call say the same: content
// and is_error (ids and times differ between sends).
func sameAnswer(a, b json.RawMessage) bool {
	var x, y struct {
		Content any  `json:"content"`
		IsError bool `json:"is_error"`
	}
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil &&
		x.IsError == y.IsError && reflect.DeepEqual(x.Content, y.Content)
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

// userInterrupt interrupts the session's turns, or with
// session_thread_id only the named thread's: the primary thread (the
// event goes to the session's log) or a live child thread (it goes to
// the thread's own log).
func (s *Service) userInterrupt(ctx context.Context, parent *store.ManagedSession, ev Obj) (map[string]any, string, error) {
	t, err := ev.Str("session_thread_id")
	if err != nil || t == "" {
		return map[string]any{}, "", err
	}
	target, err := s.threadTarget(ctx, parent, ev, t)
	if err != nil {
		return nil, "", err
	}
	return map[string]any{"session_thread_id": t}, target, nil
}

// customToolResult answers an agent.custom_tool_use of the session or of
// one of its threads (routed by custom_tool_use_id, as the SDK says: the
// client does not name the thread).
func (s *Service) customToolResult(ctx context.Context, parent *store.ManagedSession, ev Obj) (map[string]any, string, error) {
	return s.resultFor(ctx, parent, ev, "custom_tool_use_id", "agent.custom_tool_use")
}

// toolResult is a self_hosted environment's worker answering a sandbox
// tool call it ran (the session's or one of its threads', routed by
// tool_use_id). A cloud session's tools run in its own sandbox: a result
// sent for one would race the daemon's.
func (s *Service) toolResult(ctx context.Context, parent *store.ManagedSession, ev Obj) (map[string]any, string, error) {
	hosted, err := s.SelfHostedSession(ctx, parent)
	if err != nil {
		return nil, "", err
	}
	if !hosted {
		return nil, "", badRequest("field %q: user.tool_result events are for sessions of self_hosted environments, whose workers run the tools; session %s runs its tools itself", ev.Field("type"), parent.ID)
	}
	return s.resultFor(ctx, parent, ev, "tool_use_id", "agent.tool_use")
}

// resultFor reads a result of a call the client ran: idField names an
// event of callType, content is text blocks, is_error a boolean.
func (s *Service) resultFor(ctx context.Context, parent *store.ManagedSession, ev Obj, idField, callType string) (map[string]any, string, error) {
	useID, err := ev.ReqStr(idField)
	if err != nil {
		return nil, "", err
	}
	target, err := s.referencedEvent(ctx, parent, ev, idField, useID, callType)
	if err != nil {
		return nil, "", err
	}
	content, err := contentBlocks(ev, "content", false, "image", "document", "search_result")
	if err != nil {
		return nil, "", err
	}
	isErr, err := ev.Bool("is_error")
	if err != nil {
		return nil, "", err
	}
	return map[string]any{idField: useID, "content": content, "is_error": isErr}, target, nil
}

// toolConfirmation answers a tool use of the session or of one of its
// threads (routed by tool_use_id).
func (s *Service) toolConfirmation(ctx context.Context, parent *store.ManagedSession, ev Obj) (map[string]any, string, error) {
	useID, err := ev.ReqStr("tool_use_id")
	if err != nil {
		return nil, "", err
	}
	target, err := s.referencedEvent(ctx, parent, ev, "tool_use_id", useID, "agent.tool_use", "agent.mcp_tool_use")
	if err != nil {
		return nil, "", err
	}
	result, err := ev.ReqStr("result")
	if err != nil {
		return nil, "", err
	}
	if result != "allow" && result != "deny" {
		return nil, "", badRequest("field %q must be allow or deny, got %q", ev.Field("result"), result)
	}
	body := map[string]any{"tool_use_id": useID, "result": result}
	if ev.Set("deny_message") {
		if result != "deny" {
			return nil, "", badRequest("field %q is only allowed when result is deny", ev.Field("deny_message"))
		}
		msg, err := ev.Str("deny_message")
		if err != nil {
			return nil, "", err
		}
		body["deny_message"] = msg
	}
	return body, target, nil
}

// referencedEvent checks that id names an event of one of types, so a
// result for a tool call that never happened fails here, and returns
// where the answer goes: "" for the session's log, or the child thread
// whose call it answers (the call is in the thread's own log, or
// cross-posted to the session's with the thread's session_thread_id).
func (s *Service) referencedEvent(ctx context.Context, parent *store.ManagedSession, ev Obj, field, id string, types ...string) (string, error) {
	e, err := s.st.GetEvent(ctx, parent.ID, id)
	logID := parent.ID
	if errors.Is(err, store.ErrNotFound) {
		logID, e, err = s.threadEvent(ctx, parent, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", badRequest("field %q: session %s has no event %q", ev.Field(field), parent.ID, id)
	}
	if err != nil {
		return "", err
	}
	if !slices.Contains(types, e.Type) {
		return "", badRequest("field %q: event %q is a %s, not %s", ev.Field(field), id, e.Type, fmt.Sprint(types))
	}
	if logID == parent.ID {
		var x struct {
			Thread string `json:"session_thread_id"`
		}
		if json.Unmarshal(e.Data, &x) != nil || x.Thread == "" || x.Thread == session.PrimaryThreadID(parent.ID) {
			return "", nil
		}
		logID = x.Thread
	}
	t, err := s.threadOf(ctx, parent, logID)
	if err != nil {
		return "", err
	}
	if t.Row.ArchivedAt != nil || t.Row.TerminatedAt != nil {
		return "", conflict("field %q: event %q belongs to session thread %q, which is archived or terminated", ev.Field(field), id, logID)
	}
	return logID, nil
}

// threadEvent finds event id in the logs of parent's child threads.
func (s *Service) threadEvent(ctx context.Context, parent *store.ManagedSession, id string) (string, *store.SessionEvent, error) {
	rows, err := s.st.ListSessionThreads(ctx, parent.ID)
	if err != nil {
		return "", nil, err
	}
	for _, r := range rows {
		e, err := s.st.GetEvent(ctx, r.ID, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		return r.ID, e, err
	}
	return "", nil, store.ErrNotFound
}

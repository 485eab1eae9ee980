package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The coordinator's thread tools. A coordinator (an agent with a
// multiagent roster) gets two tools the daemon answers itself: one opens a
// thread with a roster agent and gives it a task, the other sends a
// follow-up to a thread it opened. Both return at once; a thread's answer
// reaches the coordinator as agent.thread_message_received once the
// thread's turn ends (thread_sync.go).
const (
	ToolCreateThread = "create_thread"
	ToolSendToThread = "send_to_thread"
)

// maxThreads bounds the threads of one session (the hosted service's
// limit of concurrent threads).
const maxThreads = 25

// rosterAgent is a roster entry with the name the model calls it by.
type rosterAgent struct {
	rosterRef
	Name string
	// Doc is the agent version's document.
	Doc json.RawMessage
}

// roster resolves the coordinator's roster entries to their agents.
func (w *worker) roster(ctx context.Context, spec *agentSpec) ([]rosterAgent, error) {
	out := make([]rosterAgent, 0, len(spec.Roster))
	for _, ref := range spec.Roster {
		a, err := w.r.cfg.Store.GetAgent(ctx, ref.ID, ref.Version)
		if err != nil {
			return nil, fmt.Errorf("roster agent %s version %d: %w", ref.ID, ref.Version, err)
		}
		out = append(out, rosterAgent{rosterRef: ref, Name: agentName(a), Doc: a.Doc})
	}
	return out, nil
}

// threadTools are the tool definitions a coordinator's model gets.
func threadTools(roster []rosterAgent) []model.Tool {
	names := make([]string, 0, len(roster))
	for _, a := range roster {
		names = append(names, a.Name)
	}
	create, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"agent":   map[string]any{"type": "string", "enum": names, "description": "The roster agent to run the thread (its name, or its id)."},
			"message": map[string]any{"type": "string", "description": "The task: everything the agent needs to know, since it does not see this conversation."},
		},
		"required": []string{"agent", "message"},
	})
	send, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"thread_id": map[string]any{"type": "string", "description": "The id create_thread returned."},
			"message":   map[string]any{"type": "string"},
		},
		"required": []string{"thread_id", "message"},
	})
	return []model.Tool{
		{Name: ToolCreateThread, InputSchema: create, Description: "Open a new thread: the named agent works on the message in its own context, " +
			"sharing this session's sandbox. Returns the thread's id at once; the agent's answer arrives as a message from that thread."},
		{Name: ToolSendToThread, InputSchema: send, Description: "Send a follow-up message to a thread you opened; " +
			"it keeps everything from its earlier turns. Its answer arrives as a message from that thread."},
	}
}

// threadOpID is the journal id of a thread tool call at its position.
func threadOpID(ts *turnState, cl *call, step int64) (string, json.RawMessage, error) {
	args, err := json.Marshal(map[string]any{"name": cl.name, "input": cl.input})
	if err != nil {
		return "", nil, err
	}
	id, err := journal.OpID(journal.KindThreadCall, args, ts.turnSeq, step, cl.index)
	return id, args, err
}

// derivedID is an id of prefix derived from parts: the same parts give the
// same id, so the store refuses a second write of it.
func derivedID(prefix string, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + hex.EncodeToString(h[:13])
}

// threadResult is what a thread tool call recorded in the journal.
type threadResult struct {
	Text    string `json:"text"`
	IsError bool   `json:"is_error"`
}

// runThreadTool runs a create_thread or send_to_thread call as a journalled
// op (journal.KindThreadCall): a completed one is replayed; a started one
// is sent again, every write keyed by the op id.
func (w *worker) runThreadTool(ctx context.Context, ts *turnState, cl *call, step int64) (string, bool, error) {
	r := w.r
	opID, args, err := threadOpID(ts, cl, step)
	if err != nil {
		return "", false, err
	}
	op, err := r.cfg.Store.StartOp(ctx, &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindThreadCall,
		TurnSeq: ts.turnSeq, Step: step, Index: cl.index, Args: args, Status: store.OpStarted, StartedAt: r.cfg.Clock.Now()})
	switch {
	case errors.Is(err, store.ErrAlreadyExists) && op != nil:
		act, derr := journal.Decide(op.Kind, journal.State{Completed: op.Status == store.OpCompleted, Keyed: true})
		switch {
		case derr != nil:
			return "", false, derr
		case act == journal.Replay:
			var rec threadResult
			if err := json.Unmarshal(op.Result, &rec); err != nil {
				return "", false, fmt.Errorf("op %s: recorded result: %w", opID, err)
			}
			return rec.Text, rec.IsError, nil
		case act != journal.Resend:
			return "", false, fmt.Errorf("op %s: no thread call recovery for %q", opID, act)
		}
	case err != nil:
		return "", false, fmt.Errorf("journal the thread call: %w", err)
	}
	var res threadResult
	switch cl.name {
	case ToolCreateThread:
		res, err = w.openThread(ctx, ts, cl, opID)
	default:
		res, err = w.messageThread(ctx, ts, cl, opID)
	}
	if err != nil {
		return "", false, err
	}
	raw, _ := json.Marshal(res)
	if _, err := r.cfg.Store.CompleteOp(context.WithoutCancel(ctx), w.id, opID, raw); err != nil && !errors.Is(err, store.ErrConflict) {
		return "", false, fmt.Errorf("journal the thread call's result: %w", err)
	}
	return res.Text, res.IsError, nil
}

func refusal(format string, a ...any) (threadResult, error) {
	return threadResult{Text: fmt.Sprintf(format, a...), IsError: true}, nil
}

// openThread opens a thread with a roster agent: the thread's session
// (with the task as its first user.message) in one store transaction,
// then session.thread_created and agent.thread_message_sent on the
// parent. The thread's id and every event id derive from the op id.
func (w *worker) openThread(ctx context.Context, ts *turnState, cl *call, opID string) (threadResult, error) {
	r := w.r
	var in struct {
		Agent   string `json:"agent"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(cl.input, &in); err != nil || in.Agent == "" || strings.TrimSpace(in.Message) == "" {
		return refusal("create_thread needs a string agent (a roster agent's name or id) and a non-empty message.")
	}
	roster, err := w.roster(ctx, ts.agent)
	if err != nil {
		return threadResult{}, err
	}
	var target *rosterAgent
	for i := range roster {
		if roster[i].Name == in.Agent || roster[i].ID == in.Agent {
			target = &roster[i]
			break
		}
	}
	if target == nil {
		names := make([]string, len(roster))
		for i, a := range roster {
			names[i] = a.Name
		}
		return refusal("No agent %q in this coordinator's roster; it has: %s.", in.Agent, strings.Join(names, ", "))
	}
	threadID := derivedID(ThreadPrefix, w.id, opID)
	threads, err := r.cfg.Store.ListSessionThreads(ctx, w.id)
	if err != nil {
		return threadResult{}, err
	}
	exists := false
	for _, th := range threads {
		exists = exists || th.ID == threadID
	}
	if !exists && len(threads) >= maxThreads {
		return refusal("This session has %d threads, the most it may have; send follow-ups to one of them instead.", len(threads))
	}
	sbID := ""
	if r.cfg.Sandboxes != nil {
		// Every thread shares the session's sandbox: it exists before
		// the first thread does.
		if sbID, err = w.ensureSandbox(ctx, ts); err != nil {
			return threadResult{}, err
		}
	}
	doc := map[string]any{}
	if v := SessionVaultIDs(ts.s); len(v) > 0 {
		doc["vault_ids"] = v
	}
	if target.ID == ts.s.AgentID && target.Version == ts.s.AgentVersion {
		// A copy of the coordinator runs as the coordinator does, session
		// overrides included.
		var sd struct {
			Agent json.RawMessage `json:"agent"`
		}
		if json.Unmarshal(ts.s.Doc, &sd) == nil && len(sd.Agent) > 0 && string(sd.Agent) != "null" {
			doc["agent"] = sd.Agent
		}
	}
	first := newEvent(EventUserMessage, map[string]any{"content": textContent(in.Message)})
	first.ID = derivedID("sevt_", opID, "task")
	_, _, _, err = r.cfg.Store.CreateManagedSessionWith(ctx, store.NewManagedSession{
		Session: store.ManagedSession{ID: threadID, TenantID: ts.s.TenantID, AgentID: target.ID, AgentVersion: target.Version,
			EnvironmentID: ts.s.EnvironmentID, SandboxID: sbID, ThreadOf: w.id, Doc: mustJSON(doc)},
		Events: []store.NewEvent{first},
	})
	if err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return threadResult{}, fmt.Errorf("open thread %s: %w", threadID, err)
	}
	r.failpoint(FailAfterThreadOpen)
	r.Wake(threadID)
	created := newEvent(EventThreadCreated, map[string]any{"session_thread_id": threadID, "agent_name": target.Name, "workflow_run_id": nil})
	created.ID = derivedID("sevt_", opID, "created")
	sent := newEvent(EventThreadMessageSent, map[string]any{"to_session_thread_id": threadID, "to_agent_name": target.Name,
		"content": textContent(in.Message)})
	sent.ID = derivedID("sevt_", opID, "sent")
	if err := w.appendOnce(ctx, created, sent); err != nil {
		return threadResult{}, err
	}
	return threadResult{Text: fmt.Sprintf("Opened thread %s: agent %s is working on the message. "+
		"Its answer will arrive as a message from that thread; send follow-ups with send_to_thread.", threadID, target.Name)}, nil
}

// messageThread sends a follow-up to one of the session's threads.
func (w *worker) messageThread(ctx context.Context, ts *turnState, cl *call, opID string) (threadResult, error) {
	r := w.r
	var in struct {
		ThreadID string `json:"thread_id"`
		Message  string `json:"message"`
	}
	if err := json.Unmarshal(cl.input, &in); err != nil || in.ThreadID == "" || strings.TrimSpace(in.Message) == "" {
		return refusal("send_to_thread needs a string thread_id and a non-empty message.")
	}
	th, err := r.cfg.Store.GetManagedSession(ctx, in.ThreadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.ThreadOf != w.id) {
		return refusal("No thread %q in this session.", in.ThreadID)
	}
	if err != nil {
		return threadResult{}, err
	}
	if th.ArchivedAt != nil || th.TerminatedAt != nil {
		return refusal("Thread %s is archived and takes no messages.", in.ThreadID)
	}
	ev := newEvent(EventUserMessage, map[string]any{"content": textContent(in.Message)})
	ev.ID = derivedID("sevt_", opID, "task")
	if _, err := r.cfg.Events.Append(ctx, th.ID, []store.NewEvent{ev}); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return threadResult{}, fmt.Errorf("message thread %s: %w", th.ID, err)
	}
	r.Wake(th.ID)
	sent := newEvent(EventThreadMessageSent, map[string]any{"to_session_thread_id": th.ID, "to_agent_name": w.threadName(ctx, th),
		"content": textContent(in.Message)})
	sent.ID = derivedID("sevt_", opID, "sent")
	if err := w.appendOnce(ctx, sent); err != nil {
		return threadResult{}, err
	}
	return threadResult{Text: fmt.Sprintf("Sent to thread %s; its answer will arrive as a message from that thread.", th.ID)}, nil
}

// appendOnce appends events whose ids are derived: stored already (a
// resend after a crash) is success.
func (w *worker) appendOnce(ctx context.Context, evs ...store.NewEvent) error {
	out, err := w.r.cfg.Events.Append(context.WithoutCancel(ctx), w.id, evs)
	if errors.Is(err, store.ErrAlreadyExists) {
		return nil
	}
	if err != nil {
		return err
	}
	w.appended(ctx, out)
	return nil
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// agentName is the name an agent version's document gives it (its id when
// it has none): what a coordinator calls a roster agent, and what a
// thread's events name it by.
func agentName(a *store.Agent) string {
	var d struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(a.Doc, &d) == nil && d.Name != "" {
		return d.Name
	}
	return a.ID
}

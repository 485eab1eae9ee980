package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// The checks and folds below are shared by both engines so they accept and
// summarise exactly the same things.

// CheckAgentEvent validates the i-th event of a batch for sandboxID.
func CheckAgentEvent(sandboxID string, i int, ev NewAgentEvent) error {
	if !IsAgentEventType(ev.Type) {
		return fmt.Errorf("sandbox %s: event %d: unknown type %q (want one of %v or %v): %w",
			sandboxID, i, ev.Type, WorkEventTypes(), NonWorkEventTypes(), ErrInvalid)
	}
	if ev.Type == EventHeartbeat && !ev.HeartbeatStatus.Valid() {
		return fmt.Errorf("sandbox %s: event %d: %s needs a status of idle, running, degraded or failed, got %q: %w",
			sandboxID, i, EventHeartbeat, ev.HeartbeatStatus, ErrInvalid)
	}
	if ev.Type != EventHeartbeat && ev.HeartbeatStatus != "" {
		return fmt.Errorf("sandbox %s: event %d: %s carries no heartbeat status (got %q): %w",
			sandboxID, i, ev.Type, ev.HeartbeatStatus, ErrInvalid)
	}
	if len(bytes.TrimSpace(ev.Payload)) > 0 && !json.Valid(ev.Payload) {
		return fmt.Errorf("sandbox %s: event %d: payload is not valid JSON: %w", sandboxID, i, ErrInvalid)
	}
	return nil
}

// Apply folds one event (the next by Seq) into the summary. Engines call it
// inside the append's transaction; it is the definition of AgentActivity.
func (a *AgentActivity) Apply(ev AgentEvent) {
	at := ev.OccurredAt
	if a.EventCount == 0 {
		a.FirstEventAt = at
	}
	a.EventCount++
	a.LastEventAt, a.LastSeq = at, ev.Seq
	a.LastReceivedAt, a.UpdatedAt = ev.ReceivedAt, ev.ReceivedAt
	switch ev.Type {
	case EventHeartbeat:
		if a.FirstHeartbeatAt == nil {
			a.FirstHeartbeatAt = timeRef(at)
		}
		a.LastHeartbeatAt, a.LastHeartbeatStatus = timeRef(at), ev.HeartbeatStatus
		a.HeartbeatCount++
	case EventStarted:
		a.StartedAt = timeRef(at)
	case EventCompleted:
		a.LatestCompletedAt, a.LatestCompletedSeq = timeRef(at), ev.Seq
		a.CompletedCount++
	}
	if IsWorkEvent(ev.Type) {
		a.LastWorkEventAt, a.LastWorkEventSeq, a.LastWorkEventType = timeRef(at), ev.Seq, ev.Type
		a.WorkEventCount++
	}
}

func timeRef(t time.Time) *time.Time { return &t }

// CheckTask validates the fields a create writes and fills defaults (Kind
// agent, Status pending, Env and SandboxSpec {}).
func CheckTask(t *Task) error {
	if t.Kind == "" {
		t.Kind = TaskAgent
	}
	if !t.Kind.Valid() {
		return fmt.Errorf("task %s: kind %q: want agent or diagnostic: %w", t.ID, t.Kind, ErrInvalid)
	}
	if t.Status == "" {
		t.Status = TaskPending
	}
	if !t.Status.Valid() {
		return fmt.Errorf("task %s: status %q is not a task status: %w", t.ID, t.Status, ErrInvalid)
	}
	var argv []string
	if err := json.Unmarshal(t.Command, &argv); err != nil || len(argv) == 0 {
		return fmt.Errorf("task %s: command must be a non-empty JSON array of strings: %w", t.ID, ErrInvalid)
	}
	var err error
	if t.Env, err = objectOrEmpty("task "+t.ID+": env", t.Env); err != nil {
		return err
	}
	if t.SandboxSpec, err = objectOrEmpty("task "+t.ID+": sandbox spec", t.SandboxSpec); err != nil {
		return err
	}
	if len(bytes.TrimSpace(t.Result)) > 0 && !json.Valid(t.Result) {
		return fmt.Errorf("task %s: result is not valid JSON: %w", t.ID, ErrInvalid)
	}
	return nil
}

func objectOrEmpty(field string, raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s must be a JSON object: %w", field, ErrInvalid)
	}
	return raw, nil
}

// Check validates a TransitionTask call.
func (p TransitionTaskParams) Check() error {
	if p.ID == "" || len(p.From) == 0 {
		return fmt.Errorf("transition task %q: need an id and at least one From status: %w", p.ID, ErrInvalid)
	}
	for _, s := range append([]TaskStatus{p.To}, p.From...) {
		if !s.Valid() {
			return fmt.Errorf("transition task %s: %q is not a task status: %w", p.ID, s, ErrInvalid)
		}
	}
	if len(bytes.TrimSpace(p.Patch.Result)) > 0 && !json.Valid(p.Patch.Result) {
		return fmt.Errorf("transition task %s: result is not valid JSON: %w", p.ID, ErrInvalid)
	}
	return nil
}

// Check validates the rules: every cap must be set, so a misconfiguration
// can never mean "unlimited diagnostics".
func (r DiagnosticRules) Check() error {
	if r.MaxPerWorkflow <= 0 || r.MaxConsecutiveFailures <= 0 || r.Cooldown < 0 {
		return fmt.Errorf("diagnostic rules %+v: MaxPerWorkflow and MaxConsecutiveFailures must be > 0 and Cooldown >= 0: %w",
			r, ErrInvalid)
	}
	return nil
}

// Refusal says which safeguard refuses a spawn at now (in the order the
// seed checks them), or "" when none does. RetryAt is set for the cooldown.
// cloneReady is the clone_ready safeguard, read from the terminations in
// the claim's transaction (ClaimDiagnosticParams.CloneFrom).
func (s *DiagnosticState) Refusal(now time.Time, r DiagnosticRules, cloneReady bool) (DiagnosticRefusal, *time.Time) {
	switch {
	case s.HumanReview:
		return RefusedHumanReview, nil
	case s.PendingTaskID != "":
		return RefusedPending, nil
	case s.ConsecutiveFailures >= r.MaxConsecutiveFailures:
		return RefusedConsecutiveFailures, nil
	case s.Attempts >= r.MaxPerWorkflow:
		return RefusedMaxPerWorkflow, nil
	case !cloneReady:
		return RefusedCloneNotReady, nil
	case s.LastSpawnedAt != nil && now.Before(s.LastSpawnedAt.Add(r.Cooldown)):
		return RefusedCooldown, timeRef(s.LastSpawnedAt.Add(r.Cooldown))
	}
	return "", nil
}

package api

import (
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/store"
)

type eventJSON struct {
	Type       string          `json:"type"`
	Seq        int64           `json:"seq"`
	SandboxID  string          `json:"sandbox_id"`
	Status     string          `json:"status,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	ReceivedAt time.Time       `json:"received_at"`
}

func toEventJSON(ev store.AgentEvent) eventJSON {
	return eventJSON{Type: ev.Type, Seq: ev.Seq, SandboxID: ev.SandboxID, Status: string(ev.HeartbeatStatus),
		Data: ev.Payload, OccurredAt: ev.OccurredAt, ReceivedAt: ev.ReceivedAt}
}

type activityJSON struct {
	Type           string            `json:"type"`
	SandboxID      string            `json:"sandbox_id"`
	State          string            `json:"state"`
	Why            string            `json:"why"`
	IsAlive        bool              `json:"is_alive"`
	IsIdle         bool              `json:"is_idle"`
	IsStuckRunning bool              `json:"is_stuck_running"`
	HasCompleted   bool              `json:"has_completed"`
	Resumed        bool              `json:"resumed"`
	WillTerminate  bool              `json:"will_terminate"`
	Reason         string            `json:"reason,omitempty"`
	DurationMS     int64             `json:"duration_ms"`
	TaskID         string            `json:"task_id,omitempty"`
	Summary        *summaryJSON      `json:"summary,omitempty"`
	Termination    *terminateJSON    `json:"termination,omitempty"`
	Thresholds     map[string]string `json:"thresholds"`
	At             time.Time         `json:"at"`
}

type summaryJSON struct {
	FirstHeartbeatAt    *time.Time `json:"first_heartbeat_at,omitempty"`
	LastHeartbeatAt     *time.Time `json:"last_heartbeat_at,omitempty"`
	LastHeartbeatStatus string     `json:"last_heartbeat_status,omitempty"`
	LastWorkEventAt     *time.Time `json:"last_work_event_at,omitempty"`
	LastWorkEventType   string     `json:"last_work_event_type,omitempty"`
	LatestCompletedAt   *time.Time `json:"latest_completed_at,omitempty"`
	StartedAt           *time.Time `json:"started_at,omitempty"`
	EventCount          int64      `json:"event_count"`
	LastSeq             int64      `json:"last_seq"`
}

type terminateJSON struct {
	Reason       string     `json:"reason"`
	DurationMS   int64      `json:"duration_ms"`
	TaskID       string     `json:"task_id,omitempty"`
	TranscriptID string     `json:"transcript_id,omitempty"`
	StopError    string     `json:"stop_error,omitempty"`
	Node         string     `json:"node,omitempty"`
	At           time.Time  `json:"at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

func toActivityJSON(r *monitor.ActivityReport) activityJSON {
	d := r.Decision
	out := activityJSON{Type: "sandbox_activity", SandboxID: r.SandboxID, State: string(d.State), Why: d.Why,
		IsAlive: d.IsAlive, IsIdle: d.IsIdle, IsStuckRunning: d.IsStuckRunning, HasCompleted: d.HasCompleted,
		Resumed: d.Resumed, WillTerminate: d.Terminate, Reason: string(d.Reason), DurationMS: d.Duration.Milliseconds(), At: r.At,
		Thresholds: map[string]string{"idle": r.Thresholds.Idle.String(), "heartbeat": r.Thresholds.Heartbeat.String(),
			"stuck_running": r.Thresholds.StuckRunning.String(), "post_completion": r.Thresholds.PostCompletion.String()}}
	if r.Task != nil {
		out.TaskID = r.Task.ID
	}
	if a := r.Activity; a != nil {
		out.Summary = &summaryJSON{FirstHeartbeatAt: a.FirstHeartbeatAt, LastHeartbeatAt: a.LastHeartbeatAt,
			LastHeartbeatStatus: string(a.LastHeartbeatStatus), LastWorkEventAt: a.LastWorkEventAt, LastWorkEventType: a.LastWorkEventType,
			LatestCompletedAt: a.LatestCompletedAt, StartedAt: a.StartedAt, EventCount: a.EventCount, LastSeq: a.LastSeq}
	}
	if t := r.Termination; t != nil {
		out.Termination = toTerminationJSON(t)
	}
	return out
}

func toTerminationJSON(t *store.Termination) *terminateJSON {
	return &terminateJSON{Reason: string(t.Reason), DurationMS: t.Duration.Milliseconds(), TaskID: t.TaskID,
		TranscriptID: t.TranscriptID, StopError: t.StopError, Node: t.Node, At: t.At, FinishedAt: t.FinishedAt}
}

type taskJSON struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	TicketID       string            `json:"ticket_id,omitempty"`
	Kind           string            `json:"kind"`
	Status         string            `json:"status"`
	FailureReason  string            `json:"failure_reason,omitempty"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env"`
	Sandbox        json.RawMessage   `json:"sandbox"`
	SandboxID      string            `json:"sandbox_id,omitempty"`
	ProcessID      string            `json:"process_id,omitempty"`
	TranscriptPath string            `json:"transcript_path,omitempty"`
	DiagnosticOf   string            `json:"diagnostic_of,omitempty"`
	Result         json.RawMessage   `json:"result,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	StartedAt      *time.Time        `json:"started_at,omitempty"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
}

func toTaskJSON(t *store.Task) taskJSON {
	out := taskJSON{ID: t.ID, Type: "task", TicketID: t.TicketID, Kind: string(t.Kind), Status: string(t.Status),
		FailureReason: t.FailureReason, Sandbox: t.SandboxSpec, SandboxID: t.SandboxID, ProcessID: t.ProcessID,
		TranscriptPath: t.TranscriptPath, DiagnosticOf: t.DiagnosticOf, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		StartedAt: t.StartedAt, FinishedAt: t.FinishedAt, Env: map[string]string{}}
	_ = json.Unmarshal(t.Command, &out.Command)
	_ = json.Unmarshal(t.Env, &out.Env)
	if len(t.Result) > 0 {
		out.Result = t.Result
	}
	return out
}

type ticketJSON struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Title       string            `json:"title"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata"`
	Status      string            `json:"status"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	// GET /v1/tickets/{id} only.
	Tasks       []taskJSON      `json:"tasks,omitempty"`
	Diagnostics *diagnosticJSON `json:"diagnostics,omitempty"`
	Result      *resultJSON     `json:"result,omitempty"`
}

func toTicketJSON(t *store.Ticket) ticketJSON {
	md := t.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return ticketJSON{ID: t.ID, Type: "ticket", Title: t.Title, Description: t.Description, Metadata: md,
		Status: string(t.Status), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

type diagnosticJSON struct {
	Attempts            int64      `json:"attempts"`
	ConsecutiveFailures int64      `json:"consecutive_failures"`
	Completed           int64      `json:"completed"`
	PendingTaskID       string     `json:"pending_task_id,omitempty"`
	LastSpawnedAt       *time.Time `json:"last_spawned_at,omitempty"`
	HumanReview         bool       `json:"human_review"`
	HumanReviewReason   string     `json:"human_review_reason,omitempty"`
}

func toDiagnosticJSON(d *store.DiagnosticState) *diagnosticJSON {
	return &diagnosticJSON{Attempts: d.Attempts, ConsecutiveFailures: d.ConsecutiveFailures, Completed: d.Completed,
		PendingTaskID: d.PendingTaskID, LastSpawnedAt: d.LastSpawnedAt, HumanReview: d.HumanReview, HumanReviewReason: d.HumanReviewReason}
}

type resultJSON struct {
	Type             string          `json:"type"`
	TicketID         string          `json:"ticket_id"`
	TaskID           string          `json:"task_id,omitempty"`
	Result           json.RawMessage `json:"result"`
	ValidationStatus string          `json:"validation_status"`
	ValidationNote   string          `json:"validation_note,omitempty"`
	Version          int64           `json:"version"`
	SubmittedAt      time.Time       `json:"submitted_at"`
}

func toResultJSON(r *store.WorkflowResult) *resultJSON {
	return &resultJSON{Type: "workflow_result", TicketID: r.TicketID, TaskID: r.TaskID, Result: r.Result,
		ValidationStatus: string(r.ValidationStatus), ValidationNote: r.ValidationNote, Version: r.Version, SubmittedAt: r.SubmittedAt}
}

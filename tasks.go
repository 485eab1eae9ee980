package agentkernel

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Task runs an agent command in its own sandbox, watched by the monitor:
// idle, stuck or dead agents are reaped with their transcript saved.
type Task struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	TicketID       string            `json:"ticket_id,omitempty"`
	Kind           string            `json:"kind"`   // agent or diagnostic
	Status         string            `json:"status"` // pending, claiming, assigned, running, completed, failed, cancelled
	FailureReason  string            `json:"failure_reason,omitempty"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env"`
	Sandbox        json.RawMessage   `json:"sandbox"`
	SandboxID      string            `json:"sandbox_id,omitempty"`
	ProcessID      string            `json:"process_id,omitempty"`
	TranscriptPath string            `json:"transcript_path,omitempty"`
	DiagnosticOf   string            `json:"diagnostic_of,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	StartedAt      *time.Time        `json:"started_at,omitempty"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
}

// TaskSandbox is the sandbox a task runs in; empty fields take the
// daemon's [sandbox] defaults.
type TaskSandbox struct {
	Driver  string         `json:"driver,omitempty"`
	Image   string         `json:"image,omitempty"`
	Network string         `json:"network,omitempty"`
	Limits  *SandboxLimits `json:"limits,omitempty"`
}

// TaskCreateParams creates a task. Command is the agent's argv; inside the
// sandbox `agentkernel-agent heartbeat|event …` reports to the monitor.
type TaskCreateParams struct {
	TicketID       string            `json:"ticket_id,omitempty"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	Sandbox        *TaskSandbox      `json:"sandbox,omitempty"`
	TranscriptPath string            `json:"transcript_path,omitempty"`
}

// TaskListParams filters a listing.
type TaskListParams struct {
	TicketID string
	Status   string
	Kind     string
}

// TaskOutput is a chunk of a running agent's output.
type TaskOutput struct {
	Data       []byte `json:"data"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Size       int64  `json:"size"`
	EOF        bool   `json:"eof"`
}

// Transcript is an agent's transcript, saved before its sandbox stopped.
type Transcript struct {
	ID        string    `json:"id"`
	TaskID    string    `json:"task_id"`
	SandboxID string    `json:"sandbox_id"`
	Source    string    `json:"source"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	SavedAt   time.Time `json:"saved_at"`
	Content   string    `json:"content"`
}

// AgentEvent is an agent event as stored (GET /v1/sandboxes/{id}/events).
type AgentEvent struct {
	Type       string          `json:"type"`
	Seq        int64           `json:"seq,omitempty"`
	SandboxID  string          `json:"sandbox_id,omitempty"`
	Status     string          `json:"status,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	OccurredAt time.Time       `json:"occurred_at,omitzero"`
	ReceivedAt time.Time       `json:"received_at,omitzero"`
}

// AgentEventInput is an event to report (POST /v1/sandboxes/{id}/events).
// At is optional (default: when the daemon receives it) and may not be in
// the future beyond the daemon's monitor.event_skew.
type AgentEventInput struct {
	Type   string          `json:"type"`
	Status string          `json:"status,omitempty"` // agent.heartbeat only: idle, running, degraded, failed
	Data   json.RawMessage `json:"data,omitempty"`
	At     *time.Time      `json:"at,omitempty"`
}

// Activity is a sandbox's monitored state and why.
type Activity struct {
	SandboxID      string            `json:"sandbox_id"`
	State          string            `json:"state"` // CREATED, RUNNING, COMPLETED, RESUMED, IDLE, DEAD, TERMINATED
	Why            string            `json:"why"`
	IsAlive        bool              `json:"is_alive"`
	IsIdle         bool              `json:"is_idle"`
	IsStuckRunning bool              `json:"is_stuck_running"`
	HasCompleted   bool              `json:"has_completed"`
	WillTerminate  bool              `json:"will_terminate"`
	Reason         string            `json:"reason,omitempty"`
	DurationMS     int64             `json:"duration_ms"`
	TaskID         string            `json:"task_id,omitempty"`
	Thresholds     map[string]string `json:"thresholds"`
	Summary        json.RawMessage   `json:"summary,omitempty"`
	Termination    json.RawMessage   `json:"termination,omitempty"`
}

// TasksService runs agent tasks.
type TasksService struct{ c *Client }

// Tasks returns the tasks service.
func (c *Client) Tasks() *TasksService { return &TasksService{c: c} }

func taskPath(id string, rest ...string) string {
	p := "/v1/tasks/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Create records a task and starts it in a new sandbox.
func (s *TasksService) Create(ctx context.Context, p TaskCreateParams) (*Task, error) {
	var out Task
	return &out, s.c.do(ctx, http.MethodPost, "/v1/tasks", p, &out)
}

// Get returns one task.
func (s *TasksService) Get(ctx context.Context, id string) (*Task, error) {
	var out Task
	return &out, s.c.do(ctx, http.MethodGet, taskPath(id), nil, &out)
}

// List returns the caller's tasks.
func (s *TasksService) List(ctx context.Context, p TaskListParams) ([]Task, error) {
	q := url.Values{}
	for k, v := range map[string]string{"ticket_id": p.TicketID, "status": p.Status, "kind": p.Kind} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/v1/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Data []Task `json:"data"`
	}
	return out.Data, s.c.do(ctx, http.MethodGet, path, nil, &out)
}

// Logs reads the running agent's output (stream "stdout" or "stderr").
func (s *TasksService) Logs(ctx context.Context, id, stream string, offset int64) (*TaskOutput, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	if stream != "" {
		q.Set("stream", stream)
	}
	var out TaskOutput
	return &out, s.c.do(ctx, http.MethodGet, taskPath(id, "logs")+"?"+q.Encode(), nil, &out)
}

// Transcript returns the transcript saved when the task's sandbox stopped.
func (s *TasksService) Transcript(ctx context.Context, id string) (*Transcript, error) {
	var out Transcript
	return &out, s.c.do(ctx, http.MethodGet, taskPath(id, "transcript"), nil, &out)
}

// PostEvents reports agent events for a sandbox from outside it.
func (s *SandboxesService) PostEvents(ctx context.Context, sandboxID string, evs ...AgentEventInput) ([]AgentEvent, error) {
	var out struct {
		Data []AgentEvent `json:"data"`
	}
	return out.Data, s.c.do(ctx, http.MethodPost, sbPath(sandboxID, "events"), map[string]any{"events": evs}, &out)
}

// Activity returns the monitor's view of a sandbox.
func (s *SandboxesService) Activity(ctx context.Context, sandboxID string) (*Activity, error) {
	var out Activity
	return &out, s.c.do(ctx, http.MethodGet, sbPath(sandboxID, "activity"), nil, &out)
}

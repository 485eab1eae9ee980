package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// This file maps the monitor's rows (migration 0006) to store types.

const ticketCols = `id, tenant_id, title, description, metadata, status, version, created_at, updated_at`

func scanTicket(row pgx.Row) (*store.Ticket, error) {
	var (
		t        store.Ticket
		metadata []byte
	)
	if err := row.Scan(&t.ID, &t.TenantID, &t.Title, &t.Description, &metadata, &t.Status, &t.Version,
		&t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	var err error
	if t.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

const taskCols = `id, tenant_id, ticket_id, kind, command, env, sandbox_spec, sandbox_id, process_id,
	transcript_path, status, failure_reason, result, diagnostic_of, version, created_at, updated_at,
	started_at, finished_at`

func scanTask(row pgx.Row) (*store.Task, error) {
	var (
		t                          store.Task
		command, env, spec, result []byte
	)
	if err := row.Scan(&t.ID, &t.TenantID, &t.TicketID, &t.Kind, &command, &env, &spec, &t.SandboxID,
		&t.ProcessID, &t.TranscriptPath, &t.Status, &t.FailureReason, &result, &t.DiagnosticOf,
		&t.Version, &t.CreatedAt, &t.UpdatedAt, &t.StartedAt, &t.FinishedAt); err != nil {
		return nil, err
	}
	t.Command, t.Env, t.SandboxSpec, t.Result = command, env, spec, rawOrNil(result)
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	t.StartedAt, t.FinishedAt = utcPtr(t.StartedAt), utcPtr(t.FinishedAt)
	return &t, nil
}

const agentEventCols = `sandbox_id, seq, type, heartbeat_status, payload, occurred_at, received_at`

func scanAgentEvent(row pgx.Row) (store.AgentEvent, error) {
	var (
		ev      store.AgentEvent
		payload []byte
	)
	if err := row.Scan(&ev.SandboxID, &ev.Seq, &ev.Type, &ev.HeartbeatStatus, &payload, &ev.OccurredAt, &ev.ReceivedAt); err != nil {
		return ev, err
	}
	ev.Payload = rawOrNil(payload)
	ev.OccurredAt, ev.ReceivedAt = ev.OccurredAt.UTC(), ev.ReceivedAt.UTC()
	return ev, nil
}

const activityCols = `sandbox_id, first_event_at, last_event_at, last_received_at, last_seq, started_at,
	first_heartbeat_at, last_heartbeat_at, last_heartbeat_status, last_work_event_at, last_work_event_seq,
	last_work_event_type, latest_completed_at, latest_completed_seq, event_count, heartbeat_count,
	work_event_count, completed_count, terminated_at, updated_at`

func scanActivity(row pgx.Row) (*store.AgentActivity, error) {
	var a store.AgentActivity
	if err := row.Scan(&a.SandboxID, &a.FirstEventAt, &a.LastEventAt, &a.LastReceivedAt, &a.LastSeq, &a.StartedAt,
		&a.FirstHeartbeatAt, &a.LastHeartbeatAt, &a.LastHeartbeatStatus, &a.LastWorkEventAt, &a.LastWorkEventSeq,
		&a.LastWorkEventType, &a.LatestCompletedAt, &a.LatestCompletedSeq, &a.EventCount, &a.HeartbeatCount,
		&a.WorkEventCount, &a.CompletedCount, &a.TerminatedAt, &a.UpdatedAt); err != nil {
		return nil, err
	}
	a.FirstEventAt, a.LastEventAt, a.LastReceivedAt = a.FirstEventAt.UTC(), a.LastEventAt.UTC(), a.LastReceivedAt.UTC()
	a.StartedAt, a.FirstHeartbeatAt, a.LastHeartbeatAt = utcPtr(a.StartedAt), utcPtr(a.FirstHeartbeatAt), utcPtr(a.LastHeartbeatAt)
	a.LastWorkEventAt, a.LatestCompletedAt = utcPtr(a.LastWorkEventAt), utcPtr(a.LatestCompletedAt)
	a.TerminatedAt, a.UpdatedAt = utcPtr(a.TerminatedAt), a.UpdatedAt.UTC()
	return &a, nil
}

const transcriptCols = `id, task_id, sandbox_id, source, content, blob_key, size, sha256, saved_at`

func scanTranscript(row pgx.Row) (*store.Transcript, error) {
	var t store.Transcript
	if err := row.Scan(&t.ID, &t.TaskID, &t.SandboxID, &t.Source, &t.Content, &t.BlobKey, &t.Size,
		&t.SHA256, &t.SavedAt); err != nil {
		return nil, err
	}
	t.SavedAt = t.SavedAt.UTC()
	return &t, nil
}

const terminationCols = `sandbox_id, task_id, tenant_id, reason, duration_us, transcript_id, node,
	stop_error, at, finished_at, completed`

func scanTermination(row pgx.Row) (*store.Termination, error) {
	var (
		t          store.Termination
		durationUS int64
	)
	if err := row.Scan(&t.SandboxID, &t.TaskID, &t.TenantID, &t.Reason, &durationUS, &t.TranscriptID,
		&t.Node, &t.StopError, &t.At, &t.FinishedAt, &t.Completed); err != nil {
		return nil, err
	}
	t.Duration = time.Duration(durationUS) * time.Microsecond
	t.At, t.FinishedAt = t.At.UTC(), utcPtr(t.FinishedAt)
	return &t, nil
}

const diagnosticCols = `ticket_id, attempts, consecutive_failures, completed, last_spawned_at,
	pending_task_id, human_review, human_review_reason, human_review_at, version, updated_at`

func scanDiagnostic(row pgx.Row) (*store.DiagnosticState, error) {
	var d store.DiagnosticState
	if err := row.Scan(&d.TicketID, &d.Attempts, &d.ConsecutiveFailures, &d.Completed, &d.LastSpawnedAt,
		&d.PendingTaskID, &d.HumanReview, &d.HumanReviewReason, &d.HumanReviewAt, &d.Version, &d.UpdatedAt); err != nil {
		return nil, err
	}
	d.LastSpawnedAt, d.HumanReviewAt, d.UpdatedAt = utcPtr(d.LastSpawnedAt), utcPtr(d.HumanReviewAt), d.UpdatedAt.UTC()
	return &d, nil
}

const resultCols = `ticket_id, task_id, result, validation_status, validation_note, version,
	submitted_at, updated_at`

func scanWorkflowResult(row pgx.Row) (*store.WorkflowResult, error) {
	var (
		w      store.WorkflowResult
		result []byte
	)
	if err := row.Scan(&w.TicketID, &w.TaskID, &result, &w.ValidationStatus, &w.ValidationNote, &w.Version,
		&w.SubmittedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	w.Result = rawOrNil(result)
	w.SubmittedAt, w.UpdatedAt = w.SubmittedAt.UTC(), w.UpdatedAt.UTC()
	return &w, nil
}

// statusArgs renders a status filter as a text[] argument (nil = none).
func statusArgs[T ~string](vals []T) []string {
	if len(vals) == 0 {
		return nil
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

// orNow returns t truncated to microseconds, or now when t is zero.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t.UTC().Truncate(time.Microsecond)
}

// limitArg maps a non-positive limit to NULL (LIMIT NULL is no limit).
func limitArg(limit int) *int {
	if limit <= 0 {
		return nil
	}
	return &limit
}

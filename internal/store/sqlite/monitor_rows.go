package sqlite

import (
	"database/sql"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// This file maps the monitor's rows (migration 0006) to store types.

const ticketCols = `id, tenant_id, title, description, metadata, status, version, created_at, updated_at`

func scanTicket(r scanner) (*store.Ticket, error) {
	var (
		t                store.Ticket
		metadata         sql.NullString
		created, updated int64
	)
	if err := r.Scan(&t.ID, &t.TenantID, &t.Title, &t.Description, &metadata, &t.Status, &t.Version,
		&created, &updated); err != nil {
		return nil, err
	}
	var err error
	if t.Metadata, err = decodeMap(metadata); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &t, nil
}

const taskCols = `id, tenant_id, ticket_id, kind, command, env, sandbox_spec, sandbox_id, process_id,
	transcript_path, status, failure_reason, result, diagnostic_of, version, created_at, updated_at,
	started_at, finished_at`

func scanTask(r scanner) (*store.Task, error) {
	var (
		t                  store.Task
		command, env, spec string
		result             sql.NullString
		created, updated   int64
		started, finished  sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.TenantID, &t.TicketID, &t.Kind, &command, &env, &spec, &t.SandboxID,
		&t.ProcessID, &t.TranscriptPath, &t.Status, &t.FailureReason, &result, &t.DiagnosticOf,
		&t.Version, &created, &updated, &started, &finished); err != nil {
		return nil, err
	}
	t.Command, t.Env, t.SandboxSpec = []byte(command), []byte(env), []byte(spec)
	t.Result = rawOrNil(result)
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	t.StartedAt, t.FinishedAt = timePtr(started), timePtr(finished)
	return &t, nil
}

const agentEventCols = `sandbox_id, seq, type, heartbeat_status, payload, occurred_at, received_at`

func scanAgentEvent(r scanner) (store.AgentEvent, error) {
	var (
		ev                 store.AgentEvent
		payload            sql.NullString
		occurred, received int64
	)
	if err := r.Scan(&ev.SandboxID, &ev.Seq, &ev.Type, &ev.HeartbeatStatus, &payload, &occurred, &received); err != nil {
		return ev, err
	}
	ev.Payload = rawOrNil(payload)
	ev.OccurredAt, ev.ReceivedAt = fromMicros(occurred), fromMicros(received)
	return ev, nil
}

const activityCols = `sandbox_id, first_event_at, last_event_at, last_received_at, last_seq, started_at,
	first_heartbeat_at, last_heartbeat_at, last_heartbeat_status, last_work_event_at, last_work_event_seq,
	last_work_event_type, latest_completed_at, latest_completed_seq, event_count, heartbeat_count,
	work_event_count, completed_count, terminated_at, updated_at`

func scanActivity(r scanner) (*store.AgentActivity, error) {
	var (
		a                                         store.AgentActivity
		first, last, received, updated            int64
		started, firstHB, lastHB, work, completed sql.NullInt64
		terminated                                sql.NullInt64
	)
	if err := r.Scan(&a.SandboxID, &first, &last, &received, &a.LastSeq, &started,
		&firstHB, &lastHB, &a.LastHeartbeatStatus, &work, &a.LastWorkEventSeq,
		&a.LastWorkEventType, &completed, &a.LatestCompletedSeq, &a.EventCount, &a.HeartbeatCount,
		&a.WorkEventCount, &a.CompletedCount, &terminated, &updated); err != nil {
		return nil, err
	}
	a.FirstEventAt, a.LastEventAt, a.LastReceivedAt = fromMicros(first), fromMicros(last), fromMicros(received)
	a.StartedAt, a.FirstHeartbeatAt, a.LastHeartbeatAt = timePtr(started), timePtr(firstHB), timePtr(lastHB)
	a.LastWorkEventAt, a.LatestCompletedAt = timePtr(work), timePtr(completed)
	a.TerminatedAt, a.UpdatedAt = timePtr(terminated), fromMicros(updated)
	return &a, nil
}

// activityArgs are a summary's columns in activityCols order.
func activityArgs(a *store.AgentActivity) []any {
	return []any{a.SandboxID, micros(a.FirstEventAt), micros(a.LastEventAt), micros(a.LastReceivedAt),
		a.LastSeq, nullMicros(a.StartedAt), nullMicros(a.FirstHeartbeatAt), nullMicros(a.LastHeartbeatAt),
		a.LastHeartbeatStatus, nullMicros(a.LastWorkEventAt), a.LastWorkEventSeq, a.LastWorkEventType,
		nullMicros(a.LatestCompletedAt), a.LatestCompletedSeq, a.EventCount, a.HeartbeatCount,
		a.WorkEventCount, a.CompletedCount, nullMicros(a.TerminatedAt), micros(a.UpdatedAt)}
}

const transcriptCols = `id, task_id, sandbox_id, source, content, blob_key, size, sha256, saved_at`

func scanTranscript(r scanner) (*store.Transcript, error) {
	var (
		t     store.Transcript
		saved int64
	)
	if err := r.Scan(&t.ID, &t.TaskID, &t.SandboxID, &t.Source, &t.Content, &t.BlobKey, &t.Size,
		&t.SHA256, &saved); err != nil {
		return nil, err
	}
	t.SavedAt = fromMicros(saved)
	return &t, nil
}

const terminationCols = `sandbox_id, task_id, tenant_id, reason, duration_us, transcript_id, node,
	stop_error, at, finished_at, completed`

func scanTermination(r scanner) (*store.Termination, error) {
	var (
		t          store.Termination
		durationUS int64
		at         int64
		finished   sql.NullInt64
	)
	if err := r.Scan(&t.SandboxID, &t.TaskID, &t.TenantID, &t.Reason, &durationUS, &t.TranscriptID,
		&t.Node, &t.StopError, &at, &finished, &t.Completed); err != nil {
		return nil, err
	}
	t.Duration = time.Duration(durationUS) * time.Microsecond
	t.At, t.FinishedAt = fromMicros(at), timePtr(finished)
	return &t, nil
}

const diagnosticCols = `ticket_id, attempts, consecutive_failures, completed, last_spawned_at,
	pending_task_id, human_review, human_review_reason, human_review_at, version, updated_at`

func scanDiagnostic(r scanner) (*store.DiagnosticState, error) {
	var (
		d                 store.DiagnosticState
		spawned, reviewAt sql.NullInt64
		updated           int64
	)
	if err := r.Scan(&d.TicketID, &d.Attempts, &d.ConsecutiveFailures, &d.Completed, &spawned,
		&d.PendingTaskID, &d.HumanReview, &d.HumanReviewReason, &reviewAt, &d.Version, &updated); err != nil {
		return nil, err
	}
	d.LastSpawnedAt, d.HumanReviewAt, d.UpdatedAt = timePtr(spawned), timePtr(reviewAt), fromMicros(updated)
	return &d, nil
}

const resultCols = `ticket_id, task_id, result, validation_status, validation_note, version,
	submitted_at, updated_at`

func scanWorkflowResult(r scanner) (*store.WorkflowResult, error) {
	var (
		w                  store.WorkflowResult
		result             sql.NullString
		submitted, updated int64
	)
	if err := r.Scan(&w.TicketID, &w.TaskID, &result, &w.ValidationStatus, &w.ValidationNote, &w.Version,
		&submitted, &updated); err != nil {
		return nil, err
	}
	w.Result = rawOrNil(result)
	w.SubmittedAt, w.UpdatedAt = fromMicros(submitted), fromMicros(updated)
	return &w, nil
}

// inList renders "(?, ?, …)" for n placeholders (n > 0) and its arguments.
func inList[T ~string](vals []T) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = string(v)
	}
	return "(?" + strings.Repeat(", ?", len(vals)-1) + ")", args
}

// orNow returns t truncated to microseconds, or now when t is zero.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t.UTC().Truncate(time.Microsecond)
}

// noLimit maps a non-positive limit to SQLite's "no limit".
func noLimit(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

package store

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"
)

// This file holds webhook endpoints and their durable outbox (issue 14).
// A delivery row is written in the SAME transaction as the event or write
// it announces, so an event that is stored is always delivered (at least
// once) and one that rolled back never is.

// WebhookEndpoint is a tenant's registered receiver.
type WebhookEndpoint struct {
	ID          string // "whep_…", generated when empty
	TenantID    string
	URL         string
	Description string
	// EventTypes are the webhook event types (WebhookEventTypes) it receives.
	EventTypes []string
	// Secret is the signing key, "whsec_" + base64 (Standard Webhooks).
	Secret    string
	CreatedAt time.Time
}

// Delivery states. A pending delivery is due at NextAttemptAt; delivered
// and dead are final until a redelivery makes the row pending again.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryDead      = "dead"
)

// WebhookDelivery is one outbox row: one event for one endpoint.
type WebhookDelivery struct {
	ID         string // "whd_…"
	Seq        int64  // outbox order (per order key it is the event order)
	EndpointID string
	TenantID   string
	// EventID is the event's id ("whe_…"): the payload's id and the
	// webhook-id header, the same on every attempt (receivers dedupe by it).
	EventID   string
	EventType string
	// OrderKey is the resource whose deliveries go out in order (the
	// session id for session events).
	OrderKey      string
	Payload       json.RawMessage
	Status        string
	Attempts      int64
	NextAttemptAt time.Time
	LastError     string
	LastStatus    int64 // HTTP status of the last attempt (0: none)
	CreatedAt     time.Time
	UpdatedAt     time.Time
	DeliveredAt   *time.Time
}

// ClaimWebhookParams takes due deliveries for attempts.
type ClaimWebhookParams struct {
	Now time.Time
	// Lease: a claimed delivery is not due again before Now+Lease (another
	// claimer skips it; after a crash it is retried when the lease ends).
	Lease time.Duration
	Limit int
}

// WebhookAttempt records how one attempt ended.
type WebhookAttempt struct {
	ID        string
	Delivered bool
	// Dead: give up (the attempts are exhausted); else pending again,
	// due at NextAttemptAt.
	Dead          bool
	NextAttemptAt time.Time
	Error         string
	Status        int64
	At            time.Time
	// Claimed, when set, is the lease the attempt's claim set (the claimed
	// delivery's NextAttemptAt): the outcome is recorded only if the
	// delivery still holds it. A redelivery made while the attempt ran
	// moved it, and stands (ErrConflict, nothing written).
	Claimed time.Time
}

// ListWebhookDeliveriesParams pages an endpoint's deliveries by Seq.
type ListWebhookDeliveriesParams struct {
	EndpointID string
	AfterSeq   int64
	Limit      int
	Status     string // "" = any
}

// WebhookStore holds endpoints and the outbox. Tenancy is the caller's
// check (rows carry TenantID), as for the other Managed Agents resources.
type WebhookStore interface {
	CreateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) (*WebhookEndpoint, error)
	GetWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error)
	ListWebhookEndpoints(ctx context.Context, tenantID string) ([]*WebhookEndpoint, error)
	// DeleteWebhookEndpoint deletes the endpoint and its deliveries.
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	GetWebhookDelivery(ctx context.Context, id string) (*WebhookDelivery, error)
	ListWebhookDeliveries(ctx context.Context, p ListWebhookDeliveriesParams) ([]*WebhookDelivery, error)
	// ClaimWebhookDeliveries returns due pending deliveries, oldest first,
	// each the oldest pending one of its endpoint and order key (so one
	// session's deliveries are attempted one at a time, in order), and
	// leases them.
	ClaimWebhookDeliveries(ctx context.Context, p ClaimWebhookParams) ([]*WebhookDelivery, error)
	// FinishWebhookAttempt counts the attempt and records its outcome
	// (ErrConflict when a.Claimed is set and a redelivery superseded it).
	FinishWebhookAttempt(ctx context.Context, a WebhookAttempt) (*WebhookDelivery, error)
	// RedeliverWebhookDelivery makes a delivery pending and due at now with
	// its attempts reset, whatever its state.
	RedeliverWebhookDelivery(ctx context.Context, id string, now time.Time) (*WebhookDelivery, error)
	// PruneWebhookDeliveries deletes up to limit final deliveries
	// (delivered or dead) whose last attempt ended before before, oldest
	// first, and returns how many it deleted. Pending ones always stay.
	PruneWebhookDeliveries(ctx context.Context, before time.Time, limit int) (int64, error)
	// SetWebhookNotify registers fn, called after each commit that wrote
	// outbox rows (an in-process wake-up for the delivery loop).
	SetWebhookNotify(fn func())
}

// Webhook event types agentkernel writes to the outbox in the transaction
// of the write they announce. Other types of the SDK's list are refused
// at registration.
const (
	WebhookSessionCreated           = "session.created"
	WebhookSessionStatusRunStarted  = "session.status_run_started"
	WebhookSessionStatusIdled       = "session.status_idled"
	WebhookSessionStatusRescheduled = "session.status_rescheduled"
	WebhookSessionStatusTerminated  = "session.status_terminated"
	WebhookSessionOutcomeEvaluated  = "session.outcome_evaluation_ended"
	WebhookSessionArchived          = "session.archived"
	WebhookSessionDeleted           = "session.deleted"
	WebhookAgentCreated             = "agent.created"
	WebhookAgentUpdated             = "agent.updated"
	WebhookAgentArchived            = "agent.archived"
	WebhookEnvironmentCreated       = "environment.created"
	WebhookEnvironmentUpdated       = "environment.updated"
	WebhookEnvironmentArchived      = "environment.archived"
	WebhookEnvironmentDeleted       = "environment.deleted"
	WebhookDeploymentCreated        = "deployment.created"
	WebhookDeploymentUpdated        = "deployment.updated"
	WebhookDeploymentPaused         = "deployment.paused"
	WebhookDeploymentUnpaused       = "deployment.unpaused"
	WebhookDeploymentArchived       = "deployment.archived"
	WebhookDeploymentRunStarted     = "deployment_run.started"
	WebhookDeploymentRunSucceeded   = "deployment_run.succeeded"
	WebhookDeploymentRunFailed      = "deployment_run.failed"
	// The session's primary thread opened a thread, or one of its threads
	// went idle or terminated (multi-agent): data.id is the session,
	// data.session_thread_id the thread.
	WebhookSessionThreadCreated    = "session.thread_created"
	WebhookSessionThreadIdled      = "session.thread_idled"
	WebhookSessionThreadTerminated = "session.thread_terminated"
	// A client updated the session (POST /v1/sessions/{id}).
	WebhookSessionUpdated = "session.updated"
	WebhookVaultCreated   = "vault.created"
	WebhookVaultArchived  = "vault.archived"
	WebhookVaultDeleted   = "vault.deleted"
	// Credential payloads carry data.vault_id; a vault's archive and delete
	// announce each credential they archive or delete first.
	WebhookVaultCredentialCreated  = "vault_credential.created"
	WebhookVaultCredentialArchived = "vault_credential.archived"
	WebhookVaultCredentialDeleted  = "vault_credential.deleted"
	// A refresh of an OAuth credential's access token failed (the token
	// endpoint refused it or could not be reached).
	WebhookVaultCredentialRefreshFailed = "vault_credential.refresh_failed"
	WebhookMemoryStoreCreated           = "memory_store.created"
	WebhookMemoryStoreArchived          = "memory_store.archived"
	WebhookMemoryStoreDeleted           = "memory_store.deleted"
)

// WebhookEventTypes is every type an endpoint may subscribe to.
var WebhookEventTypes = []string{
	WebhookSessionCreated, WebhookSessionStatusRunStarted, WebhookSessionStatusIdled,
	WebhookSessionStatusRescheduled, WebhookSessionStatusTerminated, WebhookSessionArchived, WebhookSessionDeleted,
	WebhookSessionOutcomeEvaluated,
	WebhookAgentCreated, WebhookAgentUpdated, WebhookAgentArchived,
	WebhookEnvironmentCreated, WebhookEnvironmentUpdated, WebhookEnvironmentArchived, WebhookEnvironmentDeleted,
	WebhookDeploymentCreated, WebhookDeploymentUpdated, WebhookDeploymentPaused, WebhookDeploymentUnpaused,
	WebhookDeploymentArchived, WebhookDeploymentRunStarted, WebhookDeploymentRunSucceeded, WebhookDeploymentRunFailed,
	WebhookSessionThreadCreated, WebhookSessionThreadIdled, WebhookSessionThreadTerminated, WebhookSessionUpdated,
	WebhookVaultCreated, WebhookVaultArchived, WebhookVaultDeleted,
	WebhookVaultCredentialCreated, WebhookVaultCredentialArchived, WebhookVaultCredentialDeleted,
	WebhookVaultCredentialRefreshFailed,
	WebhookMemoryStoreCreated, WebhookMemoryStoreArchived, WebhookMemoryStoreDeleted,
}

// DeploymentChangeWebhook is the webhook type announcing a deployment's
// write from old to new: archiving, pausing (by a user or after a failed
// run) and unpausing have their own types; any other write is an update.
func DeploymentChangeWebhook(old, new *Deployment) string {
	switch {
	case old.ArchivedAt == nil && new.ArchivedAt != nil:
		return WebhookDeploymentArchived
	case old.PausedReason == nil && new.PausedReason != nil:
		return WebhookDeploymentPaused
	case old.PausedReason != nil && new.PausedReason == nil:
		return WebhookDeploymentUnpaused
	}
	return WebhookDeploymentUpdated
}

// DeploymentRunWebhook is the type announcing how a run's start ended: its
// session was created, or its creation failed.
func DeploymentRunWebhook(failed bool) string {
	if failed {
		return WebhookDeploymentRunFailed
	}
	return WebhookDeploymentRunSucceeded
}

// sessionEventWebhooks maps the session events the runtime appends to the
// webhook types that announce them.
var sessionEventWebhooks = map[string]string{
	"session.status_running":     WebhookSessionStatusRunStarted,
	"session.status_idle":        WebhookSessionStatusIdled,
	"session.status_rescheduled": WebhookSessionStatusRescheduled,
	"session.status_terminated":  WebhookSessionStatusTerminated,
	// An outcome's evaluation ended (its verdict is in the session's
	// outcome_evaluations).
	"span.outcome_evaluation_end": WebhookSessionOutcomeEvaluated,
	// The primary thread's log records its threads' lives.
	"session.thread_created":           WebhookSessionThreadCreated,
	"session.thread_status_idle":       WebhookSessionThreadIdled,
	"session.thread_status_terminated": WebhookSessionThreadTerminated,
}

// WebhookOfEvent is the webhook type a session event announces ("" none)
// and the fields its payload's data carries besides the common ones: a
// thread event's session_thread_id, read from the event's data (a thread
// event without one announces nothing: its payload could not name the
// thread).
func WebhookOfEvent(ev SessionEvent) (string, map[string]string) {
	t := sessionEventWebhooks[ev.Type]
	switch t {
	case "":
		return "", nil
	case WebhookSessionThreadCreated, WebhookSessionThreadIdled, WebhookSessionThreadTerminated:
		var d struct {
			ThreadID string `json:"session_thread_id"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ThreadID == "" {
			return "", nil
		}
		return t, map[string]string{"session_thread_id": d.ThreadID}
	}
	return t, nil
}

// WebhookWorkspaceID is the workspace_id of every payload: a tenant is
// agentkernel's only scope, and organization_id carries it.
const WebhookWorkspaceID = "default"

// WebhookPayload is the body of one webhook event in the SDK's
// UnwrapWebhookEvent shape. extra holds the data fields of the type's
// BetaWebhook*EventData beyond id, type, organization_id and workspace_id
// (session_thread_id, vault_id); the payload is stored in the outbox row,
// so they travel with it.
func WebhookPayload(eventID, webhookType, resourceID, tenantID string, at time.Time, extra map[string]string) json.RawMessage {
	data := map[string]string{}
	for k, v := range extra {
		data[k] = v
	}
	data["id"], data["type"] = resourceID, webhookType
	data["organization_id"], data["workspace_id"] = tenantID, WebhookWorkspaceID
	b, _ := json.Marshal(map[string]any{
		"id":         eventID,
		"type":       "event",
		"created_at": at.UTC().Format(time.RFC3339Nano),
		"data":       data,
	})
	return b
}

// OutboxNotifier is the engines' shared wake-up of SetWebhookNotify: a
// transaction that writes outbox rows calls Mark; inTx takes Gen before
// and calls AfterCommit after a successful commit. A transaction that
// marked always sees the generation moved, so it always notifies (other
// transactions may notify spuriously, which is harmless).
type OutboxNotifier struct {
	gen atomic.Uint64
	fn  atomic.Pointer[func()]
}

// Set registers fn (nil clears it).
func (n *OutboxNotifier) Set(fn func()) {
	if fn == nil {
		n.fn.Store(nil)
		return
	}
	n.fn.Store(&fn)
}

// Mark records that the running transaction wrote outbox rows.
func (n *OutboxNotifier) Mark() { n.gen.Add(1) }

// Gen is the generation before a transaction.
func (n *OutboxNotifier) Gen() uint64 { return n.gen.Load() }

// AfterCommit notifies when outbox rows were written since gen.
func (n *OutboxNotifier) AfterCommit(gen uint64) {
	if n.gen.Load() == gen {
		return
	}
	if fn := n.fn.Load(); fn != nil {
		(*fn)()
	}
}

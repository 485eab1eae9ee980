package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentkernel/agentkernel/internal/envwork"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The environment work queue of self_hosted environments (issue 16), as
// the official SDK's Beta.Environments.Work calls it and its
// lib/environments worker uses it. A worker calls it with an environment
// key (or any key of the environment's tenant).

type workAPI struct {
	*managedAPI
	q *envwork.Queue
}

func (s *Server) registerWorkRoutes(m *managedAPI, q *envwork.Queue) {
	h := &workAPI{managedAPI: m, q: q}
	e := s.envAuthenticated
	const base = "/v1/environments/{id}/work"
	s.mux.HandleFunc("GET "+base+"/poll", e(s.query(h.poll, "block_ms", "reclaim_older_than_ms")))
	s.mux.HandleFunc("GET "+base+"/stats", e(s.noQuery(h.stats)))
	s.mux.HandleFunc("GET "+base, e(s.query(h.list, "limit", "page")))
	s.mux.HandleFunc("GET "+base+"/{work_id}", e(s.noQuery(h.get)))
	s.mux.HandleFunc("POST "+base+"/{work_id}", e(s.noQuery(h.update)))
	s.mux.HandleFunc("POST "+base+"/{work_id}/ack", e(s.noQuery(h.ack)))
	s.mux.HandleFunc("POST "+base+"/{work_id}/heartbeat", e(s.query(h.heartbeat, "desired_ttl_seconds", "expected_last_heartbeat")))
	s.mux.HandleFunc("POST "+base+"/{work_id}/stop", e(s.noQuery(h.stop)))
}

// noHeartbeat is the expected_last_heartbeat of a lease's first heartbeat.
const noHeartbeat = "NO_HEARTBEAT"

// environment checks the path's environment: the key's own (an environment
// key), or a self_hosted environment of the caller's tenant.
func (h *workAPI) environment(r *http.Request) (string, error) {
	id := r.PathValue("id")
	p := PrincipalFrom(r.Context())
	if p.EnvironmentID != "" {
		if p.EnvironmentID != id {
			return "", NotFound("environment", id)
		}
		return id, nil
	}
	env, err := h.st.GetEnvironment(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && env.TenantID != p.TenantID) {
		return "", NotFound("environment", id)
	}
	if err != nil {
		return "", err
	}
	if !session.SelfHosted(env) {
		return "", BadRequest("environment %s is not self_hosted: only a self_hosted environment has a work queue", id)
	}
	return id, nil
}

func workTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// workJSON renders an item as the SDK's BetaSelfHostedWork. secret is
// only ever set by a poll (null elsewhere).
func workJSON(w *store.WorkItem) map[string]any {
	md := w.Metadata
	if md == nil {
		md = map[string]string{}
	}
	// The lease token is the last heartbeat's time as RFC 3339: shown as
	// it is, a process handed the item can continue its lease with it.
	var hb any = workTime(w.HeartbeatAt)
	if w.LeaseToken != "" {
		hb = w.LeaseToken
	}
	return map[string]any{
		"type": "work", "id": w.ID, "environment_id": w.EnvironmentID,
		"data":                map[string]any{"type": "session", "id": w.SessionID},
		"state":               w.State,
		"metadata":            md,
		"secret":              nil,
		"created_at":          w.CreatedAt.UTC().Format(time.RFC3339Nano),
		"acknowledged_at":     workTime(w.AckedAt),
		"started_at":          workTime(w.StartedAt),
		"latest_heartbeat_at": hb,
		"stop_requested_at":   workTime(w.StopRequestedAt),
		"stopped_at":          workTime(w.StoppedAt),
	}
}

// msParam reads a positive milliseconds query parameter in [1, max].
func msParam(r *http.Request, name string, max time.Duration) (time.Duration, bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || (max > 0 && time.Duration(n)*time.Millisecond > max) {
		if max > 0 {
			return 0, false, BadRequest("query parameter %q must be an integer from 1 to %d (milliseconds), got %q", name, max.Milliseconds(), v)
		}
		return 0, false, BadRequest("query parameter %q must be a positive integer (milliseconds), got %q", name, v)
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

func (h *workAPI) poll(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	block, _, err := msParam(r, "block_ms", envwork.MaxBlock)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	reclaim, _, err := msParam(r, "reclaim_older_than_ms", 0)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	item, err := h.q.Poll(r.Context(), envwork.PollParams{
		TenantID: tenant(r), EnvironmentID: env, WorkerID: r.Header.Get("Anthropic-Worker-ID"),
		Block: block, Reclaim: reclaim,
	})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if item == nil {
		// The SDK reads a JSON null as "no work".
		writeJSON(w, http.StatusOK, nil)
		return
	}
	writeJSON(w, http.StatusOK, workJSON(item))
}

func (h *workAPI) get(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	item, err := h.q.Get(r.Context(), tenant(r), env, r.PathValue("work_id"))
	h.answer(w, r, item, err)
}

// answer writes the item, or the error with the work item named.
func (h *workAPI) answer(w http.ResponseWriter, r *http.Request, item *store.WorkItem, err error) {
	if errors.Is(err, store.ErrNotFound) {
		err = NotFound("work item", r.PathValue("work_id"))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, workJSON(item))
}

func (h *workAPI) list(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := parsePageQuery(r.URL.Query(), 20, 100, true)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	items, err := h.q.List(r.Context(), tenant(r), env, p.cursor, p.limit+1)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := pageJSON[map[string]any]{Data: []map[string]any{}}
	if len(items) > p.limit {
		items = items[:p.limit]
		out.NextPage = encodeCursor(items[len(items)-1].ID)
	}
	for _, it := range items {
		out.Data = append(out.Data, workJSON(it))
	}
	writeJSON(w, http.StatusOK, out)
}

// workUpdateRequest is the body of POST …/work/{work_id} (the SDK's
// BetaSelfHostedWorkUpdateRequest): a metadata patch.
type workUpdateRequest struct {
	// Metadata: a string upserts the key, null deletes it.
	Metadata map[string]*string `json:"metadata"`
}

// workStopRequest is the body of POST …/work/{work_id}/stop (the SDK's
// BetaSelfHostedWorkStopRequest).
type workStopRequest struct {
	// Force stops the item at once instead of asking its worker to.
	Force bool `json:"force"`
}

func (h *workAPI) update(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var in workUpdateRequest
	if err := decodeJSON(r, &in); err != nil {
		h.writeError(w, r, err)
		return
	}
	if in.Metadata == nil {
		h.writeError(w, r, BadRequest("field \"metadata\" is required: a patch of string values (null deletes a key)"))
		return
	}
	for k, v := range in.Metadata {
		if len(k) == 0 || len(k) > 64 || (v != nil && len(*v) > 512) {
			h.writeError(w, r, BadRequest("field \"metadata\": key %q: keys are 1-64 characters and values at most 512", k))
			return
		}
	}
	item, err := h.q.UpdateMetadata(r.Context(), tenant(r), env, r.PathValue("work_id"), in.Metadata)
	h.answer(w, r, item, err)
}

func (h *workAPI) ack(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	item, err := h.q.Ack(r.Context(), tenant(r), env, r.PathValue("work_id"))
	if errors.Is(err, store.ErrConflict) {
		err = Errorf(http.StatusConflict, TypeConflict, "work item %s is not queued: it was acked already or stopped", r.PathValue("work_id"))
	}
	h.answer(w, r, item, err)
}

func (h *workAPI) heartbeat(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	expected := q.Get("expected_last_heartbeat")
	if expected == noHeartbeat {
		expected = ""
	}
	var desired time.Duration
	if v := q.Get("desired_ttl_seconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			h.writeError(w, r, BadRequest("query parameter \"desired_ttl_seconds\" must be a whole number of seconds (0: the default lease), got %q", v))
			return
		}
		desired = time.Duration(n) * time.Second
	}
	beat, err := h.q.Heartbeat(r.Context(), tenant(r), env, r.PathValue("work_id"), expected, desired)
	var lost *store.LeaseLostError
	if errors.As(err, &lost) {
		cur := lost.Current
		var last any
		if cur.LeaseToken != "" {
			last = cur.LeaseToken
		}
		e := Errorf(http.StatusPreconditionFailed, TypeInvalidRequest,
			"Heartbeat precondition failed: expected %s, actual was %v", q.Get("expected_last_heartbeat"), orNull(cur.LeaseToken))
		e.Details = map[string]any{
			"error_code": "heartbeat_precondition_failed",
			"current_state": map[string]any{
				"state": cur.State, "last_heartbeat": last, "lease_updated_at": workTime(cur.HeartbeatAt),
				"lease_extended": false, "ttl_seconds": int64(h.q.LeaseTTL() / time.Second),
			},
		}
		h.writeError(w, r, e)
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		err = NotFound("work item", r.PathValue("work_id"))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "work_heartbeat", "last_heartbeat": beat.Item.LeaseToken, "lease_extended": beat.Extended,
		"state": beat.Item.State, "ttl_seconds": int64(beat.TTL / time.Second),
	})
}

func orNull(s string) string {
	if s == "" {
		return "NULL"
	}
	return s
}

func (h *workAPI) stop(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var in workStopRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &in); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	item, err := h.q.Stop(r.Context(), tenant(r), env, r.PathValue("work_id"), in.Force)
	if errors.Is(err, store.ErrConflict) {
		err = Errorf(http.StatusConflict, TypeConflict, "work item %s is stopped already", r.PathValue("work_id"))
	}
	h.answer(w, r, item, err)
}

func (h *workAPI) stats(w http.ResponseWriter, r *http.Request) {
	env, err := h.environment(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	st, err := h.q.Stats(r.Context(), tenant(r), env)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "work_queue_stats", "depth": st.Depth, "pending": st.Pending,
		"oldest_queued_at": workTime(st.OldestQueuedAt), "workers_polling": st.WorkersPolling,
	})
}

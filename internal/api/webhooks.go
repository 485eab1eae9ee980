package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/webhook"
)

// webhookAPI serves /v1/webhooks: agentkernel's own registration API (the
// SDK verifies webhooks but has no registration API).
type webhookAPI struct {
	*Server
	svc *webhook.Service
}

func (s *Server) registerWebhookRoutes(svc *webhook.Service) {
	h := &webhookAPI{Server: s, svc: svc}
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/webhooks", a(s.noQuery(h.create)))
	s.mux.HandleFunc("GET /v1/webhooks", a(s.noQuery(h.list)))
	s.mux.HandleFunc("GET /v1/webhooks/{id}", a(s.noQuery(h.get)))
	s.mux.HandleFunc("DELETE /v1/webhooks/{id}", a(s.noQuery(h.delete)))
	s.mux.HandleFunc("GET /v1/webhooks/{id}/deliveries", a(s.query(h.deliveries, "limit", "after_seq", "status")))
	s.mux.HandleFunc("POST /v1/webhooks/{id}/deliveries/{did}/redeliver", a(s.noQuery(h.redeliver)))
}

// webhookErr turns the service's refusals into the API's errors.
func webhookErr(err error) error {
	var ie *webhook.InputError
	if !errors.As(err, &ie) {
		return err
	}
	typ := TypeInvalidRequest
	if ie.Status == http.StatusNotFound {
		typ = TypeNotFound
	}
	return Errorf(ie.Status, typ, "%s", ie.Msg)
}

func endpointJSON(e *store.WebhookEndpoint, withSecret bool) map[string]any {
	out := map[string]any{"id": e.ID, "type": "webhook", "url": e.URL, "event_types": e.EventTypes,
		"description": e.Description, "created_at": timeJSON(e.CreatedAt)}
	if withSecret {
		out["secret"] = e.Secret
	}
	return out
}

func deliveryJSON(d *store.WebhookDelivery) map[string]any {
	return map[string]any{"id": d.ID, "type": "webhook_delivery", "seq": d.Seq, "webhook_id": d.EndpointID,
		"event_id": d.EventID, "event_type": d.EventType, "resource_id": d.OrderKey, "status": d.Status,
		"attempts": d.Attempts, "next_attempt_at": timeJSON(d.NextAttemptAt), "last_error": d.LastError,
		"last_status_code": d.LastStatus, "created_at": timeJSON(d.CreatedAt), "delivered_at": timePtrJSON(d.DeliveredAt)}
}

// createWebhookRequest is the body of POST /v1/webhooks.
type createWebhookRequest struct {
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
}

func (h *webhookAPI) create(w http.ResponseWriter, r *http.Request) {
	var in createWebhookRequest
	if err := decodeJSON(r, &in); err != nil {
		h.writeError(w, r, err)
		return
	}
	e, err := h.svc.Create(r.Context(), tenant(r), webhook.CreateParams{URL: in.URL, EventTypes: in.EventTypes, Description: in.Description})
	if err != nil {
		h.writeError(w, r, webhookErr(err))
		return
	}
	writeJSON(w, http.StatusOK, endpointJSON(e, true))
}

func (h *webhookAPI) list(w http.ResponseWriter, r *http.Request) {
	es, err := h.svc.List(r.Context(), tenant(r))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	data := make([]any, len(es))
	for i, e := range es {
		data[i] = endpointJSON(e, false)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false})
}

func (h *webhookAPI) get(w http.ResponseWriter, r *http.Request) {
	e, err := h.svc.Get(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, webhookErr(err))
		return
	}
	writeJSON(w, http.StatusOK, endpointJSON(e, false))
}

func (h *webhookAPI) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := h.svc.Delete(r.Context(), tenant(r), id); err != nil {
		h.writeError(w, r, webhookErr(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "webhook_deleted"})
}

// maxDeliveryPage bounds one page of deliveries.
const maxDeliveryPage = 1000

func (h *webhookAPI) deliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := queryLimit(q, 100, maxDeliveryPage)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var after int64
	if v := q.Get("after_seq"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			h.writeError(w, r, BadRequest("query parameter \"after_seq\" must be a non-negative integer, got %q", v))
			return
		}
	}
	ds, err := h.svc.Deliveries(r.Context(), tenant(r), r.PathValue("id"), after, limit+1, q.Get("status"))
	if err != nil {
		h.writeError(w, r, webhookErr(err))
		return
	}
	more := len(ds) > limit
	if more {
		ds = ds[:limit]
	}
	data := make([]any, len(ds))
	for i, d := range ds {
		data[i] = deliveryJSON(d)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": more})
}

func (h *webhookAPI) redeliver(w http.ResponseWriter, r *http.Request) {
	d, err := h.svc.Redeliver(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("did"))
	if err != nil {
		h.writeError(w, r, webhookErr(err))
		return
	}
	writeJSON(w, http.StatusOK, deliveryJSON(d))
}

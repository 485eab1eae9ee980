package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxAgentPullWait bounds a long-poll.
const maxAgentPullWait = 60 * time.Second

// agentEventHandler serves /agent-events: the agent (inside the sandbox,
// through the agent socket at /run/agentkernel/agent.sock) POSTs events;
// the daemon GETs them on its own socket with after=<last seq it stored>.
type agentEventHandler struct {
	s    *Server
	once sync.Once
	log  *agentEventLog
}

func newAgentEventHandler(s *Server) *agentEventHandler { return &agentEventHandler{s: s} }

func (h *agentEventHandler) events() *agentEventLog {
	h.once.Do(func() { h.log = newAgentEventLog(h.s.cfg.RuntimeDir, h.s.cfg.Now) })
	return h.log
}

func (h *agentEventHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "use GET or POST", Code: codeBadRequest})
	}
}

func (h *agentEventHandler) post(w http.ResponseWriter, r *http.Request) {
	l := h.events()
	if l.loadErr != nil {
		h.s.log.Warn("agent events: earlier buffer unreadable", "err", l.loadErr)
	}
	var raw json.RawMessage
	if err := decodeJSON(r, &raw); err != nil {
		writeError(w, err)
		return
	}
	// One event, or {"events":[...]}.
	var evs []AgentEvent
	var probe struct {
		Events json.RawMessage `json:"events"`
	}
	_ = json.Unmarshal(raw, &probe)
	dec := func(b []byte, v any) error {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	if probe.Events != nil {
		var b AgentEventBatch
		if err := dec(raw, &b); err != nil {
			writeError(w, fmt.Errorf("%w: %v", errBadRequest, err))
			return
		}
		evs = b.Events
	} else {
		var ev AgentEvent
		if err := dec(raw, &ev); err != nil {
			writeError(w, fmt.Errorf("%w: %v", errBadRequest, err))
			return
		}
		evs = []AgentEvent{ev}
	}
	if len(evs) == 0 || len(evs) > maxAgentEventBatch {
		writeError(w, fmt.Errorf("%w: a batch holds 1 to %d events, got %d", errBadRequest, maxAgentEventBatch, len(evs)))
		return
	}
	seq, err := l.append(evs)
	if errors.Is(err, errAgentBufferFull) {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error(), Code: codeInternal})
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]int64{"seq": seq})
}

func (h *agentEventHandler) get(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var after, waitMS int64
	limit := int64(maxAgentEventBatch)
	for name, dst := range map[string]*int64{"after": &after, "wait_ms": &waitMS, "limit": &limit} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				writeError(w, fmt.Errorf("%w: %s must be a non-negative integer", errBadRequest, name))
				return
			}
			*dst = n
		}
	}
	limit = min(max(limit, 1), maxAgentEventBatch)
	wait := min(time.Duration(waitMS)*time.Millisecond, maxAgentPullWait)
	l := h.events()
	evs, changed, err := l.pull(after, int(limit))
	if err != nil {
		writeError(w, err)
		return
	}
	if len(evs) == 0 && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		if evs, _, err = l.pull(after, int(limit)); err != nil {
			writeError(w, err)
			return
		}
	}
	if evs == nil {
		evs = []AgentEvent{}
	}
	writeJSON(w, http.StatusOK, AgentEventBatch{Events: evs})
}

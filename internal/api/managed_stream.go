package api

import (
	"bufio"
	"errors"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// streamEvents serves a session's events as Server-Sent Events: each as
// "event: <type>", "id: <event id>", "data: <json>". Without Last-Event-ID
// the stream starts at the session's newest event, so a stream opened
// before a send delivers what is sent; with it, the stream resumes right
// after that event (no gap, no duplicate). Every event is durable before
// it is written here (the event log persists before it publishes).
func (m *managedAPI) streamEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m.streamLog(w, r, func() (string, error) {
		_, err := m.sessionFor(r, id)
		return id, err
	})
}

// streamLog streams the log resolve names (a session's, or a thread's
// own), once the query is checked.
func (m *managedAPI) streamLog(w http.ResponseWriter, r *http.Request, resolve func() (string, error)) {
	if err := checkQuery(r.URL.Query(), "event_deltas"); err != nil {
		m.writeError(w, r, err)
		return
	}
	if len(queryList(r.URL.Query(), "event_deltas")) > 0 {
		m.writeError(w, r, BadRequest("query parameter \"event_deltas\" is not supported yet: the stream sends each event once it is complete"))
		return
	}
	id, err := resolve()
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	after, err := m.resumePoint(r, id)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	ch, err := m.events.Subscribe(r.Context(), id, after)
	if errors.Is(err, session.ErrEventLogClosed) {
		m.writeError(w, r, Errorf(http.StatusServiceUnavailable, TypeAPI, "the server is shutting down; reconnect with Last-Event-ID"))
		return
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	ping := time.NewTicker(sseKeepAlive)
	defer ping.Stop()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return // deleted, shutting down or a store error: the client reconnects
			}
			writeSSE(bw, e)
			// Write whatever else is ready before one flush: a burst costs
			// one syscall, a lone event is flushed at once.
		drain:
			for range 256 {
				select {
				case e, ok = <-ch:
					if !ok {
						break drain
					}
					writeSSE(bw, e)
				default:
					break drain
				}
			}
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
			if !ok {
				return
			}
		case <-ping.C:
			_, _ = bw.WriteString("event: ping\ndata: {\"type\":\"ping\"}\n\n")
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func writeSSE(bw *bufio.Writer, e store.SessionEvent) {
	_, _ = bw.WriteString("event: ")
	_, _ = bw.WriteString(e.Type)
	_, _ = bw.WriteString("\nid: ")
	_, _ = bw.WriteString(e.ID)
	_, _ = bw.WriteString("\ndata: ")
	_, _ = bw.Write(EventJSON(e))
	_, _ = bw.WriteString("\n\n")
}

// resumePoint is the Seq the stream continues after: the event named by
// Last-Event-ID, else the session's newest event.
func (m *managedAPI) resumePoint(r *http.Request, id string) (int64, error) {
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		e, err := m.st.GetEvent(r.Context(), id, last)
		if errors.Is(err, store.ErrNotFound) {
			return 0, BadRequest("header \"Last-Event-ID\": session %s has no event %q", id, last)
		}
		if err != nil {
			return 0, err
		}
		return e.Seq, nil
	}
	seq, err := m.st.LastEventSeq(r.Context(), id)
	return seq, notFoundAs("session", id, err)
}

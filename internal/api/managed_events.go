package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// EventJSON renders a stored event as the API returns it: its Data with
// "id", "type" and "processed_at" filled from the row when the writer left
// them out (runtime events may). It runs for every event every subscriber
// receives, so it splices bytes instead of re-encoding the event.
func EventJSON(e store.SessionEvent) json.RawMessage {
	hasID, hasAt, hasType, ok := topLevelKeys(e.Data)
	if !ok {
		return mustJSON(map[string]any{"id": e.ID, "type": e.Type, "processed_at": e.CreatedAt.UTC()})
	}
	if hasID && hasAt && hasType {
		return e.Data
	}
	out := make([]byte, 0, len(e.Data)+128)
	out = append(out, '{')
	add := func(k string, v any) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, k...)
		out = append(out, '"', ':')
		out = append(out, mustJSON(v)...)
	}
	if !hasID {
		add("id", e.ID)
	}
	if !hasType {
		add("type", e.Type)
	}
	if !hasAt {
		add("processed_at", e.CreatedAt.UTC())
	}
	rest := bytes.TrimSpace(bytes.TrimSpace(e.Data)[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// topLevelKeys reports which of id, processed_at and type the JSON object
// b has at its top level; ok is false when b is not a JSON object.
func topLevelKeys(b []byte) (id, at, typ, ok bool) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' || !json.Valid(b) {
		return false, false, false, false
	}
	depth, prev := 0, byte(0)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if depth == 1 && (prev == '{' || prev == ',') {
				switch string(b[i+1 : j]) {
				case "id":
					id = true
				case "processed_at":
					at = true
				case "type":
					typ = true
				}
			}
			i, prev = j, '"'
		case '{', '[':
			depth++
			prev = c
		case '}', ']':
			depth--
			prev = c
		case ' ', '\t', '\n', '\r':
		default:
			prev = c
		}
	}
	return id, at, typ, true
}

func (m *managedAPI) sendEvents(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	if err := m.envScoped(r, r.PathValue("id")); err != nil {
		m.writeError(w, r, err)
		return
	}
	if PrincipalFrom(r.Context()).EnvironmentID != "" {
		// A worker answers the calls it ran; the conversation is the user's.
		if err := workerEvents(in); err != nil {
			m.writeError(w, r, err)
			return
		}
	}
	stored, err := m.svc.SendEvents(r.Context(), tenant(r), r.PathValue("id"), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]json.RawMessage, len(stored))
	for i, e := range stored {
		out[i] = EventJSON(e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// listEvents pages through a session's events by Seq: ascending by
// default, newest first with order=desc; the cursor is the last Seq.
func (m *managedAPI) listEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m.listLog(w, r, func() (string, error) {
		_, err := m.sessionFor(r, id)
		return id, err
	})
}

// getEvent is one event of a session, as the list shows it: agentkernel's
// own route (the console opens an event's JSON on demand rather than
// inlining every event's). An event of another session is not found, even
// with the same id (a fork keeps its source's ids).
func (m *managedAPI) getEvent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m.getLogEvent(w, r, func() (string, error) {
		if _, err := m.sessionFor(r, id); err != nil {
			return "", err
		}
		return id, nil
	})
}

// getLogEvent serves one event of the log resolve names (a session's, or
// a thread's own): not found when it is another log's.
func (m *managedAPI) getLogEvent(w http.ResponseWriter, r *http.Request, resolve func() (string, error)) {
	logID, err := resolve()
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	eid := r.PathValue("event_id")
	e, err := m.st.GetEvent(r.Context(), logID, eid)
	if err != nil {
		m.writeError(w, r, notFoundAs("event", eid, err))
		return
	}
	writeJSON(w, http.StatusOK, EventJSON(*e))
}

// listLog serves the events list of the log resolve names (a session's,
// or a thread's own), once the query is checked.
func (m *managedAPI) listLog(w http.ResponseWriter, r *http.Request, resolve func() (string, error)) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 100, 1000, false)
	if err == nil {
		err = checkQuery(q, withCursor("types")...)
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	var cursor int64
	if p.cursor != "" {
		if cursor, err = strconv.ParseInt(p.cursor, 10, 64); err != nil || cursor < 0 {
			m.writeError(w, r, BadRequest("query parameter \"page\" is not a cursor for session events"))
			return
		}
	}
	id, err := resolve()
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	types := queryList(q, "types")
	var page []store.SessionEvent
	var more bool
	if p.desc {
		page, more, err = m.eventsDesc(r, id, cursor, types, p)
	} else {
		page, more, err = collectPage(p.limit, strconv.FormatInt(cursor, 10), func(after string, n int) ([]store.SessionEvent, error) {
			a, _ := strconv.ParseInt(after, 10, 64)
			return m.st.ListEvents(r.Context(), store.ListEventsParams{SessionID: id, AfterSeq: a, Limit: n, Types: types})
		}, func(e store.SessionEvent) string { return strconv.FormatInt(e.Seq, 10) }, func(e store.SessionEvent) bool { return p.inTime(e.CreatedAt) })
	}
	if err != nil {
		m.writeError(w, r, notFoundAs("session", id, err))
		return
	}
	out := pageJSON[json.RawMessage]{Data: make([]json.RawMessage, 0, len(page))}
	for _, e := range page {
		out.Data = append(out.Data, EventJSON(e))
	}
	if more && len(page) > 0 {
		out.NextPage = encodeCursor(strconv.FormatInt(page[len(page)-1].Seq, 10))
	}
	writeJSON(w, http.StatusOK, out)
}

// eventsDesc reads newest first below the cursor Seq (0: from the newest)
// in windows, since the store returns ascending Seq.
func (m *managedAPI) eventsDesc(r *http.Request, id string, before int64, types []string, p pageQuery) ([]store.SessionEvent, bool, error) {
	if before == 0 {
		last, err := m.st.LastEventSeq(r.Context(), id)
		if err != nil {
			return nil, false, err
		}
		before = last + 1
	}
	window := int64(4 * (p.limit + 1))
	var page []store.SessionEvent
	for before > 1 {
		from := max(0, before-1-window)
		evs, err := m.st.ListEvents(r.Context(), store.ListEventsParams{SessionID: id, AfterSeq: from, BeforeSeq: before, Types: types})
		if err != nil {
			return nil, false, err
		}
		slices.Reverse(evs)
		for _, e := range evs {
			if !p.inTime(e.CreatedAt) {
				continue
			}
			if len(page) == p.limit {
				return page, true, nil
			}
			page = append(page, e)
		}
		before = from + 1
	}
	return page, false, nil
}

// sseKeepAlive is how often an idle stream sends a ping (the SDK skips
// them), so proxies keep the connection and dead clients are noticed.
const sseKeepAlive = 15 * time.Second

// workerEvents: an environment key sends tool results only. (It reads the
// raw events: the service parses them, and marks what it read, after.)
func workerEvents(in obj) error {
	var evs []struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(in.Raw("events"), &evs); err != nil {
		return nil // the service names what is wrong with the body
	}
	for i, ev := range evs {
		if ev.Type != "user.tool_result" && ev.Type != "user.custom_tool_result" {
			return Errorf(http.StatusForbidden, TypePermission,
				"events[%d].type: an environment key sends user.tool_result and user.custom_tool_result events only, got %q", i, ev.Type)
		}
	}
	return nil
}

package console

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Sessions: the list, and a session's page with its live trajectory.

// eventsPerPage is how many events a session page renders at first, and
// how many each scroll back adds: a session of 10,000 events renders as
// fast as one of 200.
const eventsPerPage = 200

func (c *Console) registerSessions() {
	c.addNav(navItem{Label: "Sessions", Path: Prefix + "/sessions"})
	c.mux.HandleFunc("GET "+Prefix+"/sessions", c.authed(c.sessionList))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}", c.authed(c.sessionPage))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/older", c.authed(c.sessionOlder))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/live", c.authed(c.sessionLive))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/events/{event}", c.authed(c.sessionEvent))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/events/{event}/text", c.authed(c.sessionEventText))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/events/{event}/input", c.authed(c.sessionEventInput))
	// A thread's own log, on a page of its own, read as the session's is.
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/threads/{thread}", c.authed(c.threadPage))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/threads/{thread}/older", c.authed(c.sessionOlder))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/threads/{thread}/interrupt", c.authed(c.sessionInterrupt))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/threads/{thread}/live", c.authed(c.sessionLive))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/threads/{thread}/events/{event}", c.authed(c.sessionEvent))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/threads/{thread}/events/{event}/text", c.authed(c.sessionEventText))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/threads/{thread}/events/{event}/input", c.authed(c.sessionEventInput))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/message", c.authed(c.sessionMessage))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/interrupt", c.authed(c.sessionInterrupt))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/confirm", c.authed(c.sessionConfirm))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/custom-result", c.authed(c.sessionCustomResult))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/fork", c.authed(c.sessionFork))
	c.mux.HandleFunc("POST "+Prefix+"/sessions/{id}/rewind", c.authed(c.sessionRewind))
	c.mux.HandleFunc("GET "+Prefix+"/sessions/{id}/files/{file}", c.authed(c.sessionFile))
}

// sessionFork forks the session at an event (default: the latest) and
// opens the fork.
func (c *Console) sessionFork(w http.ResponseWriter, r *http.Request, u *user) {
	body := map[string]any{}
	if ev := strings.TrimSpace(r.PostFormValue("event_id")); ev != "" {
		body["event_id"] = ev
	}
	var fork struct {
		ID string `json:"id"`
	}
	if err := c.call(r.Context(), u, http.MethodPost, "/v1/sessions/"+url.PathEscape(r.PathValue("id"))+"/fork", nil, body, &fork); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	http.Redirect(w, r, Prefix+"/sessions/"+url.PathEscape(fork.ID), http.StatusSeeOther)
}

// sessionRewind takes the session back to an event.
func (c *Console) sessionRewind(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	ev := strings.TrimSpace(r.PostFormValue("event_id"))
	if ev == "" {
		c.fail(w, r, u, http.StatusBadRequest, "Name the event to rewind to.")
		return
	}
	if err := c.call(r.Context(), u, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/rewind", nil, map[string]any{"event_id": ev}, nil); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	http.Redirect(w, r, Prefix+"/sessions/"+url.PathEscape(id), http.StatusSeeOther)
}

// sessionJSON is the part of the API's session the console shows.
type sessionJSON struct {
	ID            string           `json:"id"`
	Status        string           `json:"status"`
	Title         string           `json:"title"`
	Agent         agentJSON        `json:"agent"`
	EnvironmentID string           `json:"environment_id"`
	Metadata      map[string]any   `json:"metadata"`
	Stats         map[string]any   `json:"stats"`
	Usage         sessionUsageJSON `json:"usage"`
	CreatedAt     time.Time        `json:"created_at"`
	ArchivedAt    *time.Time       `json:"archived_at"`
	Lineage       json.RawMessage  `json:"lineage"`
	// Cost is the console's, filled in by the page that shows it.
	Cost costView `json:"-"`
}

type usageJSON struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (s sessionJSON) ActiveSeconds() float64 {
	f, _ := s.Stats["active_seconds"].(float64)
	return f
}

// sessionStatuses are the statuses the list filters by.
var sessionStatuses = []string{"idle", "running", "rescheduling", "terminated"}

func (c *Console) sessionList(w http.ResponseWriter, r *http.Request, u *user) {
	q := url.Values{"limit": {"50"}}
	in := r.URL.Query()
	status := in.Get("status")
	if slices.Contains(sessionStatuses, status) {
		q.Set("statuses[]", status)
	} else {
		status = ""
	}
	agent := strings.TrimSpace(in.Get("agent_id"))
	if agent != "" {
		q.Set("agent_id", agent)
	}
	archived := in.Get("archived") == "1"
	if archived {
		q.Set("include_archived", "true")
	}
	if p := in.Get("page"); p != "" {
		q.Set("page", p)
	}
	var list struct {
		Data     []sessionJSON `json:"data"`
		NextPage string        `json:"next_page"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sessions", q, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	for i := range list.Data {
		list.Data[i].Cost = c.cost(list.Data[i].Agent.Model.ID, list.Data[i].Usage)
		list.Data[i].Cost.Title += ownCostNote
	}
	next := nextPage("/sessions", in, []string{"status", "agent_id", "archived"}, "page", list.NextPage)
	c.render(w, r, u, http.StatusOK, "sessions", map[string]any{
		"Sessions": list.Data, "Statuses": sessionStatuses, "Status": status, "AgentID": agent,
		"Archived": archived, "Next": next,
	})
}

// eventLog is an event log a page shows: a session's, or one of its
// threads' own.
type eventLog struct {
	// page is its page's path below the prefix: /sessions/{id}, or
	// /sessions/{id}/threads/{thread}.
	page string
	// api is its path in the API: its events list is api+"/events", one
	// event api+"/events/{event_id}".
	api string
	// stream is its live stream in the API.
	stream string
}

// logOf is the log a request names: its session's, or with a thread in
// its path, that thread's.
func logOf(r *http.Request) eventLog {
	id := url.PathEscape(r.PathValue("id"))
	if th := r.PathValue("thread"); th != "" {
		th = url.PathEscape(th)
		api := "/v1/sessions/" + id + "/threads/" + th
		return eventLog{page: "/sessions/" + id + "/threads/" + th, api: api, stream: api + "/stream"}
	}
	api := "/v1/sessions/" + id
	return eventLog{page: "/sessions/" + id, api: api, stream: api + "/events/stream"}
}

// eventsPage reads a page of a log's events, newest first from the API,
// and returns it oldest first with the cursor to the page before.
func (c *Console) eventsPage(r *http.Request, u *user, log eventLog, cursor string) ([]eventView, string, error) {
	q := url.Values{"limit": {fmt.Sprint(eventsPerPage)}, "order": {"desc"}}
	if cursor != "" {
		q.Set("page", cursor)
	}
	var list struct {
		Data     []json.RawMessage `json:"data"`
		NextPage string            `json:"next_page"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, log.api+"/events", q, nil, &list); err != nil {
		return nil, "", err
	}
	views := make([]eventView, 0, len(list.Data))
	for i := len(list.Data) - 1; i >= 0; i-- {
		views = append(views, viewEvent(log.page, list.Data[i]))
	}
	return views, list.NextPage, nil
}

func (c *Console) sessionPage(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	var s sessionJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, nil, &s); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	s.Cost = c.cost(s.Agent.Model.ID, s.Usage)
	s.Cost.Title += ownCostNote
	traj, err := c.trajectory(r, u, logOf(r))
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	files, moreFiles, err := c.sessionFiles(r, u, id)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	threads, err := c.threads(r, u, id)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "session", map[string]any{
		"Session": s, "Trajectory": traj, "Pending": pendingCalls(traj.Events),
		"Timeline": timeline(traj.Events), "Files": files, "MoreFiles": moreFiles,
		"Threads": threads, "Total": threads.total(s.Cost),
	})
}

// trajectoryView is what a trajectory shows: a log's newest events, the
// cursor to older ones, the last event's id (where the live stream picks
// up).
type trajectoryView struct {
	Page, Last, Older string
	Events            []eventView
}

func (c *Console) trajectory(r *http.Request, u *user, log eventLog) (trajectoryView, error) {
	events, older, err := c.eventsPage(r, u, log, "")
	if err != nil {
		return trajectoryView{}, err
	}
	v := trajectoryView{Page: log.page, Older: older, Events: events}
	if len(events) > 0 {
		v.Last = events[len(events)-1].ID
	}
	return v, nil
}

// sessionOlder is the page of a log's events before a cursor, as HTML to
// put above the ones shown.
func (c *Console) sessionOlder(w http.ResponseWriter, r *http.Request, u *user) {
	events, older, err := c.eventsPage(r, u, logOf(r), r.URL.Query().Get("page"))
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	w.Header().Set("X-Older-Page", older)
	c.fragment(w, r, "session", "events", events)
}

// sessionEvent is one event's whole JSON, as text: what its fold on the
// page shows once opened (the script puts it there; without a script the
// fold links here).
func (c *Console) sessionEvent(w http.ResponseWriter, r *http.Request, u *user) {
	ev, err := c.event(r, u)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	plainText(w, pretty(ev))
}

// sessionEventText is the whole text of an event whose page shows only
// its first lines (a long tool output, say): fetched when its fold opens,
// or followed from the fold's link.
func (c *Console) sessionEventText(w http.ResponseWriter, r *http.Request, u *user) {
	ev, err := c.event(r, u)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	plainText(w, viewEvent(logOf(r).page, ev).Text)
}

// sessionEventInput is the whole input of a tool call whose page shows
// only its first lines, as sessionEventText is for a long text.
func (c *Console) sessionEventInput(w http.ResponseWriter, r *http.Request, u *user) {
	ev, err := c.event(r, u)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	plainText(w, viewEvent(logOf(r).page, ev).Input)
}

// event reads the request's event through its log (a session's, or a
// thread's own).
func (c *Console) event(r *http.Request, u *user) (json.RawMessage, error) {
	var ev json.RawMessage
	path := logOf(r).api + "/events/" + url.PathEscape(r.PathValue("event"))
	err := c.call(r.Context(), u, http.MethodGet, path, nil, nil, &ev)
	return ev, err
}

func plainText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s)
}

// sessionLive streams a log's new events as rendered HTML (SSE): each
// event's id is the API event's, so the browser's reconnection
// (Last-Event-ID) resumes where it left off.
func (c *Console) sessionLive(w http.ResponseWriter, r *http.Request, u *user) {
	log := logOf(r)
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("after")
	}
	rc := http.NewResponseController(w)
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
	}
	t := c.pages["session"]
	err := c.stream(r.Context(), u, log.stream, last, func(ev sseEvent) error {
		start()
		var sb strings.Builder
		if err := t.ExecuteTemplate(&sb, "event", viewEvent(log.page, ev.Data)); err != nil {
			return err
		}
		fmt.Fprintf(w, "id: %s\nevent: ev\n", ev.ID)
		for line := range strings.SplitSeq(sb.String(), "\n") {
			fmt.Fprintf(w, "data: %s\n", line)
		}
		fmt.Fprint(w, "\n")
		return rc.Flush()
	})
	if !started {
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		start()
	}
}

// sendEvents posts events to the session and goes back to its page.
func (c *Console) sendEvents(w http.ResponseWriter, r *http.Request, u *user, events ...map[string]any) {
	id := r.PathValue("id")
	err := c.call(r.Context(), u, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/events", nil, map[string]any{"events": events}, nil)
	if r.Header.Get("X-Requested-With") == "console" {
		// The script's request: the answer is the outcome alone.
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	// Back to the page the form was on: the session's, or its thread's.
	http.Redirect(w, r, Prefix+logOf(r).page, http.StatusSeeOther)
}

func (c *Console) sessionMessage(w http.ResponseWriter, r *http.Request, u *user) {
	text := strings.TrimSpace(r.PostFormValue("text"))
	if text == "" {
		c.fail(w, r, u, http.StatusBadRequest, "The message is empty.")
		return
	}
	c.sendEvents(w, r, u, map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": text}}})
}

// sessionInterrupt interrupts the session (and its threads), or, from a
// thread's page, that thread alone.
func (c *Console) sessionInterrupt(w http.ResponseWriter, r *http.Request, u *user) {
	ev := map[string]any{"type": "user.interrupt"}
	if th := r.PathValue("thread"); th != "" {
		ev["session_thread_id"] = th
	}
	c.sendEvents(w, r, u, ev)
}

func (c *Console) sessionConfirm(w http.ResponseWriter, r *http.Request, u *user) {
	result := r.PostFormValue("result")
	if result != "allow" && result != "deny" {
		c.fail(w, r, u, http.StatusBadRequest, "Confirm with allow or deny.")
		return
	}
	ev := map[string]any{"type": "user.tool_confirmation", "tool_use_id": r.PostFormValue("tool_use_id"), "result": result}
	if msg := strings.TrimSpace(r.PostFormValue("deny_message")); msg != "" && result == "deny" {
		ev["deny_message"] = msg
	}
	c.sendEvents(w, r, u, ev)
}

func (c *Console) sessionCustomResult(w http.ResponseWriter, r *http.Request, u *user) {
	c.sendEvents(w, r, u, map[string]any{
		"type": "user.custom_tool_result", "custom_tool_use_id": r.PostFormValue("tool_use_id"),
		"content":  []any{map[string]any{"type": "text", "text": r.PostFormValue("text")}},
		"is_error": r.PostFormValue("is_error") == "1",
	})
}

// pendingCalls are the calls the session waits on the user for: the
// event ids its last session.status_idle names as requiring action.
func pendingCalls(events []eventView) []eventView {
	var ids []string
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Type == "session.status_idle" {
			ids = e.Waiting
			break
		}
		if e.Type == "session.status_running" {
			return nil
		}
	}
	var out []eventView
	for _, e := range events {
		if slices.Contains(ids, e.ID) {
			out = append(out, e)
		}
	}
	return out
}

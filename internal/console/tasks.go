package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel"
)

// Tasks and the monitor: each task's monitor state and why (the activity
// summary of its sandbox), its transcript.

func (c *Console) registerTasks() {
	c.addNav(navItem{Label: "Tasks", Path: Prefix + "/tasks"})
	c.mux.HandleFunc("GET "+Prefix+"/tasks", c.authed(c.taskList))
	c.mux.HandleFunc("GET "+Prefix+"/tasks/{id}", c.authed(c.taskPage))
}

// tasksPerPage is how many tasks the list shows at a time.
const tasksPerPage = 100

// taskJSON is the API's task, as the SDK reads it.
type taskJSON = agentkernel.Task

// activityJSON is the monitor's view of a task's sandbox.
type activityJSON struct {
	State         string            `json:"state"`
	Why           string            `json:"why"`
	IsAlive       bool              `json:"is_alive"`
	IsIdle        bool              `json:"is_idle"`
	WillTerminate bool              `json:"will_terminate"`
	Reason        string            `json:"reason"`
	DurationMS    int64             `json:"duration_ms"`
	Summary       *activitySummary  `json:"summary"`
	Termination   *terminationJSON  `json:"termination"`
	Thresholds    map[string]string `json:"thresholds"`
	At            time.Time         `json:"at"`
}

// activitySummary is what the monitor read from the agent's events.
type activitySummary struct {
	FirstHeartbeatAt    *time.Time `json:"first_heartbeat_at"`
	LastHeartbeatAt     *time.Time `json:"last_heartbeat_at"`
	LastHeartbeatStatus string     `json:"last_heartbeat_status"`
	LastWorkEventAt     *time.Time `json:"last_work_event_at"`
	LastWorkEventType   string     `json:"last_work_event_type"`
	LatestCompletedAt   *time.Time `json:"latest_completed_at"`
	StartedAt           *time.Time `json:"started_at"`
	EventCount          int64      `json:"event_count"`
	LastSeq             int64      `json:"last_seq"`
}

// terminationJSON is how the monitor ended the sandbox.
type terminationJSON struct {
	Reason       string     `json:"reason"`
	DurationMS   int64      `json:"duration_ms"`
	TranscriptID string     `json:"transcript_id"`
	StopError    string     `json:"stop_error"`
	At           time.Time  `json:"at"`
	FinishedAt   *time.Time `json:"finished_at"`
}

// transcriptJSON is a task's saved transcript.
type transcriptJSON struct {
	ID      string    `json:"id"`
	Source  string    `json:"source"`
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256"`
	SavedAt time.Time `json:"saved_at"`
	Content string    `json:"content"`
}

// Fold: a long transcript opens folded, its last lines shown (where an
// agent's transcript says how it ended).
func (t transcriptJSON) Fold() bool {
	return strings.Count(t.Content, "\n") >= foldOver || len(t.Content) > 4096
}

// Tail is the transcript's last lines.
func (t transcriptJSON) Tail() string {
	s := strings.TrimRight(t.Content, "\n")
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n++; n == foldOver/2 {
				return s[i+1:]
			}
		}
	}
	return s
}

var taskStatuses = []string{"pending", "claiming", "assigned", "running", "completed", "failed", "cancelled"}

func (c *Console) taskList(w http.ResponseWriter, r *http.Request, u *user) {
	q := url.Values{"limit": {fmt.Sprint(tasksPerPage)}}
	in := r.URL.Query()
	for _, k := range []string{"status", "kind", "ticket_id", "after"} {
		if v := strings.TrimSpace(in.Get(k)); v != "" {
			q.Set(k, v)
		}
	}
	var list struct {
		Data    []taskJSON `json:"data"`
		HasMore bool       `json:"has_more"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/tasks", q, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	cursor := ""
	if list.HasMore && len(list.Data) > 0 {
		cursor = list.Data[len(list.Data)-1].ID
	}
	next := nextPage("/tasks", q, []string{"status", "kind", "ticket_id"}, "after", cursor)
	c.render(w, r, u, http.StatusOK, "tasks", map[string]any{
		"Tasks": list.Data, "Statuses": taskStatuses, "Status": q.Get("status"), "After": q.Get("after"),
		"Next": next, "PerPage": tasksPerPage,
	})
}

func (c *Console) taskPage(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	var t taskJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, nil, &t); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	data := map[string]any{"Task": t}
	if t.SandboxID != "" {
		var act activityJSON
		if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(t.SandboxID)+"/activity", nil, nil, &act); err != nil {
			data["ActivityError"] = errorText(err)
		} else {
			data["Activity"] = act
		}
	}
	var tr transcriptJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/transcript", nil, nil, &tr); err == nil {
		data["Transcript"] = tr
	} else {
		data["TranscriptError"] = errorText(err)
	}
	c.render(w, r, u, http.StatusOK, "task", data)
}

// For is how long the sandbox has been in its state.
func (a activityJSON) For() string {
	return (time.Duration(a.DurationMS) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// Took is how long the termination's sequence ran.
func (t terminationJSON) Took() string {
	return (time.Duration(t.DurationMS) * time.Millisecond).Round(time.Millisecond).String()
}

package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Tasks and the monitor: each task's monitor state and why (the activity
// summary of its sandbox), its transcript.

func (c *Console) registerTasks() {
	c.addNav(navItem{Label: "Tasks", Path: Prefix + "/tasks"})
	c.mux.HandleFunc("GET "+Prefix+"/tasks", c.authed(c.taskList))
	c.mux.HandleFunc("GET "+Prefix+"/tasks/{id}", c.authed(c.taskPage))
}

type taskJSON struct {
	ID            string     `json:"id"`
	TicketID      string     `json:"ticket_id"`
	Kind          string     `json:"kind"`
	Status        string     `json:"status"`
	FailureReason string     `json:"failure_reason"`
	SandboxID     string     `json:"sandbox_id"`
	Command       []string   `json:"command"`
	DiagnosticOf  string     `json:"diagnostic_of"`
	CreatedAt     time.Time  `json:"created_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
}

// activityJSON is the monitor's view of a task's sandbox.
type activityJSON struct {
	State         string            `json:"state"`
	Why           string            `json:"why"`
	IsAlive       bool              `json:"is_alive"`
	IsIdle        bool              `json:"is_idle"`
	WillTerminate bool              `json:"will_terminate"`
	Reason        string            `json:"reason"`
	Summary       json.RawMessage   `json:"summary"`
	Termination   json.RawMessage   `json:"termination"`
	Thresholds    map[string]string `json:"thresholds"`
	At            time.Time         `json:"at"`
}

var taskStatuses = []string{"pending", "claiming", "assigned", "running", "completed", "failed", "cancelled"}

func (c *Console) taskList(w http.ResponseWriter, r *http.Request, u *user) {
	q := url.Values{}
	in := r.URL.Query()
	for _, k := range []string{"status", "kind", "ticket_id"} {
		if v := in.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	var list struct {
		Data []taskJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/tasks", q, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "tasks", map[string]any{"Tasks": list.Data, "Statuses": taskStatuses, "Status": q.Get("status")})
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
			if len(act.Summary) > 0 {
				data["Summary"] = pretty(act.Summary)
			}
		}
	}
	var transcript json.RawMessage
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/transcript", nil, nil, &transcript); err == nil {
		data["Transcript"] = pretty(transcript)
	} else {
		data["TranscriptError"] = errorText(err)
	}
	c.render(w, r, u, http.StatusOK, "task", data)
}

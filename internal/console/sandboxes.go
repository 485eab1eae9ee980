package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Sandboxes: the list, and a sandbox's page with its state, limits,
// backups, a file browser of /workspace and an exec box.

// maxShownFile: a text file larger than this is offered for download, not
// shown.
const maxShownFile = 256 << 10

func (c *Console) registerSandboxes() {
	c.addNav(navItem{Label: "Sandboxes", Path: Prefix + "/sandboxes"})
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes", c.authed(c.sandboxList))
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}", c.authed(c.sandboxPage))
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}/files/{path...}", c.authed(c.sandboxFile))
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}/download/{path...}", c.authed(c.sandboxDownload))
	c.mux.HandleFunc("POST "+Prefix+"/sandboxes/{id}/exec", c.authed(c.sandboxExec))
	for _, action := range []string{"stop", "start", "snapshot"} {
		c.mux.HandleFunc("POST "+Prefix+"/sandboxes/{id}/"+action, c.authed(c.sandboxAction(action)))
	}
}

// sandboxJSON is the part of the API's sandbox the console shows.
type sandboxJSON struct {
	ID             string            `json:"id"`
	State          string            `json:"state"`
	Driver         string            `json:"driver"`
	Image          string            `json:"image"`
	Network        string            `json:"network"`
	Limits         map[string]any    `json:"limits"`
	SleepAfter     string            `json:"sleep_after"`
	Metadata       map[string]string `json:"metadata"`
	SessionKey     string            `json:"session_key"`
	Generation     int64             `json:"generation"`
	CreatedAt      time.Time         `json:"created_at"`
	LastActivityAt time.Time         `json:"last_activity_at"`
	StartedAt      *time.Time        `json:"started_at"`
	Runtime        *struct {
		Running       bool                      `json:"running"`
		LimitsApplied string                    `json:"limits_applied"`
		Enforcement   map[string]map[string]any `json:"enforcement"`
	} `json:"runtime"`
}

// sandboxStates are the states the list filters by, in the order of the
// state machine.
var sandboxStates = []string{"cold", "warming", "active", "stopping", "destroyed"}

func (c *Console) sandboxList(w http.ResponseWriter, r *http.Request, u *user) {
	q := url.Values{}
	state := r.URL.Query().Get("state")
	if slices.Contains(sandboxStates, state) {
		q.Set("state", state)
	} else {
		state = ""
	}
	var list struct {
		Data []sandboxJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes", q, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "sandboxes", map[string]any{"Sandboxes": list.Data, "States": sandboxStates, "State": state})
}

// fileJSON is an entry of a directory listing.
type fileJSON struct {
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	IsDir     bool      `json:"is_dir"`
	IsSymlink bool      `json:"is_symlink"`
	ModTime   time.Time `json:"mod_time"`
}

func (c *Console) sandboxPage(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	var sb sandboxJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, nil, &sb); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var backups struct {
		Data []struct {
			ID         string    `json:"id"`
			Size       int64     `json:"size"`
			Generation int64     `json:"generation"`
			CreatedAt  time.Time `json:"created_at"`
		} `json:"data"`
	}
	backupErr := ""
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/backups", nil, nil, &backups); err != nil {
		backupErr = errorText(err)
	}
	// The workspace's top level, when the sandbox runs (listing a cold
	// one would wake it).
	var files []fileJSON
	filesNote := "The sandbox is not running: start it to browse its files."
	if sb.State == "active" {
		filesNote = ""
		if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/"+apiPath("/workspace"), nil, nil, &struct {
			Data *[]fileJSON `json:"data"`
		}{&files}); err != nil {
			filesNote = errorText(err)
		}
	}
	c.render(w, r, u, http.StatusOK, "sandbox", map[string]any{
		"Sandbox": sb, "Backups": backups.Data, "BackupError": backupErr, "Files": files, "FilesNote": filesNote,
		"Dir": "/workspace", "Machine": stateMachine(sb.State), "Limits": limitRows(sb),
	})
}

// apiPath is an absolute sandbox file path as the API's route takes it:
// the leading slash encoded (a path without one is relative to
// /workspace), each segment escaped, so a slash stays a separator and
// nothing else does.
func apiPath(p string) string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "%2F" + strings.Join(segs, "/")
}

// sandboxFile shows a directory of the sandbox or a file's text.
func (c *Console) sandboxFile(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	p := "/" + strings.Trim(r.PathValue("path"), "/")
	rec, err := c.raw(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/"+apiPath(p), nil, nil)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	data := map[string]any{"ID": id, "Path": p, "Parent": path.Dir(p), "Crumbs": crumbs(p)}
	if strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		var list struct {
			Data []fileJSON `json:"data"`
		}
		if err := json.Unmarshal(rec.body.Bytes(), &list); err != nil {
			c.failAPI(w, r, u, err)
			return
		}
		data["Files"] = list.Data
	} else {
		b := rec.body.Bytes()
		data["Size"] = len(b)
		if len(b) <= maxShownFile && utf8.Valid(b) {
			data["Text"] = string(b)
		}
	}
	c.render(w, r, u, http.StatusOK, "sandbox_file", data)
}

// sandboxDownload sends a file of the sandbox as an attachment.
func (c *Console) sandboxDownload(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	p := "/" + strings.Trim(r.PathValue("path"), "/")
	rec, err := c.raw(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/"+apiPath(p), nil, nil)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	if strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		c.fail(w, r, u, http.StatusBadRequest, p+" is a directory.")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	_, _ = w.Write(rec.body.Bytes())
}

// sandboxExec runs a command in the sandbox and streams its output to the
// page as plain text, as it comes; the last line says how it ended.
func (c *Console) sandboxExec(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	cmd := strings.TrimSpace(r.PostFormValue("command"))
	if cmd == "" {
		http.Error(w, "the command is empty", http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	started := false
	err := c.streamRequest(r.Context(), u, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/exec",
		map[string]any{"command": cmd, "timeout_ms": 600000}, "", func(ev sseEvent) error {
			if !started {
				started = true
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Header().Set("X-Content-Type-Options", "nosniff")
				w.WriteHeader(http.StatusOK)
			}
			var out struct {
				Data       string `json:"data"`
				DataB64    string `json:"data_b64"`
				ExitCode   int    `json:"exit_code"`
				DurationMS int64  `json:"duration_ms"`
				TimedOut   bool   `json:"timed_out"`
				Message    string `json:"message"`
			}
			_ = json.Unmarshal(ev.Data, &out)
			switch ev.Type {
			case "stdout", "stderr":
				if out.DataB64 != "" {
					fmt.Fprintf(w, "[%d bytes of binary output]\n", len(out.DataB64)*3/4)
				} else {
					_, _ = w.Write([]byte(out.Data))
				}
			case "exit":
				fmt.Fprintf(w, "\n[exit %d after %d ms%s]\n", out.ExitCode, out.DurationMS, map[bool]string{true: ", timed out"}[out.TimedOut])
			case "error":
				fmt.Fprintf(w, "\n[error: %s]\n", out.Message)
			}
			return rc.Flush()
		})
	if err != nil && !started {
		http.Error(w, errorText(err), statusOf(err))
	}
}

// sandboxAction posts a lifecycle action and goes back to the sandbox.
func (c *Console) sandboxAction(action string) func(http.ResponseWriter, *http.Request, *user) {
	return func(w http.ResponseWriter, r *http.Request, u *user) {
		id := r.PathValue("id")
		if err := c.call(r.Context(), u, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/"+action, nil, map[string]any{}, nil); err != nil {
			c.failAPI(w, r, u, err)
			return
		}
		http.Redirect(w, r, Prefix+"/sandboxes/"+url.PathEscape(id), http.StatusSeeOther)
	}
}

// crumb is a step of a path's breadcrumbs.
type crumb struct{ Name, Path string }

func crumbs(p string) []crumb {
	var out []crumb
	cur := ""
	for s := range strings.SplitSeq(strings.Trim(p, "/"), "/") {
		if s == "" {
			continue
		}
		cur += "/" + s
		out = append(out, crumb{Name: s, Path: cur})
	}
	return out
}

// limitRow is a limit with the value in force and how it is enforced.
type limitRow struct{ Name, Asked, InForce, How string }

func limitRows(sb sandboxJSON) []limitRow {
	var names []string
	for k := range sb.Limits {
		names = append(names, k)
	}
	if sb.Runtime != nil {
		for k := range sb.Runtime.Enforcement {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.Sort(names)
	var out []limitRow
	for _, n := range names {
		row := limitRow{Name: n, Asked: fmt.Sprint(sb.Limits[n])}
		if sb.Limits[n] == nil {
			row.Asked = "default"
		}
		if sb.Runtime != nil {
			if e, ok := sb.Runtime.Enforcement[n]; ok {
				row.InForce, row.How = fmt.Sprint(e["value"]), fmt.Sprint(e["mechanism"])
				if row.InForce == "<nil>" {
					row.InForce = ""
				}
				if row.How == "<nil>" {
					row.How = fmt.Sprint(e["reason"])
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// machineState is a state of the sandbox state machine picture.
type machineState struct {
	Name    string
	X, Y    int
	Current bool
}

// machineEdge is an arrow of the picture.
type machineEdge struct{ X1, Y1, X2, Y2 int }

// stateMachine lays the sandbox state machine out for the picture, the
// current state lit.
func stateMachine(current string) map[string]any {
	pos := map[string][2]int{"cold": {70, 40}, "warming": {230, 40}, "active": {390, 40}, "stopping": {230, 120}, "destroyed": {550, 40}}
	var states []machineState
	for _, s := range sandboxStates {
		states = append(states, machineState{Name: s, X: pos[s][0], Y: pos[s][1], Current: s == current})
	}
	edge := func(a, b string) machineEdge {
		pa, pb := pos[a], pos[b]
		// From the edge of one box to the edge of the other.
		dx, dy := 0, 0
		switch {
		case pa[1] == pb[1] && pa[0] < pb[0]:
			dx = 60
		case pa[1] == pb[1]:
			dx = -60
		case pa[1] < pb[1]:
			dy = 18
		default:
			dy = -18
		}
		return machineEdge{X1: pa[0] + dx, Y1: pa[1] + dy, X2: pb[0] - dx, Y2: pb[1] - dy}
	}
	return map[string]any{"States": states, "Edges": []machineEdge{
		edge("cold", "warming"), edge("warming", "active"), edge("active", "stopping"), edge("stopping", "cold"), edge("active", "destroyed"),
	}}
}

// errorText is an error as the page says it.
func errorText(err error) string {
	if ae, ok := err.(*apiError); ok {
		return ae.Message
	}
	return err.Error()
}

func statusOf(err error) int {
	if ae, ok := err.(*apiError); ok {
		return ae.Status
	}
	return http.StatusBadGateway
}

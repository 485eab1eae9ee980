package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel"
)

// Sandboxes: the list, and a sandbox's page with its state and the times
// of its transitions, limits, backups, a file browser of /workspace and an
// exec box.

// maxShownFile: a text file larger than this is offered for download, not
// shown.
const maxShownFile = 256 << 10

func (c *Console) registerSandboxes() {
	c.addNav(navItem{Label: "Sandboxes", Path: Prefix + "/sandboxes"})
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes", c.authed(c.sandboxList))
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}", c.authed(c.sandboxPage))
	// The file's path is a query parameter, sent to the API as it was
	// typed: a path in the URL's path would be cleaned ("a/../b" → "b") by
	// the router, or by the browser, before the API could refuse it.
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}/files", c.authed(c.sandboxFile))
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}/download", c.authed(c.sandboxDownload))
	c.mux.HandleFunc("POST "+Prefix+"/sandboxes/{id}/exec", c.authed(c.sandboxExec))
	for _, action := range []string{"stop", "start", "snapshot"} {
		c.mux.HandleFunc("POST "+Prefix+"/sandboxes/{id}/"+action, c.authed(c.sandboxAction(action)))
	}
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}/destroy", c.authed(c.sandboxDestroyPage))
	c.mux.HandleFunc("POST "+Prefix+"/sandboxes/{id}/destroy", c.authed(c.sandboxDestroy))
}

// sandboxJSON is the API's sandbox, as the SDK reads it, with what the
// pages ask of it.
type sandboxJSON struct{ agentkernel.Sandbox }

// MetaSummary is the sandbox's metadata on one line: the first keys in
// order, long values cut.
func (s sandboxJSON) MetaSummary() string {
	const shown = 3
	keys := slices.Sorted(maps.Keys(s.Metadata))
	var parts []string
	for i, k := range keys {
		if i == shown {
			parts = append(parts, fmt.Sprintf("+%d more", len(keys)-shown))
			break
		}
		v := s.Metadata[k]
		if utf8.RuneCountInString(v) > 40 {
			v = string([]rune(v)[:40]) + "…"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ", ")
}

// MetaKeys are the metadata's keys in order.
func (s sandboxJSON) MetaKeys() []string { return slices.Sorted(maps.Keys(s.Metadata)) }

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
	Mode      uint32    `json:"mode"`
	IsDir     bool      `json:"is_dir"`
	IsSymlink bool      `json:"is_symlink"`
	ModTime   time.Time `json:"mod_time"`
}

// Perm is the entry's permission bits as ls shows them.
func (f fileJSON) Perm() string {
	const rwx = "rwxrwxrwx"
	b := []byte("---------")
	for i := range 9 {
		if f.Mode&(1<<(8-i)) != 0 {
			b[i] = rwx[i]
		}
	}
	return string(b)
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
			ExpiresAt  time.Time `json:"expires_at"`
		} `json:"data"`
	}
	backupErr := ""
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/backups", nil, nil, &backups); err != nil {
		backupErr = errorText(err)
	}
	var history struct {
		Data []transitionJSON `json:"data"`
	}
	historyErr := ""
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/transitions", nil, nil, &history); err != nil {
		historyErr = errorText(err)
	}
	// The workspace's top level, when the sandbox runs (listing a cold
	// one would wake it).
	var files []fileJSON
	filesNote := "The sandbox is not running: start it to browse its files (reading a file wakes it)."
	if sb.State == "active" {
		filesNote = ""
		if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/"+apiFilePath("/workspace"), nil, nil, &struct {
			Data *[]fileJSON `json:"data"`
		}{&files}); err != nil {
			filesNote = errorText(err)
		}
	}
	c.render(w, r, u, http.StatusOK, "sandbox", map[string]any{
		"Sandbox": sb, "Backups": backups.Data, "BackupError": backupErr, "Files": files, "FilesNote": filesNote,
		"Machine": stateMachine(sb.State), "Limits": limitRows(sb), "Transitions": transitions(sb, history.Data, time.Now()), "TransitionsError": historyErr,
	})
}

// apiFilePath is a sandbox file path as the API's files route takes it:
// escaped whole, its slashes too (%2F), so the path reaches the API as it
// was written — a leading slash names an absolute path, none a path in
// /workspace — and the API alone decides what it accepts: no router
// cleans a ".." out of it on the way.
func apiFilePath(p string) string { return url.PathEscape(p) }

// filePath is the path a file page asks for: the path query parameter as
// written, /workspace when there is none.
func filePath(r *http.Request) string {
	if p := r.URL.Query().Get("path"); p != "" {
		return p
	}
	return "/workspace"
}

// sandboxFile shows a directory of the sandbox or a file's text; a path
// the API refuses shows its refusal.
func (c *Console) sandboxFile(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	p := filePath(r)
	// The sandbox first: another tenant's, or an unknown one, is not
	// found, whatever the path.
	var sb sandboxJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, nil, &sb); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	data := map[string]any{"ID": id, "Path": p, "State": sb.State}
	rec, err := c.raw(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/"+apiFilePath(p), nil, nil)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			c.failAPI(w, r, u, err)
			return
		}
		// What the API says of the path (refused, not found, too large…),
		// with its status.
		data["Refused"] = ae.Message
		c.render(w, r, u, ae.Status, "sandbox_file", data)
		return
	}
	// The API accepted the path, so it has no ".." and cleaning it only
	// names it as the API did.
	shown := p
	if !path.IsAbs(shown) {
		shown = path.Join("/workspace", shown)
	}
	shown = path.Clean(shown)
	data["Shown"], data["Parent"], data["Crumbs"] = shown, path.Dir(shown), crumbs(shown)
	if strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		var list struct {
			Data []fileJSON `json:"data"`
		}
		if err := json.Unmarshal(rec.body.Bytes(), &list); err != nil {
			c.failAPI(w, r, u, err)
			return
		}
		data["IsDir"], data["Files"] = true, list.Data
	} else {
		b := rec.body.Bytes()
		data["Size"] = len(b)
		if len(b) <= maxShownFile && utf8.Valid(b) {
			data["Text"] = string(b)
			data["IsText"] = true
		}
	}
	c.render(w, r, u, http.StatusOK, "sandbox_file", data)
}

// sandboxDownload sends a file of the sandbox as an attachment.
func (c *Console) sandboxDownload(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	p := filePath(r)
	rec, err := c.raw(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/"+apiFilePath(p), nil, nil)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	if strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		c.fail(w, r, u, http.StatusBadRequest, p+" is a directory: only files download.")
		return
	}
	name := path.Base(p)
	if name == "/" || name == "." {
		name = "file"
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Content-Length", fmt.Sprint(rec.body.Len()))
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

// sandboxDestroyPage asks to confirm a destroy: a page of its own, so no
// single click on the sandbox's page destroys it.
func (c *Console) sandboxDestroyPage(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	var sb sandboxJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, nil, &sb); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "sandbox_destroy", map[string]any{"Sandbox": sb})
}

// sandboxDestroy destroys the sandbox (the API takes a final snapshot of
// a running one first) when the form confirms its id.
func (c *Console) sandboxDestroy(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	if r.PostFormValue("confirm") != id {
		c.fail(w, r, u, http.StatusBadRequest, "Destroy is confirmed from its own page: nothing was destroyed.")
		return
	}
	if err := c.call(r.Context(), u, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(id), nil, nil, nil); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	http.Redirect(w, r, Prefix+"/sandboxes/"+url.PathEscape(id), http.StatusSeeOther)
}

// crumb is a step of a path's breadcrumbs.
type crumb struct{ Name, Path string }

func crumbs(p string) []crumb {
	out := []crumb{{Name: "/", Path: "/"}}
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
type limitRow struct{ Name, Set, InForce, How string }

func limitRows(sb sandboxJSON) []limitRow {
	set := map[string]float64{"memory_mb": float64(sb.Limits.MemoryMB), "pids": float64(sb.Limits.Pids), "cpus": sb.Limits.CPUs}
	names := slices.Collect(maps.Keys(set))
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
		row := limitRow{Name: n, Set: "default"}
		if v := set[n]; v != 0 {
			row.Set = fmt.Sprint(v)
		}
		if sb.Runtime != nil {
			if e, ok := sb.Runtime.Enforcement[n]; ok {
				if e.Value != 0 {
					row.InForce = fmt.Sprint(e.Value)
				}
				row.How = e.Mechanism
				if e.Reason != "" {
					row.How += " (" + e.Reason + ")"
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// transition is a step of the sandbox's lifecycle, a row of its page.
type transition struct {
	// From and To are states; From is "" when the state left is not
	// known (the first entry, or after a gap).
	From, To string
	At       time.Time
	// Took is how long the state left lasted; For how long the state
	// entered has lasted, when it is the current one.
	Took, For string
	Note      string
	// Generation is the workspace generation at the transition.
	Generation int64
	// Gap stands for transitions the daemon no longer keeps.
	Gap bool
}

// transitionJSON is an entry of GET /v1/sandboxes/{id}/transitions.
type transitionJSON = agentkernel.SandboxTransition

// transitions turns the sandbox's state history (the API's, oldest first,
// the newest 200 kept) into the page's rows: what each step was and how
// long the state before it lasted.
func transitions(sb sandboxJSON, history []transitionJSON, now time.Time) []transition {
	var out []transition
	if len(history) == 0 {
		// A sandbox older than the history that has not changed since.
		return []transition{{To: sb.State, At: sb.UpdatedAt, Generation: sb.Generation,
			Note: "no history yet: the sandbox predates it (this is its last change)", For: duration(now.Sub(sb.UpdatedAt))}}
	}
	if first := history[0]; first.Seq > 1 {
		out = append(out, transition{Gap: true, Note: fmt.Sprintf("%d earlier transition(s) not kept: the daemon keeps a sandbox's newest 200", first.Seq-1)})
	}
	for i, h := range history {
		t := transition{To: h.State, At: h.At, Generation: h.Generation, Note: transitionNote(h, i, history, sb.CreatedAt)}
		if i > 0 {
			prev := history[i-1]
			t.From = prev.State
			if !h.At.Before(prev.At) {
				t.Took = duration(h.At.Sub(prev.At))
			}
		}
		out = append(out, t)
	}
	if last := &out[len(out)-1]; last.To == sb.State && sb.State != "destroyed" {
		last.For = duration(now.Sub(last.At))
	}
	return out
}

// transitionNote says what made the step.
func transitionNote(h transitionJSON, i int, history []transitionJSON, created time.Time) string {
	switch {
	case h.Seq == 1 && h.At.Sub(created).Abs() < time.Millisecond:
		return "created"
	case h.Seq == 1:
		return "history recorded from here: the sandbox predates it"
	}
	from := ""
	if i > 0 {
		from = history[i-1].State
	}
	switch h.State {
	case "warming":
		return fmt.Sprintf("instance started (workspace generation %d)", h.Generation)
	case "active":
		if from == "warming" {
			return "warm-up done"
		}
		return fmt.Sprintf("instance started warm (workspace generation %d)", h.Generation)
	case "stopping":
		return "stop began: snapshot, verify, then stop"
	case "cold":
		return "stopped"
	case "destroyed":
		return "destroyed"
	}
	return ""
}

// duration is a span for people: 340 ms, 2.4 s, 3m 12s, 5h 2m.
func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours()/24), int(d.Hours())%24)
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

package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

type sandboxJSON struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	State          string            `json:"state"`
	Driver         string            `json:"driver"`
	Image          string            `json:"image"`
	Network        string            `json:"network"`
	Limits         sandbox.Limits    `json:"limits"`
	SleepAfter     string            `json:"sleep_after"`
	Metadata       map[string]string `json:"metadata"`
	Environment    string            `json:"environment,omitempty"`
	SessionKey     string            `json:"session_key"`
	Generation     int64             `json:"generation"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	LastActivityAt time.Time         `json:"last_activity_at"`
	// StartedAt, WarmedAt and StoppingAt are when the running instance
	// started (cold → warming), finished its warm-up (→ active) and began
	// to stop (→ stopping): the facts the state is derived from, cleared
	// when the instance is gone.
	StartedAt   *time.Time `json:"started_at,omitempty"`
	WarmedAt    *time.Time `json:"warmed_at,omitempty"`
	StoppingAt  *time.Time `json:"stopping_at,omitempty"`
	DestroyedAt *time.Time `json:"destroyed_at,omitempty"`
	// Runtime is the driver's view of a running instance (GET only).
	Runtime *runtimeJSON `json:"runtime,omitempty"`
}

// runtimeJSON: Enforcement says, per limit, the value in force and the
// mechanism (cgroup v2, cgroup v1, rlimit, docker), or "not enforced" and
// why.
type runtimeJSON struct {
	Running       bool                           `json:"running"`
	LimitsApplied string                         `json:"limits_applied"`
	Enforcement   map[string]sandbox.Enforcement `json:"enforcement,omitempty"`
	Detail        map[string]string              `json:"detail,omitempty"`
}

// reservedMetadataPrefix starts the sandbox metadata keys only agentkernel
// sets.
const reservedMetadataPrefix = "agentkernel."

func toSandboxJSON(in *sandbox.Info) sandboxJSON {
	lim := in.EffectiveLimits
	md := in.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return sandboxJSON{
		ID: in.ID, Type: "sandbox", State: string(in.State), Driver: in.Driver, Image: in.Image,
		Network: in.Network, Limits: lim, SleepAfter: in.SleepAfter.String(), Metadata: md,
		Environment: in.Environment, SessionKey: in.SessionKey, Generation: in.Generation,
		CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt, LastActivityAt: in.LastActivityAt,
		StartedAt: in.StartedAt, WarmedAt: in.WarmedAt, StoppingAt: in.StoppingAt, DestroyedAt: in.DestroyedAt,
	}
}

type backupJSON struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	SandboxID   string    `json:"sandbox_id"`
	Environment string    `json:"environment,omitempty"`
	SessionKey  string    `json:"session_key"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Stats       any       `json:"stats"`
	Generation  int64     `json:"generation"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

func toBackupJSON(b *store.Backup) backupJSON {
	var stats any
	_ = jsonUnmarshal(b.Stats, &stats)
	return backupJSON{ID: b.ID, Type: "backup", SandboxID: b.SandboxID, Environment: b.Environment,
		SessionKey: b.SessionKey, Size: b.Size, SHA256: b.SHA256, Stats: stats, Generation: b.Generation,
		CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt}
}

func (s *Server) registerSandboxRoutes() {
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/sandboxes", a(s.createSandbox))
	s.mux.HandleFunc("GET /v1/sandboxes", a(s.query(s.listSandboxes, "state")))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}", a(s.sandboxNode(s.noQuery(s.getSandbox))))
	s.mux.HandleFunc("DELETE /v1/sandboxes/{id}", a(s.sandboxNode(s.destroySandbox)))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/stop", a(s.sandboxNode(s.stopSandbox)))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/start", a(s.sandboxNode(s.startSandbox)))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/snapshot", a(s.sandboxNode(s.snapshotSandbox)))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/backups", a(s.sandboxNode(s.noQuery(s.listBackups))))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/transitions", a(s.noQuery(s.listTransitions)))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/exec", a(s.sandboxNode(s.execSandbox)))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/processes", a(s.sandboxNode(s.noQuery(s.listProcesses))))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}/output", a(s.sandboxNode(s.query(s.processOutput, "stream", "offset", "limit"))))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/processes/{pid}/kill", a(s.sandboxNode(s.killProcess)))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/files/{path...}", a(s.sandboxNode(s.readFile)))
	s.mux.HandleFunc("PUT /v1/sandboxes/{id}/files/{path...}", a(s.sandboxNode(s.writeFile)))
	s.mux.HandleFunc("DELETE /v1/sandboxes/{id}/files/{path...}", a(s.sandboxNode(s.removeFile)))
}

// sandboxError maps the sandbox layer's errors to API errors.
func sandboxError(id string, err error) error {
	var ue *sandbox.UnavailableError
	var le *sandbox.LimitError
	var ge *guest.Error
	switch {
	case errors.As(err, &le):
		return BadRequest("field %q = %s: %s", "limits."+le.Field, le.Value, le.Reason)
	case errors.Is(err, sandbox.ErrHostNetwork):
		return Errorf(http.StatusForbidden, TypePermission, "%s", sandbox.ErrHostNetwork)
	case errors.Is(err, store.ErrNotFound):
		return NotFound("sandbox", id)
	case errors.As(err, &ue):
		return Errorf(http.StatusServiceUnavailable, TypeUnavailable, "%s", ue.Error())
	case errors.Is(err, sandbox.ErrUnavailable):
		return Errorf(http.StatusServiceUnavailable, TypeUnavailable, "%s", err)
	case errors.Is(err, sandbox.ErrUnknownDriver), errors.Is(err, sandbox.ErrUnknownImage), errors.Is(err, sandbox.ErrInvalid):
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "%s", err)
	case errors.Is(err, sandbox.ErrDestroyed):
		return Errorf(http.StatusConflict, TypeConflict, "sandbox %q is destroyed", id)
	case errors.As(err, &ge) && ge.Status == http.StatusBadRequest:
		// The guest refused the request itself (a cwd that is not a
		// directory, argv and shell both set): the caller's mistake.
		return BadRequest("%s", ge.Message)
	}
	return err
}

// createSandboxRequest is the body of POST /v1/sandboxes.
type createSandboxRequest struct {
	Driver      string                `json:"driver"`
	Image       string                `json:"image"`
	SleepAfter  string                `json:"sleep_after"`
	Network     string                `json:"network"`
	Limits      sandbox.LimitsRequest `json:"limits"`
	Metadata    map[string]string     `json:"metadata"`
	Environment string                `json:"environment"`
	SessionKey  string                `json:"session_key"`
	Start       *bool                 `json:"start"`
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var in createSandboxRequest
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	var sleep time.Duration
	if in.SleepAfter != "" {
		d, err := time.ParseDuration(in.SleepAfter)
		if err != nil {
			s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"sleep_after\": %q is not a duration (examples: 30s, 5m)", in.SleepAfter))
			return
		}
		sleep = d
	}
	if len(in.Metadata) > 64 {
		s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"metadata\" has %d keys; the limit is 64", len(in.Metadata)))
		return
	}
	for k, v := range in.Metadata {
		if err := firstErr(maxLen("metadata key", k, 64), maxLen("metadata."+k, v, 512)); err != nil {
			s.writeError(w, r, err)
			return
		}
		// agentkernel's own marks (e.g. a class's shared object sandbox)
		// are the runtime's to set: a sandbox made through the API must
		// not pass for one.
		if strings.HasPrefix(k, reservedMetadataPrefix) {
			s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"metadata\": key %q: keys starting with %q are reserved for agentkernel", k, reservedMetadataPrefix))
			return
		}
	}
	info, err := s.sandboxes.Create(r.Context(), sandbox.CreateParams{
		TenantID: PrincipalFrom(r.Context()).TenantID, Driver: in.Driver, Image: in.Image, Network: in.Network,
		Limits: in.Limits, SleepAfter: sleep, Metadata: in.Metadata, Environment: in.Environment,
		SessionKey: in.SessionKey, Cold: in.Start != nil && !*in.Start,
	})
	if err != nil {
		s.writeError(w, r, sandboxError("", err))
		return
	}
	writeJSON(w, http.StatusCreated, toSandboxJSON(info))
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	if state != "" && !sandbox.ValidState(state) {
		s.writeError(w, r, BadRequest("query parameter \"state\": %q is not a state (cold, warming, active, stopping, destroyed)", state))
		return
	}
	list, err := s.sandboxes.List(r.Context(), PrincipalFrom(r.Context()).TenantID, sandbox.State(state))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listJSON[sandboxJSON]{Data: make([]sandboxJSON, 0, len(list))}
	for _, in := range list {
		out.Data = append(out.Data, toSandboxJSON(in))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := s.sandboxes.Get(r.Context(), PrincipalFrom(r.Context()).TenantID, id)
	if err != nil {
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	out := toSandboxJSON(in)
	if st, err := s.sandboxes.Inspect(r.Context(), PrincipalFrom(r.Context()).TenantID, id); err == nil && st != nil {
		out.Runtime = &runtimeJSON{Running: st.Running, LimitsApplied: st.LimitsApplied, Enforcement: st.Enforcement, Detail: st.Detail}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) sandboxOp(op func(r *http.Request, tenant, id string) (*sandbox.Info, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		in, err := op(r, PrincipalFrom(r.Context()).TenantID, id)
		if err != nil {
			s.writeError(w, r, sandboxError(id, err))
			return
		}
		writeJSON(w, http.StatusOK, toSandboxJSON(in))
	}
}

func (s *Server) destroySandbox(w http.ResponseWriter, r *http.Request) {
	s.sandboxOp(func(r *http.Request, t, id string) (*sandbox.Info, error) {
		return s.sandboxes.Destroy(r.Context(), t, id)
	})(w, r)
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	s.sandboxOp(func(r *http.Request, t, id string) (*sandbox.Info, error) {
		return s.sandboxes.Hibernate(r.Context(), t, id)
	})(w, r)
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	s.sandboxOp(func(r *http.Request, t, id string) (*sandbox.Info, error) {
		return s.sandboxes.Wake(r.Context(), t, id)
	})(w, r)
}

func (s *Server) snapshotSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b, err := s.sandboxes.Snapshot(r.Context(), PrincipalFrom(r.Context()).TenantID, id)
	if err != nil {
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	writeJSON(w, http.StatusCreated, toBackupJSON(b))
}

func (s *Server) listBackups(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	bs, err := s.sandboxes.Backups(r.Context(), PrincipalFrom(r.Context()).TenantID, id)
	if err != nil {
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	out := listJSON[backupJSON]{Data: make([]backupJSON, 0, len(bs))}
	for _, b := range bs {
		out.Data = append(out.Data, toBackupJSON(b))
	}
	writeJSON(w, http.StatusOK, out)
}

type transitionJSON struct {
	Seq        int64     `json:"seq"`
	State      string    `json:"state"`
	At         time.Time `json:"at"`
	Generation int64     `json:"generation"`
}

// listTransitions serves a sandbox's state history, oldest first.
func (s *Server) listTransitions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	trs, err := s.sandboxes.Transitions(r.Context(), PrincipalFrom(r.Context()).TenantID, id)
	if err != nil {
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	out := listJSON[transitionJSON]{Data: make([]transitionJSON, 0, len(trs))}
	for _, tr := range trs {
		out.Data = append(out.Data, transitionJSON{Seq: tr.Seq, State: tr.State, At: tr.At, Generation: tr.Generation})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ps, err := s.sandboxes.ListProcesses(r.Context(), PrincipalFrom(r.Context()).TenantID, id)
	if err != nil {
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	if ps == nil {
		ps = []guest.ProcessInfo{}
	}
	writeJSON(w, http.StatusOK, listJSON[guest.ProcessInfo]{Data: ps})
}

func (s *Server) processOutput(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	req := guest.OutputRequest{ID: r.PathValue("pid"), Stream: q.Get("stream")}
	if req.Stream != "" && req.Stream != "stdout" && req.Stream != "stderr" {
		s.writeError(w, r, BadRequest("query parameter \"stream\" must be stdout or stderr"))
		return
	}
	for name, dst := range map[string]*int64{"offset": &req.Offset, "limit": &req.Limit} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.writeError(w, r, BadRequest("query parameter %q must be a non-negative integer", name))
				return
			}
			*dst = n
		}
	}
	out, err := s.sandboxes.ProcessOutput(r.Context(), PrincipalFrom(r.Context()).TenantID, id, req)
	if err != nil {
		if guest.IsNotFound(err) {
			s.writeError(w, r, NotFound("process", req.ID))
			return
		}
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) {
	id, pid := r.PathValue("id"), r.PathValue("pid")
	p, err := s.sandboxes.KillProcess(r.Context(), PrincipalFrom(r.Context()).TenantID, id, pid)
	if err != nil {
		if guest.IsNotFound(err) {
			s.writeError(w, r, NotFound("process", pid))
			return
		}
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, p)
}

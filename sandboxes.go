package agentkernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Sandbox is an isolated place to run commands, with a persistent
// /workspace that survives hibernation.
type Sandbox struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	State          string            `json:"state"` // cold, warming, active, stopping, destroyed
	Driver         string            `json:"driver"`
	Image          string            `json:"image"`
	Network        string            `json:"network"`
	Limits         SandboxLimits     `json:"limits"`
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
	// to stop (→ stopping); nil when the instance is not there or has not
	// got that far.
	StartedAt   *time.Time `json:"started_at,omitempty"`
	WarmedAt    *time.Time `json:"warmed_at,omitempty"`
	StoppingAt  *time.Time `json:"stopping_at,omitempty"`
	DestroyedAt *time.Time `json:"destroyed_at,omitempty"`
	// Runtime is the driver's view of the running instance (Get only).
	Runtime *SandboxRuntime `json:"runtime,omitempty"`
}

// SandboxRuntime says whether the instance runs and how its limits are
// enforced: LimitsApplied overall ("cgroup", "rlimit", "docker" or "none"),
// Enforcement per limit ("memory_mb", "pids", "cpus").
type SandboxRuntime struct {
	Running       bool                        `json:"running"`
	LimitsApplied string                      `json:"limits_applied"`
	Enforcement   map[string]LimitEnforcement `json:"enforcement,omitempty"`
	Detail        map[string]string           `json:"detail,omitempty"`
}

// LimitEnforcement is how one limit of a started sandbox is enforced.
type LimitEnforcement struct {
	// Value is the limit in force, read back from the kernel or the engine
	// where the mechanism allows (0 when not enforced).
	Value float64 `json:"value,omitempty"`
	// Mechanism is "cgroup v2", "cgroup v1", "rlimit", "docker" or
	// "not enforced".
	Mechanism string `json:"mechanism"`
	// Reason says why a limit is not enforced, or what the mechanism bounds.
	Reason string `json:"reason,omitempty"`
}

// SandboxLimits are resource limits. Every sandbox has all three: in a
// request a zero field takes the daemon's default ([sandbox] memory_mb,
// pids, cpus), and a value outside the minimum and the operator's maximum
// is a 400 naming the bound. In a Sandbox they are the limits in effect.
type SandboxLimits struct {
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
}

// SandboxCreateParams creates a sandbox. Empty fields take the daemon's
// [sandbox] defaults.
type SandboxCreateParams struct {
	Driver      string            `json:"driver,omitempty"` // "process" or "docker"
	Image       string            `json:"image,omitempty"`
	SleepAfter  string            `json:"sleep_after,omitempty"` // e.g. "5m"
	Network     string            `json:"network,omitempty"`     // "none" or "host"
	Limits      *SandboxLimits    `json:"limits,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Environment string            `json:"environment,omitempty"`
	SessionKey  string            `json:"session_key,omitempty"`
	// Start=false leaves the sandbox cold until its first call.
	Start *bool `json:"start,omitempty"`
}

// ExecParams runs a command: Command (a shell string) or Argv.
type ExecParams struct {
	Command    string            `json:"command,omitempty"`
	Argv       []string          `json:"argv,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	TimeoutMS  int64             `json:"timeout_ms,omitempty"`
	Background bool              `json:"background,omitempty"`
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	Truncated  bool   `json:"truncated"`
	// ProcessID is set for background commands.
	ProcessID string `json:"process_id,omitempty"`
}

// Backup is a verified workspace snapshot.
type Backup struct {
	ID         string         `json:"id"`
	SandboxID  string         `json:"sandbox_id"`
	Size       int64          `json:"size"`
	SHA256     string         `json:"sha256"`
	Stats      map[string]any `json:"stats"`
	Generation int64          `json:"generation"`
	CreatedAt  time.Time      `json:"created_at"`
	ExpiresAt  time.Time      `json:"expires_at"`
}

// SandboxTransition is one entry of a sandbox's state history.
type SandboxTransition struct {
	// Seq numbers the sandbox's transitions from 1.
	Seq int64 `json:"seq"`
	// State is the state entered: cold, warming, active, stopping or
	// destroyed.
	State string `json:"state"`
	// At is when: the time of the fact that made the state.
	At time.Time `json:"at"`
	// Generation is the workspace generation at the transition.
	Generation int64 `json:"generation"`
}

// SandboxesService manages sandboxes.
type SandboxesService struct{ c *Client }

func sbPath(id string, rest ...string) string {
	p := "/v1/sandboxes/" + pathSegment(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Create makes a sandbox (warm unless Start is false).
func (s *SandboxesService) Create(ctx context.Context, p SandboxCreateParams) (*Sandbox, error) {
	var out Sandbox
	return &out, s.c.do(ctx, http.MethodPost, "/v1/sandboxes", p, &out)
}

// Get returns one sandbox.
func (s *SandboxesService) Get(ctx context.Context, id string) (*Sandbox, error) {
	var out Sandbox
	return &out, s.c.do(ctx, http.MethodGet, sbPath(id), nil, &out)
}

// List returns the caller's sandboxes, optionally in one state.
func (s *SandboxesService) List(ctx context.Context, state string) ([]Sandbox, error) {
	var out struct {
		Data []Sandbox `json:"data"`
	}
	p := "/v1/sandboxes"
	if state != "" {
		p += "?state=" + url.QueryEscape(state)
	}
	return out.Data, s.c.do(ctx, http.MethodGet, p, nil, &out)
}

// Stop hibernates now: snapshot, verify, stop.
func (s *SandboxesService) Stop(ctx context.Context, id string) (*Sandbox, error) {
	var out Sandbox
	return &out, s.c.do(ctx, http.MethodPost, sbPath(id, "stop"), nil, &out)
}

// Start wakes now.
func (s *SandboxesService) Start(ctx context.Context, id string) (*Sandbox, error) {
	var out Sandbox
	return &out, s.c.do(ctx, http.MethodPost, sbPath(id, "start"), nil, &out)
}

// Snapshot takes a verified backup without stopping.
func (s *SandboxesService) Snapshot(ctx context.Context, id string) (*Backup, error) {
	var out Backup
	return &out, s.c.do(ctx, http.MethodPost, sbPath(id, "snapshot"), nil, &out)
}

// Backups lists a sandbox's backups, newest first.
func (s *SandboxesService) Backups(ctx context.Context, id string) ([]Backup, error) {
	var out struct {
		Data []Backup `json:"data"`
	}
	return out.Data, s.c.do(ctx, http.MethodGet, sbPath(id, "backups"), nil, &out)
}

// Transitions returns the sandbox's state history, oldest first: its
// newest 200 state changes, with when each happened.
func (s *SandboxesService) Transitions(ctx context.Context, id string) ([]SandboxTransition, error) {
	var out struct {
		Data []SandboxTransition `json:"data"`
	}
	return out.Data, s.c.do(ctx, http.MethodGet, sbPath(id, "transitions"), nil, &out)
}

// Delete takes a final snapshot and destroys the sandbox.
func (s *SandboxesService) Delete(ctx context.Context, id string) (*Sandbox, error) {
	var out Sandbox
	return &out, s.c.do(ctx, http.MethodDelete, sbPath(id), nil, &out)
}

// Exec runs a command and returns its collected output.
func (s *SandboxesService) Exec(ctx context.Context, id string, p ExecParams) (*ExecResult, error) {
	var out ExecResult
	return &out, s.c.do(ctx, http.MethodPost, sbPath(id, "exec"), p, &out)
}

// ExecStream runs a command and writes its output to stdout and stderr as
// it arrives (SSE).
func (s *SandboxesService) ExecStream(ctx context.Context, id string, p ExecParams, stdout, stderr io.Writer) (*ExecResult, error) {
	body, _ := json.Marshal(p)
	req, err := s.c.newRequest(ctx, http.MethodPost, sbPath(id, "exec"), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res *ExecResult
	err = readSSE(resp.Body, func(event string, data []byte) error {
		switch event {
		case "stdout", "stderr":
			var c struct {
				Data    string `json:"data"`
				DataB64 string `json:"data_b64"`
			}
			if err := json.Unmarshal(data, &c); err != nil {
				return err
			}
			b := []byte(c.Data)
			if c.DataB64 != "" {
				if b, err = base64.StdEncoding.DecodeString(c.DataB64); err != nil {
					return err
				}
			}
			w := stdout
			if event == "stderr" {
				w = stderr
			}
			_, err := w.Write(b)
			return err
		case "exit":
			res = &ExecResult{}
			return json.Unmarshal(data, res)
		case "error":
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(data, &e)
			return &Error{StatusCode: 503, Type: "sandbox_unavailable", Message: e.Message}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("the exec stream ended without an exit event (the daemon stopped or the connection broke); the command's outcome is unknown")
	}
	return res, nil
}

// readSSE calls fn for each event of a text/event-stream body.
func readSSE(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 32<<20)
	var event string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event != "" || len(data) > 0 {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	return sc.Err()
}

// filePath escapes each segment, "." and ".." included, so the daemon sees
// the path exactly as given and judges it (it refuses ".."); an absolute
// path is sent with its leading slash encoded. Empty segments ("a//b",
// a trailing "/") name nothing and are dropped.
func filePath(id, p string) string {
	abs := strings.HasPrefix(p, "/")
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, pathSegment(s))
		}
	}
	enc := strings.Join(segs, "/")
	if abs {
		enc = "%2F" + enc
	}
	return sbPath(id, "files") + "/" + enc
}

// ReadFile reads a file (relative to /workspace unless absolute).
func (s *SandboxesService) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	req, err := s.c.newRequest(ctx, http.MethodGet, filePath(id, path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// WriteFile writes a file (parents are created) with mode (0 = 0644).
func (s *SandboxesService) WriteFile(ctx context.Context, id, path string, data io.Reader, mode uint32) error {
	p := filePath(id, path)
	if mode != 0 {
		p += fmt.Sprintf("?mode=%o", mode)
	}
	req, err := s.c.newRequest(ctx, http.MethodPut, p, data)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.c.send(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// DeleteFile removes a file (or a directory with recursive).
func (s *SandboxesService) DeleteFile(ctx context.Context, id, path string, recursive bool) error {
	p := filePath(id, path)
	if recursive {
		p += "?recursive=true"
	}
	return s.c.do(ctx, http.MethodDelete, p, nil, nil)
}

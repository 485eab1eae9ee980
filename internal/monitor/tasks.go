package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// ErrInvalidTask marks bad task parameters; the message names the field.
var ErrInvalidTask = errors.New("invalid task")

// SandboxSpec is the sandbox a task runs in (the sandbox API's fields).
type SandboxSpec struct {
	Driver  string `json:"driver,omitempty"`
	Image   string `json:"image,omitempty"`
	Network string `json:"network,omitempty"`
	Limits  struct {
		MemoryMB int64   `json:"memory_mb,omitempty"`
		Pids     int64   `json:"pids,omitempty"`
		CPUs     float64 `json:"cpus,omitempty"`
	} `json:"limits,omitzero"`
	// WorkspaceFrom is the sandbox whose workspace a diagnostic's sandbox
	// starts with (a clone taken at launch; the claim made sure that
	// sandbox was stopped).
	WorkspaceFrom string `json:"workspace_from,omitempty"`
}

// CreateParams is the sandbox a task of tenant runs in. The monitor's
// sleep_after and metadata are added at launch.
func (spec SandboxSpec) CreateParams(tenant string) sandbox.CreateParams {
	return sandbox.CreateParams{
		TenantID: tenant, Driver: spec.Driver, Image: spec.Image, Network: spec.Network,
		Limits: sandbox.Limits{MemoryMB: spec.Limits.MemoryMB, Pids: spec.Limits.Pids, CPUs: spec.Limits.CPUs}.Request(),
	}
}

// CreateTaskParams creates an agent task.
type CreateTaskParams struct {
	TenantID       string
	TicketID       string
	Command        []string
	Env            map[string]string
	Sandbox        SandboxSpec
	TranscriptPath string
}

// CreateTask validates and records a task (pending) and launches it at once
// when the service runs; otherwise the next check picks it up.
func (s *Service) CreateTask(ctx context.Context, p CreateTaskParams) (*store.Task, error) {
	if len(p.Command) == 0 || p.Command[0] == "" {
		return nil, fmt.Errorf("%w: field \"command\" is required: the agent's argv, e.g. [\"/bin/sh\", \"/workspace/agent.sh\"]", ErrInvalidTask)
	}
	if len(p.Command) > 256 {
		return nil, fmt.Errorf("%w: field \"command\" has %d arguments; the limit is 256", ErrInvalidTask, len(p.Command))
	}
	if len(p.Env) > 128 {
		return nil, fmt.Errorf("%w: field \"env\" has %d variables; the limit is 128", ErrInvalidTask, len(p.Env))
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("%w: field \"env\": %q is not a variable name", ErrInvalidTask, k)
		}
	}
	if tp := p.TranscriptPath; tp != "" && (!path.IsAbs(tp) || strings.Contains(tp, "..")) {
		return nil, fmt.Errorf("%w: field \"transcript_path\": %q must be an absolute path inside the sandbox without \"..\"", ErrInvalidTask, tp)
	}
	if p.Sandbox.WorkspaceFrom != "" {
		// Only a diagnostic starts with a clone, of its own workflow's
		// workspace, once the monitor has made sure it is stopped.
		return nil, fmt.Errorf("%w: field \"sandbox.workspace_from\" is set by the monitor for diagnostics only; leave it out", ErrInvalidTask)
	}
	if p.TicketID != "" {
		t, err := s.st.GetTicket(ctx, p.TicketID)
		if err != nil || t.TenantID != p.TenantID {
			return nil, fmt.Errorf("ticket %q: %w", p.TicketID, store.ErrNotFound)
		}
	}
	cmd, _ := json.Marshal(p.Command)
	env, _ := json.Marshal(p.Env)
	if p.Env == nil {
		env = []byte("{}")
	}
	spec, _ := json.Marshal(p.Sandbox)
	t, err := s.st.CreateTask(ctx, &store.Task{
		TenantID: p.TenantID, TicketID: p.TicketID, Kind: store.TaskAgent, Command: cmd, Env: env,
		SandboxSpec: spec, TranscriptPath: p.TranscriptPath,
	})
	if err != nil {
		return nil, err
	}
	s.goTracked(func(ctx context.Context) { s.launch(ctx, t) })
	return t, nil
}

// Package envworker makes a machine a sandbox host for a remote daemon's
// self_hosted environment (issue 16): it polls the environment's work
// queue with the official SDK's worker machinery (lib/environments: the
// poller, the per-item heartbeat and force-stop, the session tool runner)
// and runs each session's sandbox tools in agentkernel's own sandboxes on
// this machine — one per session, with the process or docker driver,
// hibernation and snapshots of the sandbox layer it is given — instead of
// as plain processes in a directory.
package envworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
	"github.com/anthropics/anthropic-sdk-go/tools/agenttoolset"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// Sandboxes is the sandbox layer the tools run in (sandbox.Manager).
type Sandboxes interface {
	tools.Sandboxes
	Create(ctx context.Context, p sandbox.CreateParams) (*sandbox.Info, error)
	Get(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
	List(ctx context.Context, tenantID string, state sandbox.State) ([]*sandbox.Info, error)
}

// Options configure a Worker.
type Options struct {
	// Client reaches the remote daemon (its base URL); the worker adds the
	// environment key to every call.
	Client         anthropic.Client
	EnvironmentID  string
	EnvironmentKey string
	// WorkerID names this worker to the queue (default: the SDK's
	// host-random id).
	WorkerID string
	// Sandboxes and TenantID: where the sessions' sandboxes are made.
	Sandboxes Sandboxes
	TenantID  string
	// Limits bound each tool call (zero: the guest's defaults, as for a
	// daemon's own sessions).
	Limits tools.Limits
	// Dir holds what the SDK's machinery keeps on the host (a session's
	// downloaded skills), one directory per session.
	Dir string
	// MaxSessions bounds the sessions served at once (default 8): the
	// worker polls for more only below it.
	MaxSessions int
	Log         *slog.Logger
}

// Worker serves an environment's queue with sandboxes.
type Worker struct {
	o Options

	mu    sync.Mutex
	boxes map[string]string // session id → sandbox id
}

// New makes a Worker.
func New(o Options) (*Worker, error) {
	switch {
	case o.EnvironmentID == "":
		return nil, errors.New("envworker: the environment id is required")
	case o.EnvironmentKey == "":
		return nil, errors.New("envworker: the environment key is required")
	case o.Sandboxes == nil || o.TenantID == "":
		return nil, errors.New("envworker: a sandbox layer and its tenant are required")
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 8
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Worker{o: o, boxes: map[string]string{}}, nil
}

// envTag is the Environment of this worker's sandboxes: with the session
// id (SessionKey) it finds a session's sandbox again after a restart.
func (w *Worker) envTag() string { return "work:" + w.o.EnvironmentID }

// Run polls until ctx ends, serving up to MaxSessions items at once. A
// cancelled ctx is a normal end; a poll the queue refuses for good (a bad
// key, an unknown environment) is returned.
func (w *Worker) Run(ctx context.Context) error {
	poller := environments.NewWorkPoller(ctx, w.o.Client, environments.WorkPollerOptions{
		EnvironmentID: w.o.EnvironmentID, EnvironmentKey: w.o.EnvironmentKey, WorkerID: w.o.WorkerID,
		// Each item is the serving goroutine's to stop (HandleItem does).
		AutoStop: param.NewOpt(false), Logger: w.o.Log,
	})
	defer poller.Close()
	slots := make(chan struct{}, w.o.MaxSessions)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if !poller.Next() {
			<-slots
			break
		}
		work := poller.Current()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := w.serve(ctx, work); err != nil && ctx.Err() == nil {
				w.o.Log.Warn("work item failed", "work_id", work.ID, "session", work.Data.ID, "err", err)
			}
		}()
	}
	if err := poller.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// serve runs one item with the SDK's per-item flow (lease heartbeat,
// skills, the session tool runner, force-stop on the way out), its tools
// bound to the session's sandbox.
func (w *Worker) serve(ctx context.Context, work *anthropic.BetaSelfHostedWork) error {
	sessionID := work.Data.ID
	dir := filepath.Join(w.o.Dir, filepath.Base(sessionID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ew := environments.NewEnvironmentWorker(w.o.Client, environments.EnvironmentWorkerOptions{
		EnvironmentKey: w.o.EnvironmentKey, Workdir: dir, Logger: w.o.Log,
		// The queue issues no per-item secret yet, so there is no token
		// to sync memory stores with (the daemon refuses them for
		// self_hosted sessions).
		MemorySyncInterval: -1,
		ToolsFunc: func(*agenttoolset.AgentToolContext) []anthropic.BetaTool {
			out := make([]anthropic.BetaTool, 0, len(tools.Names))
			for _, name := range tools.Names {
				out = append(out, &sandboxTool{w: w, session: sessionID, name: name})
			}
			return out
		},
	})
	return ew.HandleItem(ctx, environments.HandleItemOptions{
		WorkID: work.ID, EnvironmentID: work.EnvironmentID, SessionID: sessionID,
		EnvironmentKey: w.o.EnvironmentKey, WorkSecret: work.Secret,
		// Start the lease: never continue one from the environment.
		ExpectedLastHeartbeat: "NO_HEARTBEAT",
	})
}

// sandboxFor is the session's sandbox: the one this worker made for it
// (found again after a restart by its environment tag and session key),
// else a new one.
func (w *Worker) sandboxFor(ctx context.Context, sessionID string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id, ok := w.boxes[sessionID]; ok {
		if info, err := w.o.Sandboxes.Get(ctx, w.o.TenantID, id); err == nil && info.State != sandbox.StateDestroyed {
			return id, nil
		}
		delete(w.boxes, sessionID)
	}
	all, err := w.o.Sandboxes.List(ctx, w.o.TenantID, "")
	if err != nil {
		return "", err
	}
	for _, in := range all {
		if in.Environment == w.envTag() && in.SessionKey == sessionID && in.State != sandbox.StateDestroyed {
			w.boxes[sessionID] = in.ID
			return in.ID, nil
		}
	}
	info, err := w.o.Sandboxes.Create(ctx, sandbox.CreateParams{TenantID: w.o.TenantID, Environment: w.envTag(), SessionKey: sessionID})
	if err != nil {
		return "", fmt.Errorf("create the sandbox of session %s: %w", sessionID, err)
	}
	w.o.Log.Info("session sandbox created", "session", sessionID, "sandbox", info.ID, "driver", info.Driver)
	w.boxes[sessionID] = info.ID
	return info.ID, nil
}

// sandboxTool is one of the agent toolset's tools, run in the session's
// sandbox by its guest (the tools the daemon runs for cloud sessions).
type sandboxTool struct {
	w       *Worker
	session string
	name    string
}

func (t *sandboxTool) Name() string { return t.name }

func (t *sandboxTool) Description() string {
	return "agent_toolset_20260401 " + t.name + ", run in an agentkernel sandbox"
}

func (t *sandboxTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{}
}

// Execute runs the call; a failing tool is an error, which the session
// tool runner posts as an is_error result.
func (t *sandboxTool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	sb, err := t.w.sandboxFor(ctx, t.session)
	if err != nil {
		return nil, err
	}
	res, err := tools.Run(ctx, t.w.o.Sandboxes, t.w.o.TenantID, sb, t.name, input, t.w.o.Limits, "")
	if err != nil {
		return nil, fmt.Errorf("tool %s in sandbox %s: %w", t.name, sb, err)
	}
	if res.IsError {
		return nil, errors.New(res.Content)
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: res.Content}}}, nil
}

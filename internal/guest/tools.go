package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/tools/agenttoolset"
)

// Limits of one tool call (the request may lower or raise them within the
// max).
const (
	DefaultToolTimeout    = 10 * time.Minute
	MaxToolTimeout        = time.Hour
	DefaultToolOutput     = 100 << 10
	MaxToolOutput         = 4 << 20
	toolTruncatedNoteHead = "\n[output truncated: "
)

// ToolRequest runs one tool of the agent_toolset_20260401 set.
type ToolRequest struct {
	// Input is the tool's input as the model wrote it.
	Input json.RawMessage `json:"input"`
	// TimeoutMS bounds the call (default 10 minutes); bash's own
	// timeout_ms input still applies within it.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// MaxOutputBytes bounds the result text (default 100 KiB).
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// OpID makes the call a journalled op (seed 003), as for POST /exec:
	// recorded as accepted before it runs, refused when seen before (409
	// op_exists), run to the end even if the caller goes away, and its
	// result kept for GET /ops/{op_id}.
	OpID string `json:"op_id,omitempty"`
	// Env is extra environment for the tool's processes, over the
	// sandbox's own: the placeholders of the session's vault credentials
	// (never a secret: the egress proxy substitutes the value on the way
	// out). A call whose Env differs from the last one's starts a fresh
	// bash shell with it, so a change applies from the next tool call.
	Env map[string]string `json:"env,omitempty"`
}

// ToolResult is what the tool returned, as the model will see it.
type ToolResult struct {
	Content    string `json:"content"`
	IsError    bool   `json:"is_error,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// toolHandler serves POST /tools/{name} with the sandbox's agent
// toolset: one persistent bash shell (state such as cwd survives between
// calls, as the SDK defines it) and the file tools confined to the work
// dir. Calls are serialized: the shell runs one command at a time.
type toolHandler struct {
	s     *Server
	mu    sync.Mutex // held while a tool runs, and to swap the toolset
	tools map[string]anthropic.BetaTool
	extra map[string]string // the Env the toolset was built with

	// cancels stops journalled calls by op id: they outlive their caller,
	// so an interrupt has to stop them explicitly.
	cmu     sync.Mutex
	cancels map[string]context.CancelCauseFunc
}

// errToolCancelled: DELETE /tools/ops/{op_id} stopped the call.
var errToolCancelled = errors.New("tool call cancelled")

func newToolHandler(s *Server) *toolHandler {
	return &toolHandler{s: s, cancels: map[string]context.CancelCauseFunc{}}
}

// cancelOp serves DELETE /tools/ops/{op_id}: it stops a running journalled
// call (an interrupted turn). The call still records its result. 404 when
// no such call runs.
func (h *toolHandler) cancelOp(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("op_id")
	if err := validOpID(id); err != nil {
		writeError(w, err)
		return
	}
	h.cmu.Lock()
	cancel := h.cancels[id]
	h.cmu.Unlock()
	if cancel == nil {
		writeError(w, fmt.Errorf("%w: no tool call with op_id %s is running", fs.ErrNotExist, id))
		return
	}
	cancel(errToolCancelled)
	w.WriteHeader(http.StatusNoContent)
}

// toolsetLocked is the toolset for a call with extra env (h.mu held):
// the current one, or — when extra changed — a new one, the old bash
// shell closed.
func (h *toolHandler) toolsetLocked(extra map[string]string) map[string]anthropic.BetaTool {
	if h.tools != nil && maps.Equal(extra, h.extra) {
		return h.tools
	}
	for _, t := range h.tools {
		if c, ok := t.(io.Closer); ok {
			_ = c.Close()
		}
	}
	env := map[string]string{}
	for _, kv := range mergeEnv(h.s.baseEnv(), nil) {
		if k, v, ok := strings.Cut(kv, "="); ok && !strings.HasPrefix(k, "ANTHROPIC_") {
			env[k] = v
		}
	}
	maps.Copy(env, extra)
	h.tools = map[string]anthropic.BetaTool{}
	for _, t := range agenttoolset.BetaAgentToolset20260401(&agenttoolset.AgentToolContext{Workdir: h.s.cfg.WorkDir, Env: env}) {
		h.tools[t.Name()] = t
	}
	h.extra = maps.Clone(extra)
	return h.tools
}

// toolNames are the names the toolset answers to.
var toolNames = map[string]bool{"bash": true, "read": true, "write": true, "edit": true, "glob": true, "grep": true}

// ServeHTTP runs one tool call. Tool failures (a refused path, a
// non-zero exit) are results with is_error, not HTTP errors; only a bad
// request or an unknown tool is. When the caller goes away the call's
// context ends, and bash kills its shell's whole process group.
func (h *toolHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req ToolRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if !toolNames[name] {
		writeError(w, fmt.Errorf("%w: unknown tool %q (agent_toolset_20260401 has bash, read, write, edit, glob, grep)", errBadRequest, name))
		return
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	timeout := DefaultToolTimeout
	if req.TimeoutMS > 0 {
		timeout = min(time.Duration(req.TimeoutMS)*time.Millisecond, MaxToolTimeout)
	}
	limit := DefaultToolOutput
	if req.MaxOutputBytes > 0 {
		limit = min(req.MaxOutputBytes, MaxToolOutput)
	}
	parent := r.Context()
	if req.OpID != "" {
		if err := validOpID(req.OpID); err != nil {
			writeError(w, err)
			return
		}
		// Accepted durably before the tool can have any effect.
		if err := h.s.ops.accept(req.OpID, &command{argv: []string{"tool:" + name}, dir: h.s.cfg.WorkDir}); err != nil {
			writeError(w, err)
			return
		}
		// A journalled call runs to its end, caller or not, so its result
		// is recorded for recovery to read back; only cancelOp stops it.
		var cancelCall context.CancelCauseFunc
		parent, cancelCall = context.WithCancelCause(context.WithoutCancel(parent))
		h.cmu.Lock()
		h.cancels[req.OpID] = cancelCall
		h.cmu.Unlock()
		defer func() {
			h.cmu.Lock()
			delete(h.cancels, req.OpID)
			h.cmu.Unlock()
			cancelCall(nil)
		}()
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	begin := time.Now()
	h.mu.Lock()
	blocks, err := h.toolsetLocked(req.Env)[name].Execute(ctx, req.Input)
	h.mu.Unlock()
	res := ToolResult{DurationMS: time.Since(begin).Milliseconds()}
	var te *agenttoolset.ToolError
	switch {
	case errors.As(err, &te):
		res.Content, res.IsError = te.Content, true
	case err != nil:
		res.Content, res.IsError = err.Error(), true
	default:
		var b strings.Builder
		for _, bl := range blocks {
			if bl.OfText != nil {
				b.WriteString(bl.OfText.Text)
			}
		}
		res.Content = b.String()
	}
	switch {
	case errors.Is(context.Cause(parent), errToolCancelled):
		res.IsError = true
		res.Content += "\n[tool call cancelled]"
	case ctx.Err() != nil && parent.Err() == nil:
		res.IsError = true
		res.Content += fmt.Sprintf("\n[tool call timed out after %s]", timeout)
	}
	if len(res.Content) > limit {
		cut := len(res.Content) - limit
		res.Content = res.Content[:limit] + toolTruncatedNoteHead + fmt.Sprintf("%d bytes omitted]", cut)
		res.Truncated = true
	}
	if req.OpID != "" {
		// The result is durable before the caller hears of it.
		h.s.ops.finish(req.OpID, OpResult{DurationMS: res.DurationMS, FinishedAt: h.s.cfg.Now().UTC(), Tool: &res})
	}
	h.s.log.Debug("tool call", "tool", name, "op_id", req.OpID, "is_error", res.IsError, "duration_ms", res.DurationMS)
	writeJSON(w, http.StatusOK, res)
}

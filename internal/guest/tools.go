package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	once  sync.Once
	mu    sync.Mutex
	tools map[string]anthropic.BetaTool
}

func newToolHandler(s *Server) *toolHandler { return &toolHandler{s: s} }

func (h *toolHandler) toolset() map[string]anthropic.BetaTool {
	h.once.Do(func() {
		env := map[string]string{}
		for _, kv := range mergeEnv(h.s.cfg.Env, nil) {
			if k, v, ok := strings.Cut(kv, "="); ok && !strings.HasPrefix(k, "ANTHROPIC_") {
				env[k] = v
			}
		}
		h.tools = map[string]anthropic.BetaTool{}
		for _, t := range agenttoolset.BetaAgentToolset20260401(&agenttoolset.AgentToolContext{Workdir: h.s.cfg.WorkDir, Env: env}) {
			h.tools[t.Name()] = t
		}
	})
	return h.tools
}

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
	tool, ok := h.toolset()[name]
	if !ok {
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
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	begin := time.Now()
	h.mu.Lock()
	blocks, err := tool.Execute(ctx, req.Input)
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
	if ctx.Err() != nil && r.Context().Err() == nil {
		res.IsError = true
		res.Content += fmt.Sprintf("\n[tool call timed out after %s]", timeout)
	}
	if len(res.Content) > limit {
		cut := len(res.Content) - limit
		res.Content = res.Content[:limit] + toolTruncatedNoteHead + fmt.Sprintf("%d bytes omitted]", cut)
		res.Truncated = true
	}
	h.s.log.Debug("tool call", "tool", name, "is_error", res.IsError, "duration_ms", res.DurationMS)
	writeJSON(w, http.StatusOK, res)
}

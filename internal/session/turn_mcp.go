package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/mcp"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// MCPAuthorizer gives the bearer token for an agent's MCP server from the
// session's vaults ("" when none holds one). The vault service implements
// it.
type MCPAuthorizer interface {
	MCPAuthorization(ctx context.Context, tenantID string, vaultIDs []string, serverURL string) (string, error)
}

// SDK error types of a session.error about an MCP server
// (BetaManagedAgentsMCPConnectionFailedError, …AuthenticationFailedError).
const (
	errMCPConnection = "mcp_connection_failed_error"
	errMCPAuth       = "mcp_authentication_failed_error"
)

// connectMCP connects, at the start of a turn, to every server an
// mcp_toolset of the agent names (all at once, each bounded by
// MCPConnectTimeout), lists its tools and offers the enabled ones to the
// model beside the agent's own (ts.tools). A server that cannot be reached
// or refuses the credentials does not fail the turn — as on the hosted
// service, the turn goes on without its tools, a session.error naming the
// server says why, and a call of one of its tools (one confirmed earlier)
// gets a tool error. Only an interrupt or shutdown stops here.
func (w *worker) connectMCP(ctx context.Context, ts *turnState) error {
	r := w.r
	sets := ts.agent.Tools.MCPToolsets
	if len(sets) == 0 {
		return nil
	}
	vaultIDs := SessionVaultIDs(ts.s)
	type outcome struct {
		conn  *mcp.Conn
		tools []tools.MCPTool
		kind  string
		err   error
	}
	out := make([]outcome, len(sets))
	var wg sync.WaitGroup
	for i, set := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &out[i]
			o.conn, o.tools, o.kind, o.err = w.dialMCP(ctx, ts, set.Server, vaultIDs)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		for _, o := range out {
			if o.conn != nil {
				_ = o.conn.Close()
			}
		}
		return err
	}
	ts.mcp, ts.mcpDown = map[string]*mcp.Conn{}, map[string]string{}
	listed := map[string][]tools.MCPTool{}
	var errs []store.NewEvent
	for i, o := range out {
		name := sets[i].Server
		if o.err != nil {
			ts.mcpDown[name] = o.err.Error()
			r.log.WarnContext(ctx, "MCP server not connected", "session", w.id, "mcp_server", name, "err", o.err)
			errs = append(errs, newEvent(EventSessionError, map[string]any{"error": map[string]any{
				"type": o.kind, "mcp_server_name": name, "retry_status": map[string]any{"type": "exhausted"},
				"message": fmt.Sprintf("MCP server %q is not available this turn; its tools are not offered: %v", name, o.err),
			}}))
			continue
		}
		ts.mcp[name], listed[name] = o.conn, o.tools
	}
	var skipped []string
	ts.tools, skipped = ts.agent.Tools.WithMCP(listed)
	for _, s := range skipped {
		r.log.WarnContext(ctx, "MCP tool not offered: its name collides with another tool", "session", w.id, "tool", s)
	}
	if len(errs) > 0 {
		evs, err := r.cfg.Events.Append(ctx, w.id, errs)
		if err != nil {
			return err
		}
		w.appended(ctx, evs)
	}
	return nil
}

// dialMCP connects to one server and lists its tools; kind is the
// session.error type of a failure.
func (w *worker) dialMCP(ctx context.Context, ts *turnState, name string, vaultIDs []string) (*mcp.Conn, []tools.MCPTool, string, error) {
	r := w.r
	url, ok := ts.agent.MCPServers[name]
	if !ok {
		return nil, nil, errMCPConnection, fmt.Errorf("the agent has no MCP server named %q", name)
	}
	var token string
	if r.cfg.MCPAuth != nil {
		t, err := r.cfg.MCPAuth.MCPAuthorization(ctx, ts.s.TenantID, vaultIDs, url)
		if err != nil {
			return nil, nil, errMCPAuth, fmt.Errorf("credentials from the session's vaults: %w", err)
		}
		token = t
	}
	conn, err := mcp.Connect(ctx, url, mcp.Options{Token: token, ConnectTimeout: r.cfg.MCPConnectTimeout,
		CallTimeout: r.cfg.MCPCallTimeout, Log: r.log})
	if errors.Is(err, mcp.ErrUnauthorized) {
		return nil, nil, errMCPAuth, err
	}
	if err != nil {
		return nil, nil, errMCPConnection, err
	}
	listed, err := conn.Tools(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, nil, errMCPConnection, err
	}
	out := make([]tools.MCPTool, len(listed))
	for i, t := range listed {
		out[i] = tools.MCPTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return conn, out, "", nil
}

// closeMCP ends the turn's connections (each bounded by the SDK).
func (w *worker) closeMCP(ts *turnState) {
	for name, c := range ts.mcp {
		if err := c.Close(); err != nil {
			w.r.log.Debug("close MCP connection", "session", w.id, "mcp_server", name, "err", err)
		}
	}
	ts.mcp = nil
}

// mcpOpID is the journal id of an MCP call: server, tool and input at the
// call's position, as toolOpID.
func mcpOpID(ts *turnState, cl *call, step int64) (string, json.RawMessage, error) {
	args, err := json.Marshal(map[string]any{"server": cl.server, "tool": cl.tool, "input": cl.input})
	if err != nil {
		return "", nil, err
	}
	id, err := journal.OpID(journal.KindMCPCall, args, ts.turnSeq, step, cl.index)
	return id, args, err
}

// runMCP makes one MCP tool call as a journalled op (seed 003): op_started
// before the request, op_completed with the result. Found completed, the
// recorded result is replayed; found started, the call may have reached
// the server and MCP has no way to ask or to dedupe, so the model is told
// it may have executed (never a silent re-run). A failing call is a result
// with IsError, in words the model can act on; err is only for the
// journal failing or the turn being stopped.
func (w *worker) runMCP(ctx context.Context, ts *turnState, cl *call, step int64) (*mcp.Result, error) {
	r := w.r
	opID, args, err := mcpOpID(ts, cl, step)
	if err != nil {
		return nil, err
	}
	op, err := r.cfg.Store.StartOp(ctx, &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindMCPCall,
		TurnSeq: ts.turnSeq, Step: step, Index: cl.index, Args: args, Status: store.OpStarted, StartedAt: r.cfg.Clock.Now()})
	switch {
	case errors.Is(err, store.ErrAlreadyExists) && op != nil:
		act, derr := journal.Decide(op.Kind, journal.State{Completed: op.Status == store.OpCompleted})
		switch {
		case derr != nil:
			return nil, derr
		case act == journal.Replay:
			var rec mcp.Result
			if err := json.Unmarshal(op.Result, &rec); err != nil {
				return nil, fmt.Errorf("op %s: recorded result: %w", opID, err)
			}
			return &rec, nil
		case act == journal.ReportAmbiguous:
			r.log.WarnContext(ctx, "MCP call outcome unknown", "session", w.id, "op_id", opID, "mcp_server", cl.server, "tool", cl.tool)
			a := ambiguousResult(opID)
			return w.completeMCP(ctx, opID, mcp.TextResult(a.Content, true))
		default:
			return nil, fmt.Errorf("op %s: no MCP call recovery for %q", opID, act)
		}
	case err != nil:
		return nil, fmt.Errorf("journal the MCP call: %w", err)
	}
	conn := ts.mcp[cl.server]
	if conn == nil {
		why := ts.mcpDown[cl.server]
		if why == "" {
			why = "the agent's MCP toolsets do not include it"
		}
		return w.completeMCP(ctx, opID, mcp.TextResult(fmt.Sprintf("MCP server %q is not connected this turn, so %s was not called: %s", cl.server, cl.tool, why), true))
	}
	r.failpoint(FailBeforeMCPCall)
	start := r.cfg.Clock.Now()
	res, err := conn.Call(ctx, cl.tool, cl.input)
	if err != nil {
		if ctx.Err() != nil {
			if c := context.Cause(ctx); errors.Is(c, errInterrupt) || errors.Is(c, errDestroying) {
				// The turn ends here and will not be recovered: record what
				// is known, so the journal holds no call left open.
				_, _ = w.completeMCP(ctx, opID, mcp.TextResult(fmt.Sprintf("The MCP call was interrupted; operation %s may have executed; verify before retrying", opID), true))
			}
			// A shutdown leaves the op started: recovery reports it.
			return nil, ctx.Err()
		}
		res = mcp.TextResult(err.Error(), true)
	}
	r.log.DebugContext(ctx, "MCP call", "session", w.id, "mcp_server", cl.server, "tool", cl.tool,
		"is_error", res.IsError, "took", r.cfg.Clock.Now().Sub(start))
	return w.completeMCP(ctx, opID, res)
}

func (w *worker) completeMCP(ctx context.Context, opID string, res *mcp.Result) (*mcp.Result, error) {
	raw, _ := json.Marshal(res)
	if _, err := w.r.cfg.Store.CompleteOp(context.WithoutCancel(ctx), w.id, opID, raw); err != nil && !errors.Is(err, store.ErrConflict) {
		return nil, fmt.Errorf("journal the MCP result: %w", err)
	}
	return res, nil
}

// resultEvent is the result event of a call: agent.mcp_tool_result for
// an MCP tool, else agent.tool_result.
func resultEvent(cl *call, content []map[string]any, isError bool) store.NewEvent {
	if cl.mcp {
		return newEvent(EventAgentMCPToolResult, map[string]any{"mcp_tool_use_id": cl.eventID, "content": content, "is_error": isError})
	}
	return newEvent(EventAgentToolResult, map[string]any{"tool_use_id": cl.eventID, "content": content, "is_error": isError})
}

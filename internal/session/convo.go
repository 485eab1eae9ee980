package session

import (
	"encoding/json"
	"slices"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// convo is a session's conversation folded from its event log, the one
// source of truth: a worker that starts fresh rebuilds it by folding every
// event in Seq order, and a running turn keeps it current by folding the
// events it appends. Queued user.message events join the conversation only
// at the session.status_running event of the turn that takes them, so a
// message sent during a turn is answered by the next turn, in order.
type convo struct {
	seq  int64
	msgs []model.Message
	// The user content gathered since the last assistant message: tool
	// results first (the Messages API requires them to lead), then text.
	results  []model.Block
	userText []model.Block
	// queued are user.message events no turn has taken yet.
	queued []queuedMsg
	// open are the tool uses of the last assistant message without a
	// result yet, in order.
	open []*call
	// requiresAction: the last turn ended waiting for custom tool results,
	// confirmations or (self_hosted) its workers' tool results.
	requiresAction bool
	// selfHosted: the session's environment is self_hosted, so its
	// sandbox tools (tools.Names) run on a worker that answers with
	// user.tool_result (see call.external).
	selfHosted bool
	// lastUserSeq is the Seq of the newest user event folded.
	lastUserSeq int64
	// raw holds the provider's own blocks for events this worker appended
	// (thinking signatures the events do not carry), by event id.
	raw map[string]model.Block
	// runningSeq and idleSeq are the Seqs of the last status_running and
	// status_idle: a turn is open in the log while runningSeq > idleSeq.
	runningSeq, idleSeq int64
	// The current model call, as far as its events tell: the id of its
	// span.model_request_start (until its end), and the agent.message
	// texts and agent.thinking count it delivered. A recovered turn uses
	// them to not deliver the same blocks twice.
	spanOpen      string
	stepTexts     []string
	stepThinkings int
	// ends[i] are the first and last events folded into msgs[i], and
	// pending those of the gathered user content: a compaction names the
	// events it replaced, and a rebuilt conversation cuts at the same
	// message (convo_compact.go). cur is the event being folded.
	ends    []msgEvents
	pending msgEvents
	cur     string
	// summarized counts the assistant messages compactions replaced by
	// the summary that leads msgs.
	summarized int
	// oc is the session's outcomes (outcome.go).
	oc outcomes
	// threads: the session opened threads (session.thread_created);
	// threadPosted holds the ids of the thread events in its log, which
	// are derived from the threads' own events (thread_sync.go).
	threads      bool
	threadPosted map[string]bool
}

// msgEvents are the first and last events folded into a message.
type msgEvents struct{ first, last string }

func (m *msgEvents) add(id string) {
	if m.first == "" {
		m.first = id
	}
	m.last = id
}

type queuedMsg struct {
	seq    int64
	id     string
	blocks []model.Block
}

// call is a tool use waiting for its result.
type call struct {
	eventID string
	name    string
	input   json.RawMessage
	custom  bool
	// mcp: a tool of an MCP server (agent.mcp_tool_use); server and tool
	// are the agent's server name and the server's tool name.
	mcp          bool
	server, tool string
	// ask: the tool waits for user.tool_confirmation; decision is "allow"
	// or "deny" once it arrived.
	ask         bool
	decision    string
	denyMessage string
	// index is the call's position among the tool uses of its model
	// response: with the step, the op journal's position of the call.
	index int64
	// external: a sandbox tool of a self_hosted session. A worker polling
	// the environment's work queue runs it and sends its user.tool_result;
	// the turn waits for that as it waits for a custom tool's result.
	external bool
}

func newConvo(selfHosted bool) *convo {
	return &convo{raw: map[string]model.Block{}, threadPosted: map[string]bool{}, selfHosted: selfHosted}
}

// wire shapes read from events.
type (
	contentBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	eventBody struct {
		Type                string          `json:"type"`
		Content             []contentBlock  `json:"content"`
		Name                string          `json:"name"`
		Input               json.RawMessage `json:"input"`
		EvaluatedPermission string          `json:"evaluated_permission"`
		ToolUseID           string          `json:"tool_use_id"`
		CustomToolUseID     string          `json:"custom_tool_use_id"`
		MCPToolUseID        string          `json:"mcp_tool_use_id"`
		MCPServerName       string          `json:"mcp_server_name"`
		IsError             bool            `json:"is_error"`
		Result              string          `json:"result"`
		DenyMessage         string          `json:"deny_message"`
		StopReason          *struct {
			Type string `json:"type"`
		} `json:"stop_reason"`
	}
)

func textBlocks(cs []contentBlock) []model.Block {
	var out []model.Block
	for _, c := range cs {
		switch c.Type {
		case "text":
			out = append(out, model.Text(c.Text))
		case "":
		default:
			out = append(out, model.Text("["+c.Type+" omitted: agentkernel passes text content only]"))
		}
	}
	return out
}

func joinText(cs []contentBlock) []model.Block {
	var s string
	for _, c := range cs {
		if c.Type == "text" {
			s += c.Text
		}
	}
	return []model.Block{model.Text(s)}
}

// fold applies one event. Events must come in Seq order.
func (c *convo) fold(ev store.SessionEvent) {
	if ev.Seq <= c.seq {
		return
	}
	c.seq, c.cur = ev.Seq, ev.ID
	var b eventBody
	if err := json.Unmarshal(ev.Data, &b); err != nil {
		return
	}
	switch ev.Type {
	case EventUserMessage:
		c.lastUserSeq = ev.Seq
		c.queued = append(c.queued, queuedMsg{seq: ev.Seq, id: ev.ID, blocks: textBlocks(b.Content)})
	case EventUserInterrupt:
		c.lastUserSeq = ev.Seq
	case EventUserDefineOutcome:
		c.lastUserSeq = ev.Seq
		c.queued = append(c.queued, queuedMsg{seq: ev.Seq, blocks: c.oc.fold(ev)})
	case EventOutcomeEvalStart, EventOutcomeEvalEnd:
		// A verdict that sends the agent back to work is its next input.
		c.userText = append(c.userText, c.oc.fold(ev)...)
	case EventStatusRunning:
		c.oc.fold(ev)
		c.runningSeq = ev.Seq
		c.requiresAction = false
		for _, q := range c.queued {
			c.userText = append(c.userText, q.blocks...)
			c.pending.add(q.id)
		}
		c.queued = nil
	case EventAgentMessage:
		for _, t := range textBlocks(b.Content) {
			c.addAssistant(t)
			c.stepTexts = append(c.stepTexts, t.Text)
		}
	case EventAgentThinking:
		c.stepThinkings++
		if r, ok := c.raw[ev.ID]; ok {
			c.addAssistant(r)
		}
	case EventSpanModelStart:
		c.oc.fold(ev)
		c.spanOpen, c.stepTexts, c.stepThinkings = ev.ID, nil, 0
	case EventSpanModelEnd:
		c.spanOpen = ""
	case EventAgentToolUse, EventAgentCustomToolUse:
		in := callInput(b.Input)
		// The event id is the tool use id the model sees from now on, so
		// results (which name the event) always match their call.
		c.addAssistant(model.Block{Type: model.BlockToolUse, ID: ev.ID, Name: b.Name, Input: in})
		custom := ev.Type == EventAgentCustomToolUse
		c.open = append(c.open, &call{eventID: ev.ID, name: b.Name, input: in,
			custom: custom, ask: b.EvaluatedPermission == "ask", index: c.toolUsesInLast() - 1,
			external: c.selfHosted && !custom && slices.Contains(tools.Names, b.Name)})
	case EventAgentMCPToolUse:
		in := callInput(b.Input)
		c.addAssistant(model.Block{Type: model.BlockToolUse, ID: ev.ID, Name: tools.MCPName(b.MCPServerName, b.Name), Input: in})
		c.open = append(c.open, &call{eventID: ev.ID, name: tools.MCPName(b.MCPServerName, b.Name), input: in,
			mcp: true, server: b.MCPServerName, tool: b.Name, ask: b.EvaluatedPermission == "ask", index: c.toolUsesInLast() - 1})
	case EventAgentToolResult:
		if c.take(b.ToolUseID) != nil {
			c.results = append(c.results, model.Block{Type: model.BlockToolResult, ToolUseID: b.ToolUseID, Content: joinText(b.Content), IsError: b.IsError})
			c.pending.add(ev.ID)
		}
	case EventAgentMCPToolResult:
		if c.take(b.MCPToolUseID) != nil {
			c.results = append(c.results, model.Block{Type: model.BlockToolResult, ToolUseID: b.MCPToolUseID, Content: joinText(b.Content), IsError: b.IsError})
			c.pending.add(ev.ID)
		}
	case EventUserCustomToolResult:
		c.lastUserSeq = ev.Seq
		if cl := c.find(b.CustomToolUseID); cl != nil && cl.custom {
			c.take(b.CustomToolUseID)
			c.results = append(c.results, model.Block{Type: model.BlockToolResult, ToolUseID: b.CustomToolUseID, Content: joinText(b.Content), IsError: b.IsError})
			c.pending.add(ev.ID)
		}
	case EventUserToolResult:
		c.lastUserSeq = ev.Seq
		if cl := c.find(b.ToolUseID); cl != nil && cl.external {
			c.take(b.ToolUseID)
			c.results = append(c.results, model.Block{Type: model.BlockToolResult, ToolUseID: b.ToolUseID, Content: joinText(b.Content), IsError: b.IsError})
			c.pending.add(ev.ID)
		}
	case EventUserToolConfirmation:
		c.lastUserSeq = ev.Seq
		if cl := c.find(b.ToolUseID); cl != nil && cl.ask && cl.decision == "" {
			cl.decision, cl.denyMessage = b.Result, b.DenyMessage
		}
	case EventThreadContextCompacted:
		c.compacted(ev.Data)
	case EventThreadCreated, EventThreadStatusRunning, EventThreadStatusIdle, EventThreadStatusRescheduled, EventThreadStatusTerminated:
		c.threads = true
		c.threadPosted[ev.ID] = true
	case EventThreadMessageReceived:
		// A thread's answer: the coordinator's next input. One that
		// arrives while a turn is open (the turn waits for its threads)
		// goes to that turn; otherwise it queues as a user message does.
		c.threadPosted[ev.ID] = true
		blocks := []model.Block{model.Text(threadMessageText(ev.Data))}
		c.lastUserSeq = ev.Seq
		if c.turnOpen() {
			c.userText = append(c.userText, blocks...)
			c.pending.add(ev.ID)
		} else {
			c.queued = append(c.queued, queuedMsg{seq: ev.Seq, id: ev.ID, blocks: blocks})
		}
	case EventStatusIdle:
		c.oc.fold(ev)
		c.idleSeq, c.spanOpen = ev.Seq, ""
		c.requiresAction = b.StopReason != nil && b.StopReason.Type == StopRequiresAction
	}
}

// turnOpen: the log shows a turn that began (status_running) and has not
// ended (no status_idle since).
func (c *convo) turnOpen() bool { return c.runningSeq > c.idleSeq }

// callInput is a tool use's input as its call holds it: an event without
// one has {}.
func callInput(in json.RawMessage) json.RawMessage {
	if len(in) == 0 || string(in) == "null" {
		return json.RawMessage("{}")
	}
	return in
}

// nextToolIndex is the index the next tool use folded will have among
// its model response's tool uses (see fold): gathered user content closes
// the last message first, so the tool use starts a new one.
func (c *convo) nextToolIndex() int64 {
	if len(c.results) > 0 || len(c.userText) > 0 {
		return 0
	}
	return c.toolUsesInLast()
}

// toolUsesInLast counts the tool uses of the last assistant message.
func (c *convo) toolUsesInLast() int64 {
	n := len(c.msgs)
	if n == 0 || c.msgs[n-1].Role != model.RoleAssistant {
		return 0
	}
	var k int64
	for _, b := range c.msgs[n-1].Content {
		if b.Type == model.BlockToolUse {
			k++
		}
	}
	return k
}

func (c *convo) find(id string) *call {
	for _, cl := range c.open {
		if cl.eventID == id {
			return cl
		}
	}
	return nil
}

func (c *convo) take(id string) *call {
	for i, cl := range c.open {
		if cl.eventID == id {
			c.open = append(c.open[:i:i], c.open[i+1:]...)
			return cl
		}
	}
	return nil
}

func (c *convo) addAssistant(b model.Block) {
	c.flushUser()
	if n := len(c.msgs); n > 0 && c.msgs[n-1].Role == model.RoleAssistant {
		c.msgs[n-1].Content = append(c.msgs[n-1].Content, b)
		c.ends[n-1].add(c.cur)
		return
	}
	c.msgs = append(c.msgs, model.Message{Role: model.RoleAssistant, Content: []model.Block{b}})
	c.ends = append(c.ends, msgEvents{first: c.cur, last: c.cur})
}

// flushUser closes the gathered user content into a message. Tool uses
// still open then never got a result (the turn was interrupted, or the
// user moved on): they get an error result, since every tool use needs one.
func (c *convo) flushUser() {
	if len(c.results) == 0 && len(c.userText) == 0 {
		return
	}
	c.closeOpen()
	content := append(append([]model.Block(nil), c.results...), c.userText...)
	c.msgs = append(c.msgs, model.Message{Role: model.RoleUser, Content: content})
	if c.pending.first == "" {
		c.pending.add(c.cur) // only error results: the event that closed them
	}
	c.ends = append(c.ends, c.pending)
	c.results, c.userText, c.pending = nil, nil, msgEvents{}
}

// closeOpen gives every open tool use an error result.
func (c *convo) closeOpen() {
	for _, cl := range c.open {
		msg := "This tool call has no result: the turn was interrupted or the user sent a new message instead."
		if cl.custom {
			msg = "No result was provided for this custom tool call before the conversation moved on."
		}
		c.results = append(c.results, model.Block{Type: model.BlockToolResult, ToolUseID: cl.eventID, Content: []model.Block{model.Text(msg)}, IsError: true})
	}
	c.open = nil
}

// awaiting reports whether some tool use still waits for the user (a
// custom tool result or a confirmation).
func (c *convo) awaiting() bool {
	for _, cl := range c.open {
		if cl.waits() {
			return true
		}
	}
	return false
}

// waits: the call's result comes from outside the turn — a custom tool's
// or a worker's (external) result, or the user's confirmation. An external
// call the user denied does not wait: the turn answers it with the denial.
func (cl *call) waits() bool {
	switch {
	case cl.ask && cl.decision == "":
		return true
	case cl.custom:
		return true
	case cl.external:
		return !(cl.ask && cl.decision == "deny")
	}
	return false
}

// needsTurn: messages are queued, or everything the last turn waited for
// has arrived.
func (c *convo) needsTurn() bool {
	return len(c.queued) > 0 || (c.requiresAction && !c.awaiting())
}

// decided returns the open tool uses whose confirmation arrived; the turn
// runs (allow) or refuses (deny) them before it calls the model.
func (c *convo) decided() []*call {
	var out []*call
	for _, cl := range c.open {
		if cl.ask && cl.decision != "" {
			out = append(out, cl)
		}
	}
	return out
}

// messages returns the conversation for the next model call: everything
// folded plus the gathered user content. Tool uses still open get their
// error result now, so the model never sees a call without one.
func (c *convo) messages() []model.Message {
	c.closeOpen()
	out := append([]model.Message(nil), c.msgs...)
	if len(c.results) > 0 || len(c.userText) > 0 {
		content := append(append([]model.Block(nil), c.results...), c.userText...)
		out = append(out, model.Message{Role: model.RoleUser, Content: content})
	}
	return out
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// summaryInstruction asks for the summary that replaces the oldest turns.
const summaryInstruction = "The conversation above is getting too long for the context window and will be replaced by your summary of it. " +
	"Write that summary now, for yourself to continue the work from: the user's requests and constraints, what was done " +
	"(commands run, files changed, results), decisions and their reasons, and what is still open. Be concise and concrete; " +
	"answer with the summary only."

// ctxBase is what the token estimate of the next request builds on: the
// provider's count of the last request and its answer (input, cache and
// output tokens), and the characters of both as this worker sent and
// received them.
type ctxBase struct {
	tokens, chars int64
}

// estimateTokens estimates the input tokens of req. Beyond the last
// response the provider counted, what was added since is counted at 4
// characters a token (the usual ratio for English text and code with
// Claude's and GPT's tokenizers); with no count to build on (the first
// request of a worker, after a restart, after a compaction, a provider
// that reports no usage) the whole request is.
func (w *worker) estimateTokens(req *model.Request) int64 {
	chars := requestChars(req)
	if b := w.ctxBase; b.tokens > 0 && chars >= b.chars {
		return b.tokens + (chars-b.chars+3)/4
	}
	return (chars + 3) / 4
}

// counted records the provider's usage of req and its answer as the base
// of the next estimate.
func (w *worker) counted(req *model.Request, resp *model.Response) {
	u := resp.Usage
	w.ctxBase = ctxBase{
		tokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens + u.OutputTokens,
		chars:  requestChars(req) + blocksChars(resp.Content),
	}
}

func requestChars(req *model.Request) int64 {
	n := int64(len(req.System))
	for _, t := range req.Tools {
		n += int64(len(t.Name) + len(t.Description) + len(t.InputSchema))
	}
	for _, m := range req.Messages {
		n += blocksChars(m.Content)
	}
	return n
}

func blocksChars(bs []model.Block) int64 {
	var n int64
	for _, b := range bs {
		n += int64(len(b.Text) + len(b.Thinking) + len(b.Data) + len(b.Name) + len(b.Input))
		n += blocksChars(b.Content)
	}
	return n
}

// fitContext returns the messages of the step's request, compacted first
// when the request would fill more than the route's share of the model's
// window: the tool outputs of all but the last turns are dropped, and
// when that is not enough the same old turns are summarised by the model.
// A compaction is recorded as agent.thread_context_compacted, which the
// conversation folds (convo_compact.go), so a rebuilt one is compacted the
// same; the events themselves stay in the log.
func (w *worker) fitContext(ctx context.Context, ts *turnState, prov *model.Resolved, req *model.Request, step int64) error {
	req.Messages, req.Summarized = w.conv.messages(), w.conv.summarized
	if prov.ContextWindow <= 0 {
		return nil
	}
	limit := int64(float64(prov.ContextWindow) * prov.CompactAt)
	before := w.estimateTokens(req)
	if before <= limit {
		return nil
	}
	cut := w.conv.cutPoint()
	if cut < 0 {
		w.r.log.WarnContext(ctx, "conversation over the context window share, too short to compact",
			"session", w.id, "tokens", before, "limit", limit)
		return nil
	}
	old := make([]model.Message, cut+1)
	copy(old, w.conv.msgs[:cut+1])
	body := compactionBody{Strategy: compactToolResults, TokensBefore: before}
	body.Replaced.FirstEventID, body.Replaced.LastEventID = w.conv.ends[0].first, w.conv.ends[cut].last
	body.Replaced.Messages = cut + 1
	body.Replaced.ToolResults = dropToolResults(old)
	after := append(append([]model.Message(nil), old...), req.Messages[cut+1:]...)
	est := (requestChars(&model.Request{System: req.System, Tools: req.Tools, Messages: after}) + 3) / 4
	var usage model.Usage
	if body.Replaced.ToolResults == 0 || est > limit {
		summary, u, err := w.summarize(ctx, ts, prov, req, old, body.Replaced.LastEventID, step)
		if err != nil {
			return err
		}
		usage = u
		body.Strategy, body.Summary = compactSummary, summary
		after = append([]model.Message{summaryMessage(summary)}, req.Messages[cut+1:]...)
		est = (requestChars(&model.Request{System: req.System, Tools: req.Tools, Messages: after}) + 3) / 4
	}
	body.TokensAfter = est
	data, _ := json.Marshal(body)
	var fields map[string]any
	_ = json.Unmarshal(data, &fields)
	if body.Strategy == compactSummary {
		fields["model_usage"] = usageJSON(usage)
	}
	evs, err := w.r.cfg.Events.Append(ctx, w.id, []store.NewEvent{newEvent(EventThreadContextCompacted, fields)})
	if err != nil {
		return err
	}
	w.appended(ctx, evs)
	w.ctxBase = ctxBase{}
	req.Messages, req.Summarized = w.conv.messages(), w.conv.summarized
	return nil
}

// summarize asks the model for the summary of old, the messages a
// compaction replaces (through the event through), as a journalled op
// like any model request: a completed one is replayed from its record after a crash, a
// started one is sent again — it delivered nothing, as its answer only
// becomes the compaction event. The summary request is the step's request
// (same system prompt and tools, so it reads their cache) with old as its
// messages and the instruction after them.
func (w *worker) summarize(ctx context.Context, ts *turnState, prov *model.Resolved, req *model.Request, old []model.Message, through string, step int64) (string, model.Usage, error) {
	r := w.r
	// The op is the summary of these messages: a different cut is a
	// different op, so a recorded summary never stands for other turns.
	opArgs := map[string]any{"model": req.Model, "purpose": model.PurposeCompaction, "through": through}
	opID, err := journal.OpID(journal.KindModelRequest, opArgs, ts.turnSeq, step, 0)
	if err != nil {
		return "", model.Usage{}, err
	}
	args, _ := json.Marshal(opArgs)
	op, err := r.cfg.Store.StartOp(ctx, &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindModelRequest,
		TurnSeq: ts.turnSeq, Step: step, Args: args, Status: store.OpStarted, StartedAt: r.cfg.Clock.Now()})
	switch {
	case errors.Is(err, store.ErrAlreadyExists) && op != nil:
		if op.Status == store.OpCompleted {
			var res modelResult
			if err := json.Unmarshal(op.Result, &res); err != nil {
				return "", model.Usage{}, fmt.Errorf("op %s: recorded result: %w", opID, err)
			}
			return responseText(res.Content), model.Usage{}, nil
		}
	case err != nil:
		return "", model.Usage{}, fmt.Errorf("journal the compaction's summary request: %w", err)
	}
	r.failpoint(FailMidCompaction)
	msgs := append([]model.Message(nil), old...)
	last := &msgs[len(msgs)-1]
	last.Content = append(append([]model.Block(nil), last.Content...), model.Text(summaryInstruction))
	sreq := &model.Request{Model: req.Model, MaxTokens: req.MaxTokens, System: req.System, Tools: req.Tools,
		Messages: msgs, Purpose: model.PurposeCompaction, Summarized: req.Summarized, IdempotencyKey: opID}
	resp, err := prov.Provider.Stream(ctx, sreq, nil)
	if resp != nil {
		ts.usage = ts.usage.Add(resp.Usage)
	}
	if err != nil {
		return "", model.Usage{}, fmt.Errorf("compact the conversation: %w", err)
	}
	summary := responseText(resp.Content)
	if summary == "" {
		return "", resp.Usage, fmt.Errorf("compact the conversation: the model answered the summary request with no text")
	}
	if err := w.completeModelOp(ctx, opID, resp); err != nil {
		return "", resp.Usage, err
	}
	return summary, resp.Usage, nil
}

func responseText(bs []model.Block) string {
	var parts []string
	for _, b := range bs {
		if b.Type == model.BlockText && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

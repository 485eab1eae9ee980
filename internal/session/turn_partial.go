package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The text block a model response is streaming is saved as it grows (one
// row per step, overwritten), so a crash mid-block loses at most one batch
// and the resumed step continues the block instead of repeating it. The
// first delta of a block is saved at once (a block begun is never lost
// whole); after that a save waits for PartialSaveDeltas deltas or
// PartialSaveEvery, whichever comes first. Both are checked as deltas
// arrive: a stream that stalls keeps its unsaved deltas until the next.
const (
	// PartialSaveDeltas bounds the deltas (about a token each) a crash can
	// lose.
	PartialSaveDeltas = 32
	// PartialSaveEvery bounds how stale the saved text is on a slow stream.
	PartialSaveEvery = 100 * time.Millisecond
)

// partialSaveDeltas is PartialSaveDeltas; the benchmark sets it to 1 to
// price a save per delta.
var partialSaveDeltas = PartialSaveDeltas

// Thinking is not saved: a thinking block goes back to the Messages API
// only whole, with its signature, so a partial one cannot be continued and
// is thought again. Tool-use input cannot be prefilled either.

// partialSaver keeps the step's text block in progress.
type partialSaver struct {
	w    *worker
	ts   *turnState
	step int64
	// block is the response's index of the block in progress (-1: none);
	// index its position among the step's blocks.
	block   int
	index   int64
	text    strings.Builder
	pending int
	last    time.Time
	// cont is the saved text the response's first block continues (a
	// resumed step), until that block starts.
	cont string
}

// onDelta is the model.OnDelta of the step; kept is the number of the
// step's blocks already kept as stream chunks.
func (p *partialSaver) onDelta(ctx context.Context, d model.Delta, kept int64) error {
	if d.Type != model.BlockText {
		return nil
	}
	if d.Index != p.block {
		p.block, p.index, p.pending = d.Index, kept, 0
		p.text.Reset()
		if d.Index == 0 {
			p.text.WriteString(p.cont)
		}
		p.cont = ""
		p.last = time.Time{}
	}
	p.text.WriteString(d.Text)
	p.pending++
	now := p.w.r.cfg.Clock.Now()
	if !p.last.IsZero() && p.pending < partialSaveDeltas && now.Sub(p.last) < PartialSaveEvery {
		return nil
	}
	data, _ := json.Marshal(model.Text(p.text.String()))
	if err := p.w.r.cfg.Store.SavePartialBlock(ctx, &store.PartialBlock{SessionID: p.w.id, TurnSeq: p.ts.turnSeq,
		Step: p.step, Index: p.index, Data: data, UpdatedAt: now}); err != nil {
		return fmt.Errorf("keep the partial model output: %w", err)
	}
	p.pending, p.last = 0, now
	p.w.r.failpoint(FailMidModelBlock)
	return nil
}

// inProgress is the text of the block the step was streaming when it was
// cut ("" when none): the saved block, if it is the one after the kept
// blocks and no agent.message delivered it whole (the cut fell between
// the event and its stream chunk).
func (w *worker) inProgress(ctx context.Context, ts *turnState, step int64, kept []model.Block) string {
	pb, err := w.r.cfg.Store.GetPartialBlock(ctx, w.id, ts.turnSeq, step)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			w.r.log.WarnContext(ctx, "read partial model output", "session", w.id, "err", err)
		}
		return ""
	}
	texts := 0
	for _, b := range kept {
		if b.Type == model.BlockText {
			texts++
		}
	}
	var b model.Block
	if pb.Index != int64(len(kept)) || len(w.conv.stepTexts) > texts || json.Unmarshal(pb.Data, &b) != nil || b.Type != model.BlockText {
		return ""
	}
	return b.Text
}

// prefillPartial ends the request's assistant message with the text of the
// block in progress, trimmed as the Messages API requires (no trailing
// whitespace); it returns the text the model is asked to continue ("" and
// no prefill when nothing is left of it).
func prefillPartial(req *model.Request, text string) string {
	text = strings.TrimRight(text, " \t\n")
	if text == "" {
		return ""
	}
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != model.RoleAssistant {
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant})
		n++
	}
	m := &req.Messages[n-1]
	m.Content = append(append([]model.Block(nil), m.Content...), model.Text(text))
	return text
}

// continued puts the continued text before the response's first block:
// the rest of the interrupted block is its first text block; a response
// that starts with anything else (or is empty) gets the text as a block of
// its own.
func continued(content []model.Block, text string) []model.Block {
	if len(content) > 0 && content[0].Type == model.BlockText {
		out := append([]model.Block(nil), content...)
		out[0].Text = text + out[0].Text
		return out
	}
	return append([]model.Block{model.Text(text)}, content...)
}

package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

// snapshot is what the parent found after a kill.
type snapshot struct {
	exists  bool
	n       int64 // iterations committed = checkpoints written
	version int64
}

// violation is an invariant failure with the evidence to debug it.
type violation struct {
	what     string
	evidence []string
}

func (v *violation) Error() string {
	return v.what + "\n\t" + strings.Join(v.evidence, "\n\t")
}

// checkStore reads the session back and checks seed 004's atomicity: every
// iteration the child committed is there whole (its two messages, its state,
// its checkpoint, the pointer and version moved together) and nothing of an
// iteration that did not commit is visible except its still-staged change.
func checkStore(ctx context.Context, s store.Store) (snapshot, error) {
	sess, err := s.GetSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return snapshot{}, nil // killed before CreateSession committed
	}
	if err != nil {
		return snapshot{}, fmt.Errorf("get session: %w", err)
	}
	cps, err := s.ListCheckpoints(ctx, sessionID)
	if err != nil {
		return snapshot{}, fmt.Errorf("list checkpoints: %w", err)
	}
	msgs, err := s.GetMessages(ctx, store.GetMessagesParams{SessionID: sessionID})
	if err != nil {
		return snapshot{}, fmt.Errorf("get messages: %w", err)
	}
	staged, err := s.GetStagedChanges(ctx, sessionID)
	if err != nil {
		return snapshot{}, fmt.Errorf("get staged changes: %w", err)
	}
	count, err := s.CountMessages(ctx, sessionID)
	if err != nil {
		return snapshot{}, fmt.Errorf("count messages: %w", err)
	}
	n := int64(len(cps))
	ev := evidence(sess, cps, msgs, staged)
	fail := func(format string, args ...any) error {
		return &violation{what: fmt.Sprintf(format, args...), evidence: ev}
	}

	if err := checkMessages(msgs, n); err != nil {
		return snapshot{}, fail("messages: %v", err)
	}
	if count != int64(len(msgs)) {
		return snapshot{}, fail("CountMessages = %d but GetMessages returned %d", count, len(msgs))
	}
	var lastVersion int64
	for k, cp := range cps {
		i := int64(k + 1)
		if err := checkCheckpoint(cp, i); err != nil {
			return snapshot{}, fail("checkpoint #%d (%s): %v", i, cp.ID, err)
		}
		if cp.Version <= lastVersion {
			return snapshot{}, fail("checkpoint #%d version %d is not above the previous one's %d", i, cp.Version, lastVersion)
		}
		lastVersion = cp.Version
	}
	if err := checkSession(ctx, s, sess, cps); err != nil {
		return snapshot{}, fail("session: %v", err)
	}
	if err := checkStaged(staged, n); err != nil {
		return snapshot{}, fail("staging: %v", err)
	}
	if err := checkSandboxHistory(ctx, s); err != nil {
		return snapshot{}, fail("sandbox: %v", err)
	}
	return snapshot{exists: true, n: n, version: sess.Version}, nil
}

// checkSandboxHistory: every write of the child's sandbox changed its
// state, so its history holds one entry per version (the newest
// MaxSandboxTransitions of them), the last one the state the row's facts
// make — a fact written without its history entry, or an entry without
// its fact, breaks it.
func checkSandboxHistory(ctx context.Context, s store.Store) error {
	sb, err := s.GetSandbox(ctx, sandboxID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // killed before CreateSandbox committed
	}
	if err != nil {
		return err
	}
	trs, err := s.ListSandboxTransitions(ctx, sandboxID)
	if err != nil {
		return err
	}
	want := min(sb.Version, store.MaxSandboxTransitions)
	if int64(len(trs)) != want {
		return fmt.Errorf("version %d (%s) with %d history entries, want %d", sb.Version, sb.State(), len(trs), want)
	}
	last := trs[len(trs)-1]
	if last.Seq != sb.Version || last.State != sb.State() || last.Generation != sb.Generation {
		return fmt.Errorf("version %d is %s at generation %d, but the history ends with %+v", sb.Version, sb.State(), sb.Generation, last)
	}
	return nil
}

// checkMessages: iteration i wrote, in order, its appended message and then
// its promoted staged message, so message j (0-based) belongs to iteration
// j/2+1. Exactly 2n messages means no iteration is missing, half there or
// there twice.
func checkMessages(msgs []store.Message, n int64) error {
	if int64(len(msgs)) != 2*n {
		return fmt.Errorf("%d messages for %d committed iterations, want %d", len(msgs), n, 2*n)
	}
	for j, m := range msgs {
		want := msgContent{I: int64(j/2 + 1), Kind: "append"}
		role := "user"
		if j%2 == 1 {
			want.Kind, role = "staged", "assistant"
		}
		var got msgContent
		if err := json.Unmarshal(m.Content, &got); err != nil {
			return fmt.Errorf("message seq %d: content %s: %v", m.Seq, m.Content, err)
		}
		if m.Seq != int64(j+1) || got != want || m.Role != role || m.SessionID != sessionID {
			return fmt.Errorf("message #%d is seq %d role %s content %s, want seq %d role %s content %+v",
				j+1, m.Seq, m.Role, m.Content, j+1, role, want)
		}
	}
	return nil
}

func checkCheckpoint(cp *store.Checkpoint, i int64) error {
	if cp.StepCount != i || cp.State.StepCount != i {
		return fmt.Errorf("StepCount %d, state StepCount %d, want %d (one checkpoint per iteration, in order)", cp.StepCount, cp.State.StepCount, i)
	}
	if cp.MessageCount != 2*i {
		return fmt.Errorf("MessageCount %d, want %d (the messages of iterations 1..%d)", cp.MessageCount, 2*i, i)
	}
	if err := wantCustom(cp.State.CustomState, i); err != nil {
		return err
	}
	if cp.Source != store.CheckpointSourceStaging || cp.SessionID != sessionID {
		return fmt.Errorf("source %q session %q, want %q %q", cp.Source, cp.SessionID, store.CheckpointSourceStaging, sessionID)
	}
	return nil
}

// wantCustom: the state of iteration i is {"i": i} with the staged write
// {"staged_i": i} merged in, and nothing else.
func wantCustom(raw json.RawMessage, i int64) error {
	var got map[string]int64
	if err := json.Unmarshal(raw, &got); err != nil {
		return fmt.Errorf("custom state %s: %v", raw, err)
	}
	if want := map[string]int64{"i": i, "staged_i": i}; !maps.Equal(got, want) {
		return fmt.Errorf("custom state %s, want %v", raw, want)
	}
	return nil
}

func checkSession(ctx context.Context, s store.Store, sess *store.Session, cps []*store.Checkpoint) error {
	n := int64(len(cps))
	if n == 0 {
		if sess.CheckpointID != "" || sess.StepCount != 0 {
			return fmt.Errorf("no checkpoints but pointer %q, StepCount %d", sess.CheckpointID, sess.StepCount)
		}
		return nil
	}
	last := cps[n-1]
	if sess.CheckpointID != last.ID {
		return fmt.Errorf("checkpoint pointer %q, want the newest checkpoint %q", sess.CheckpointID, last.ID)
	}
	if sess.Version != last.Version {
		return fmt.Errorf("version %d, want the newest checkpoint's %d (a write half-applied, or one outside a checkpoint)", sess.Version, last.Version)
	}
	if sess.StepCount != n || sess.Status != store.StatusActive {
		return fmt.Errorf("StepCount %d status %q, want %d %q", sess.StepCount, sess.Status, n, store.StatusActive)
	}
	if err := wantCustom(sess.CustomState, n); err != nil {
		return err
	}
	latest, err := s.GetLatestCheckpoint(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("GetLatestCheckpoint: %v", err)
	}
	if latest.ID != last.ID {
		return fmt.Errorf("GetLatestCheckpoint = %s, want the newest %s", latest.ID, last.ID)
	}
	return nil
}

// checkStaged: only the change of the iteration in flight (n+1) may still be
// staged; a staged change of a committed iteration was promoted and kept.
func checkStaged(staged []store.StagedChange, n int64) error {
	switch {
	case len(staged) == 0:
		return nil
	case len(staged) > 1:
		return fmt.Errorf("%d staged changes, want at most the one of iteration %d", len(staged), n+1)
	}
	c := staged[0]
	if c.StepID != stepID(n+1) {
		return fmt.Errorf("staged change %q left after %d committed iterations; only %q may be staged (a promoted change still staged?)", c.StepID, n, stepID(n+1))
	}
	var got msgContent
	if len(c.Messages) != 1 || json.Unmarshal(c.Messages[0].Content, &got) != nil || got != (msgContent{I: n + 1, Kind: "staged"}) {
		return fmt.Errorf("staged change %q holds messages %+v, want one {i:%d staged}", c.StepID, c.Messages, n+1)
	}
	var writes map[string]int64
	if json.Unmarshal(c.StateWrites, &writes) != nil || !maps.Equal(writes, map[string]int64{"staged_i": n + 1}) {
		return fmt.Errorf("staged change %q state writes %s, want {\"staged_i\":%d}", c.StepID, c.StateWrites, n+1)
	}
	return nil
}

// evidence summarises what was read, for the failure message.
func evidence(sess *store.Session, cps []*store.Checkpoint, msgs []store.Message, staged []store.StagedChange) []string {
	out := []string{fmt.Sprintf("session: version %d stepCount %d pointer %q custom %s",
		sess.Version, sess.StepCount, sess.CheckpointID, compact(sess.CustomState))}
	for k, cp := range tail(cps, 3) {
		out = append(out, fmt.Sprintf("checkpoint[%d of last 3]: id %s step %d messages %d version %d custom %s",
			k, cp.ID, cp.StepCount, cp.MessageCount, cp.Version, compact(cp.State.CustomState)))
	}
	out = append(out, fmt.Sprintf("%d checkpoints, %d messages", len(cps), len(msgs)))
	for _, m := range tail(msgs, 4) {
		out = append(out, fmt.Sprintf("message seq %d %s %s", m.Seq, m.Role, compact(m.Content)))
	}
	for _, c := range staged {
		out = append(out, fmt.Sprintf("staged %s: %d messages, writes %s", c.StepID, len(c.Messages), compact(c.StateWrites)))
	}
	return out
}

func tail[T any](s []T, n int) []T { return s[max(0, len(s)-n):] }

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Package lineage forks and rewinds Managed Agents sessions and tells
// their history: what a session went through, turn by turn, and the
// branches a rewind cut off. It is built on the one session model (every
// step boundary is a checkpoint naming a workspace snapshot), so a fork or
// a rewind gets the workspace exactly as it was at the chosen event.
// Handlers decode, call one method here, encode.
package lineage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Errors of the service; each wraps the store sentinel the API
// maps to a status.
var (
	// ErrRunning: the session runs a turn; a rewind needs it idle.
	ErrRunning = fmt.Errorf("the session is running a turn: interrupt it (user.interrupt) and wait for session.status_idle before a rewind: %w", store.ErrConflict)
	// ErrWorkspaceUnknown: the workspace at the event was not recorded.
	ErrWorkspaceUnknown = fmt.Errorf("the workspace at that event was not recorded (its snapshot failed): pick a later event: %w", store.ErrConflict)
)

// Store is what the service reads and writes.
type Store interface {
	store.ManagedStore
	ListCheckpoints(ctx context.Context, sessionID string) ([]*store.Checkpoint, error)
	ListRuns(ctx context.Context, sessionID string) ([]*store.Run, error)
	ListSessionResources(ctx context.Context, sessionID, afterID string, limit int) ([]*store.SessionResource, error)
}

// Config configures a Service.
type Config struct {
	Store Store
	// Publish hands stored events to live subscribers (*session.EventLog).
	Publish func(sessionID string, evs []store.SessionEvent)
	// Wake tells the session runtime a session may have input to answer
	// (a fork or rewind at a user message answers it).
	Wake func(sessionID string)
	// Workspaces snapshots a live sandbox's workspace (a rewind keeps the
	// cut-off timeline's workspace with its branch); nil keeps the last
	// checkpoint's.
	Workspaces session.Workspaces
	// Sandboxes destroys the sandbox a rewind leaves behind; nil leaves it
	// (it hibernates when idle).
	Sandboxes interface {
		Destroy(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
	}
	// CopyResources gives a fork its source's resources (new ids, tokens
	// sealed for them); nil forks without resources.
	CopyResources func(rs []*store.SessionResource, sessionID string) ([]*store.SessionResource, error)
	Log           *slog.Logger
}

// Service forks and rewinds sessions.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: cfg.Log}
}

// session reads a session of the tenant (another tenant's is not found).
func (l *Service) session(ctx context.Context, tenantID, id string) (*store.ManagedSession, error) {
	s, err := l.cfg.Store.GetManagedSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.TenantID != tenantID || s.ThreadOf != "" {
		return nil, fmt.Errorf("session %s: %w", id, store.ErrNotFound)
	}
	// A coordinator's threads are sessions of their own that a fork or a
	// rewind would have to take along, cut at the same point.
	threads, err := l.cfg.Store.ListSessionThreads(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(threads) > 0 {
		return nil, fmt.Errorf("session %s has %d threads (multi-agent): fork and rewind of a session with threads are not supported yet: %w",
			id, len(threads), store.ErrInvalid)
	}
	return s, nil
}

// at resolves the event a fork or rewind starts from: its Seq (eventID ""
// is the latest), the session's last Seq, and the log up to the event.
func (l *Service) at(ctx context.Context, s *store.ManagedSession, eventID string) (atSeq, last int64, evs []store.SessionEvent, err error) {
	last, err = l.cfg.Store.LastEventSeq(ctx, s.ID)
	if err != nil {
		return 0, 0, nil, err
	}
	atSeq = last
	if eventID != "" {
		ev, err := l.cfg.Store.GetEvent(ctx, s.ID, eventID)
		if errors.Is(err, store.ErrNotFound) {
			return 0, 0, nil, fmt.Errorf("session %s has no event %q (field \"event_id\"): %w", s.ID, eventID, store.ErrNotFound)
		}
		if err != nil {
			return 0, 0, nil, err
		}
		atSeq = ev.Seq
	}
	if atSeq == 0 {
		return 0, 0, nil, fmt.Errorf("session %s has no events yet: nothing to start from: %w", s.ID, store.ErrInvalid)
	}
	evs, err = l.cfg.Store.ListEvents(ctx, store.ListEventsParams{SessionID: s.ID, AfterSeq: 0, BeforeSeq: atSeq + 1})
	if err != nil {
		return 0, 0, nil, err
	}
	return atSeq, last, evs, nil
}

// taken is the queue cursor at the cut: the last session.status_running at
// or before it. User messages after it were not taken by a turn that is
// kept, so the next turn answers them (a fork or rewind at a user message
// is asked again).
func taken(evs []store.SessionEvent) int64 {
	var seq int64
	for _, ev := range evs {
		if ev.Type == session.EventStatusRunning {
			seq = ev.Seq
		}
	}
	return seq
}

// wake tells the runtime to look at the session.
func (l *Service) wake(id string) {
	if l.cfg.Wake != nil {
		l.cfg.Wake(id)
	}
}

// workspaceAt is the workspace snapshot at Seq atSeq among the session's
// checkpoints cps: the one of the last step checkpoint at or before it
// (every tool result that may have written is one), else the one the
// session started from.
func workspaceAt(s *store.ManagedSession, cps []*store.Checkpoint, atSeq int64) (string, error) {
	ws := s.Lineage.WorkspaceSeed
	for _, cp := range cps {
		if cp.MessageCount <= atSeq && cp.Source == store.CheckpointSourceStep {
			ws = cp.Workspace
		}
	}
	if ws == session.WorkspaceUnknown {
		return "", ErrWorkspaceUnknown
	}
	return ws, nil
}

// Fork creates a new session whose transcript is the session's up to
// eventID (the latest when "") and whose workspace is the session's as it
// was there. The source is not touched and both go on independently.
func (l *Service) Fork(ctx context.Context, tenantID, sessionID, eventID string) (*store.ManagedSession, error) {
	src, err := l.session(ctx, tenantID, sessionID)
	if err != nil {
		return nil, err
	}
	atSeq, _, evs, err := l.at(ctx, src, eventID)
	if err != nil {
		return nil, err
	}
	cps, err := l.cfg.Store.ListCheckpoints(ctx, src.ID)
	if err != nil {
		return nil, err
	}
	ws, err := workspaceAt(src, cps, atSeq)
	if err != nil {
		return nil, err
	}
	newID := ids.New("sesn")
	var rs []*store.SessionResource
	if l.cfg.CopyResources != nil {
		srcRs, err := l.cfg.Store.ListSessionResources(ctx, src.ID, "", 0)
		if err != nil {
			return nil, err
		}
		if rs, err = l.cfg.CopyResources(srcRs, newID); err != nil {
			return nil, err
		}
	}
	f, err := l.cfg.Store.ForkManagedSession(ctx, store.ForkParams{FromID: src.ID, NewID: newID, AtSeq: atSeq,
		Append: session.Closing(evs), ProcessedSeq: taken(evs), Workspace: ws, Resources: rs})
	if err != nil {
		return nil, err
	}
	l.wake(f.ID)
	l.log.InfoContext(ctx, "session forked", "session", src.ID, "fork", f.ID, "at_seq", atSeq, "workspace", ws)
	return f, nil
}

// Rewind takes the session back to eventID: the events after it are kept
// as an abandoned branch (a read-only session, listed by Branches), the
// workspace goes back to what it was there, and the session's next turn
// goes on from it. The session must be idle.
func (l *Service) Rewind(ctx context.Context, tenantID, sessionID, eventID string) (sess, branch *store.ManagedSession, err error) {
	cur, err := l.session(ctx, tenantID, sessionID)
	if err != nil {
		return nil, nil, err
	}
	if eventID == "" {
		return nil, nil, fmt.Errorf("field \"event_id\" is required: the event to rewind to: %w", store.ErrInvalid)
	}
	if cur.TerminatedAt != nil {
		return nil, nil, fmt.Errorf("session %s is terminated: %w", cur.ID, store.ErrConflict)
	}
	if _, err := l.cfg.Store.GetRunRow(ctx, cur.ID); err == nil {
		return nil, nil, ErrRunning
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, nil, err
	}
	atSeq, last, evs, err := l.at(ctx, cur, eventID)
	if err != nil {
		return nil, nil, err
	}
	cps, err := l.cfg.Store.ListCheckpoints(ctx, cur.ID)
	if err != nil {
		return nil, nil, err
	}
	ws, err := workspaceAt(cur, cps, atSeq)
	if err != nil {
		return nil, nil, err
	}
	// The branch keeps the cut-off timeline's workspace: its sandbox's as
	// it is now, else its last checkpoint's.
	branchWS, err := workspaceAt(cur, cps, last)
	if err != nil && !errors.Is(err, ErrWorkspaceUnknown) {
		return nil, nil, err
	}
	if cur.SandboxID != "" && l.cfg.Workspaces != nil {
		if id, serr := l.cfg.Workspaces.Snapshot(ctx, cur.TenantID, cur.SandboxID); serr == nil {
			branchWS = id
		} else {
			l.log.WarnContext(ctx, "rewind: snapshot of the cut-off workspace", "session", cur.ID, "err", serr)
		}
	}
	sess, branch, err = l.cfg.Store.RewindManagedSession(ctx, store.RewindParams{SessionID: cur.ID, AtSeq: atSeq,
		BranchID: ids.New("sesn"), Append: session.Closing(evs), ProcessedSeq: taken(evs), Workspace: ws,
		BranchWorkspace: branchWS})
	if err != nil {
		return nil, nil, err
	}
	if branch.SandboxID != "" && l.cfg.Sandboxes != nil {
		// The branch holds the old sandbox until it is gone, so a crash
		// here leaves it named by a session (whose delete destroys it).
		if _, err := l.cfg.Sandboxes.Destroy(ctx, cur.TenantID, branch.SandboxID); err != nil && !errors.Is(err, store.ErrNotFound) {
			l.log.WarnContext(ctx, "rewind: destroy the cut-off sandbox", "session", cur.ID, "sandbox", branch.SandboxID, "err", err)
		} else if b, err := l.clearSandbox(ctx, branch.ID); err == nil {
			branch = b
		}
	}
	if l.cfg.Publish != nil {
		if added, err := l.cfg.Store.ListEvents(ctx, store.ListEventsParams{SessionID: sess.ID, AfterSeq: atSeq}); err == nil {
			l.cfg.Publish(sess.ID, added)
		}
	}
	l.wake(sess.ID)
	l.log.InfoContext(ctx, "session rewound", "session", cur.ID, "at_seq", atSeq, "branch", branch.ID, "workspace", ws)
	return sess, branch, nil
}

// clearSandbox forgets a branch's destroyed sandbox.
func (l *Service) clearSandbox(ctx context.Context, branchID string) (*store.ManagedSession, error) {
	for range 10 {
		b, err := l.cfg.Store.GetManagedSession(ctx, branchID)
		if err != nil {
			return nil, err
		}
		b.SandboxID = ""
		out, err := l.cfg.Store.UpdateManagedSession(ctx, b)
		if !errors.Is(err, store.ErrVersionMismatch) {
			return out, err
		}
	}
	return nil, store.ErrVersionMismatch
}

// Branches lists the abandoned branches of a session, oldest first.
func (l *Service) Branches(ctx context.Context, tenantID, sessionID string) ([]*store.ManagedSession, error) {
	if _, err := l.session(ctx, tenantID, sessionID); err != nil {
		return nil, err
	}
	return l.cfg.Store.ListBranches(ctx, sessionID)
}

// Turn is one turn of a session's history.
type Turn struct {
	Run *store.Run
	// Workspace is the snapshot the turn ended at ("" when none).
	Workspace string
}

// History is a session's lineage, its turns and its branches.
type History struct {
	Session  *store.ManagedSession
	Turns    []Turn
	Branches []*store.ManagedSession
}

// History returns what a session went through.
func (l *Service) History(ctx context.Context, tenantID, sessionID string) (*History, error) {
	s, err := l.session(ctx, tenantID, sessionID)
	if err != nil {
		return nil, err
	}
	runs, err := l.cfg.Store.ListRuns(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	cps, err := l.cfg.Store.ListCheckpoints(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	// Checkpoints are copied under new ids into forks and branches; a run
	// names its end checkpoint by the id it had where the run ran.
	byID := make(map[string]*store.Checkpoint, len(cps))
	for _, cp := range cps {
		byID[cp.ID] = cp
	}
	h := &History{Session: s}
	for _, r := range runs {
		t := Turn{Run: r}
		if cp := byID[r.CheckpointID]; cp != nil {
			t.Workspace = cp.Workspace
		}
		h.Turns = append(h.Turns, t)
	}
	if s.Lineage.BranchOf == "" {
		if h.Branches, err = l.cfg.Store.ListBranches(ctx, s.ID); err != nil {
			return nil, err
		}
	}
	return h, nil
}

package sqlite

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// SaveStateAndPromoteStaging is seed 004's atomic primitive (invariant C-1):
// version check, state write, appended messages, staging promotion,
// checkpoint and pointer move, all in one IMMEDIATE transaction. Any error,
// a stale version included, rolls everything back.
func (s *Store) SaveStateAndPromoteStaging(ctx context.Context, p store.SaveAndPromoteParams) (store.SaveAndPromoteResult, error) {
	enc, err := encodeState(p.State)
	if err != nil {
		return store.SaveAndPromoteResult{}, err
	}
	if err := validateMessages(p.AppendMessages); err != nil {
		return store.SaveAndPromoteResult{}, err
	}
	var res store.SaveAndPromoteResult
	err = s.inTx(ctx, func(tx *wtx) error {
		if err := checkVersion(ctx, tx, p.SessionID, p.ExpectedVersion); err != nil {
			return err
		}
		if _, err := s.appendTx(ctx, tx, p.SessionID, p.AppendMessages); err != nil {
			return err
		}
		// Staged state writes merge over the state being saved: they are the
		// step's own output and come after it.
		var err error
		enc.custom, res.PromotedStages, err = s.promoteTx(ctx, tx, p.SessionID, enc.custom)
		if err != nil {
			return err
		}
		sess, err := s.writeState(ctx, tx, p.SessionID, enc, p.State.StepCount)
		if err != nil {
			return err
		}
		cp, err := s.writeCheckpoint(ctx, tx, sess, p.Checkpoint, store.CheckpointSourceStaging)
		if err != nil {
			return err
		}
		res.NewVersion, res.Checkpoint, res.MessageCount = sess.Version, *cp, cp.MessageCount
		return nil
	})
	if err != nil {
		return store.SaveAndPromoteResult{}, fmt.Errorf("save and promote %q: %w", p.SessionID, err)
	}
	return res, nil
}

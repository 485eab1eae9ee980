package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// RekeyReport is what a re-encryption did.
type RekeyReport struct {
	Key         string // the key everything is sealed with now
	Reencrypted int
	Gone        int // deleted while the rotation ran
}

// rekeyPasses bounds the passes over the store: a pass that re-encrypts
// nothing ends the rotation; a credential created under an old key while a
// pass ran (a daemon that had not noticed the new key yet) is caught by the
// next pass.
const rekeyPasses = 10

// Rekey re-encrypts every credential (every tenant, archived too) that is
// not sealed with the current key. It is safe to kill at any point: each
// row is rewritten whole in its own transaction, and the old keys stay in
// the file, so every row opens with the key it names; running it again
// finishes the work. afterEach, when set, is called after each rewrite
// (progress; a crash test's failpoint).
func (s *Service) Rekey(ctx context.Context, afterEach func(done int)) (RekeyReport, error) {
	current, err := s.keys.Current()
	if err != nil {
		return RekeyReport{}, err
	}
	rep := RekeyReport{Key: current}
	for pass := 0; pass < rekeyPasses; pass++ {
		before := rep.Reencrypted
		after := ""
		for {
			batch, err := s.st.ListCredentialsNotUnderKey(ctx, current, after, 100)
			if err != nil {
				return rep, err
			}
			for _, c := range batch {
				done, err := s.rekeyOne(ctx, c, current)
				switch {
				case errors.Is(err, store.ErrNotFound):
					rep.Gone++
				case err != nil:
					return rep, err
				case done:
					rep.Reencrypted++
					if afterEach != nil {
						afterEach(rep.Reencrypted)
					}
				}
			}
			if len(batch) < 100 {
				break
			}
			after = batch[len(batch)-1].ID
		}
		if rep.Reencrypted == before {
			return rep, nil
		}
	}
	return rep, fmt.Errorf("credentials kept appearing under old keys after %d passes; run rotate-key again", rekeyPasses)
}

// rekeyOne reseals one credential under key; a concurrent write (a token
// refresh) makes it read the row again. It reports false when the row was
// already under key.
func (s *Service) rekeyOne(ctx context.Context, c *store.VaultCredential, key string) (bool, error) {
	for attempt := 0; attempt < 5; attempt++ {
		if c.KeyID == key {
			return false, nil
		}
		sec, err := s.Secrets(c)
		if err != nil {
			return false, err
		}
		sealed, keyID, err := s.seal(c.TenantID, c.ID, sec)
		if err != nil {
			return false, err
		}
		if keyID != key {
			return false, fmt.Errorf("the key file's current key changed to %s during the rotation to %s (another rotate-key?); run rotate-key again", keyID, key)
		}
		_, err = s.st.RekeyVaultCredential(ctx, c.ID, c.Version, sealed, keyID)
		if !errors.Is(err, store.ErrVersionMismatch) {
			return err == nil, err
		}
		if c, err = s.st.GetVaultCredential(ctx, c.ID); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("credential %s kept changing while it was re-encrypted; run rotate-key again", c.ID)
}

// StillUnder counts credentials sealed with a key other than the current
// one (a rotation is complete when it is 0).
func (s *Service) StillUnder(ctx context.Context) (int, error) {
	current, err := s.keys.Current()
	if err != nil {
		return 0, err
	}
	rows, err := s.st.ListCredentialsNotUnderKey(ctx, current, "", 0)
	return len(rows), err
}

package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ResourceTokens is the other table the keyring seals into: the
// authorization tokens of sessions' github_repository resources
// (internal/resources seals them bound to tenant and resource id). A
// rotation re-seals them too, or dropping the old key would leave them
// unopenable.
type ResourceTokens interface {
	GetSessionResource(ctx context.Context, id string) (*store.SessionResource, error)
	RekeySessionResourceSecret(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*store.SessionResource, error)
	ListSessionResourcesNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*store.SessionResource, error)
}

// RekeyReport is what a re-encryption did.
type RekeyReport struct {
	Key         string // the key everything is sealed with now
	Reencrypted int    // credentials
	Resources   int    // session resource tokens
	Gone        int    // deleted while the rotation ran
}

// rekeyPasses bounds the passes over the store: a pass that re-encrypts
// nothing ends the rotation; a row created under an old key while a pass
// ran (a daemon that had not noticed the new key yet) is caught by the next
// pass.
const rekeyPasses = 10

// Rekey re-encrypts every credential (every tenant, archived too) and every
// session resource token that is not sealed with the current key. It is
// safe to kill at any point: each row is rewritten whole in its own
// transaction, and the old keys stay in the file, so every row opens with
// the key it names; running it again finishes the work. afterEach, when
// set, is called after each rewrite with the count so far (progress; a
// crash test's failpoint).
func (s *Service) Rekey(ctx context.Context, afterEach func(done int)) (RekeyReport, error) {
	current, err := s.keys.Current()
	if err != nil {
		return RekeyReport{}, err
	}
	rep := RekeyReport{Key: current}
	done := func(counter *int) {
		*counter++
		if afterEach != nil {
			afterEach(rep.Reencrypted + rep.Resources)
		}
	}
	for pass := 0; pass < rekeyPasses; pass++ {
		before := rep.Reencrypted + rep.Resources
		err := rekeyAll(ctx, &rep, func(after string) ([]*store.VaultCredential, error) {
			return s.st.ListCredentialsNotUnderKey(ctx, current, after, 100)
		}, func(c *store.VaultCredential) string { return c.ID }, func(c *store.VaultCredential) (bool, error) {
			return s.rekeyOne(ctx, c, current)
		}, func() { done(&rep.Reencrypted) })
		if err != nil {
			return rep, err
		}
		if s.res != nil {
			err := rekeyAll(ctx, &rep, func(after string) ([]*store.SessionResource, error) {
				return s.res.ListSessionResourcesNotUnderKey(ctx, current, after, 100)
			}, func(r *store.SessionResource) string { return r.ID }, func(r *store.SessionResource) (bool, error) {
				return s.rekeyResource(ctx, r, current)
			}, func() { done(&rep.Resources) })
			if err != nil {
				return rep, err
			}
		}
		if rep.Reencrypted+rep.Resources == before {
			return rep, nil
		}
	}
	return rep, fmt.Errorf("secrets kept appearing under old keys after %d passes; run rotate-key again", rekeyPasses)
}

// rekeyAll pages through list and re-seals each row with one.
func rekeyAll[T any](ctx context.Context, rep *RekeyReport, list func(after string) ([]T, error), id func(T) string,
	one func(T) (bool, error), done func()) error {
	after := ""
	for {
		batch, err := list(after)
		if err != nil {
			return err
		}
		for _, row := range batch {
			ok, err := one(row)
			switch {
			case errors.Is(err, store.ErrNotFound):
				rep.Gone++
			case err != nil:
				return err
			case ok:
				done()
			}
		}
		if len(batch) < 100 {
			return nil
		}
		after = id(batch[len(batch)-1])
	}
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
			return false, keyChanged(keyID, key)
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

// rekeyResource reseals one session resource's token under key, as
// rekeyOne does a credential: a concurrent write (a new
// authorization_token through the API) makes it read the row again rather
// than put the old token back.
func (s *Service) rekeyResource(ctx context.Context, r *store.SessionResource, key string) (bool, error) {
	for attempt := 0; attempt < 5; attempt++ {
		if r.KeyID == key || len(r.Secret) == 0 {
			return false, nil
		}
		plain, err := s.keys.Open(r.TenantID, r.ID, r.KeyID, r.Secret)
		if err != nil {
			return false, fmt.Errorf("session resource %s: %w", r.ID, err)
		}
		sealed, keyID, err := s.keys.Seal(r.TenantID, r.ID, plain)
		clear(plain)
		if err != nil {
			return false, err
		}
		if keyID != key {
			return false, keyChanged(keyID, key)
		}
		_, err = s.res.RekeySessionResourceSecret(ctx, r.ID, r.Version, sealed, keyID)
		if !errors.Is(err, store.ErrVersionMismatch) {
			return err == nil, err
		}
		if r, err = s.res.GetSessionResource(ctx, r.ID); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("session resource %s kept changing while it was re-encrypted; run rotate-key again", r.ID)
}

func keyChanged(now, want string) error {
	return fmt.Errorf("the key file's current key changed to %s during the rotation to %s (another rotate-key?); run rotate-key again", now, want)
}

// StillUnder counts credentials and session resource tokens sealed with a
// key other than the current one (a rotation is complete, and the old keys
// may go, when it is 0).
func (s *Service) StillUnder(ctx context.Context) (int, error) {
	current, err := s.keys.Current()
	if err != nil {
		return 0, err
	}
	rows, err := s.st.ListCredentialsNotUnderKey(ctx, current, "", 0)
	if err != nil || s.res == nil {
		return len(rows), err
	}
	res, err := s.res.ListSessionResourcesNotUnderKey(ctx, current, "", 0)
	return len(rows) + len(res), err
}

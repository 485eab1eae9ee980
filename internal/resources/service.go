package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Store is what the resources layer keeps and reads. Clones of
// repositories go through the op journal.
type Store interface {
	store.SessionResourceStore
	StartOp(ctx context.Context, op *store.Op) (*store.Op, error)
	CompleteOp(ctx context.Context, sessionID, opID string, result json.RawMessage) (*store.Op, error)
	GetManagedSession(ctx context.Context, id string) (*store.ManagedSession, error)
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

// Config configures a Service.
type Config struct {
	Store Store
	// Keys seals repository tokens; nil refuses authorization_token.
	Keys Sealer
	// Dir holds the host trees (<Dir>/<session id>/…); the daemon owns it.
	Dir string
	// Sandboxes reaches a session's sandbox through its guest.
	Sandboxes Sandboxes
	// Git is the git binary ("" = "git" on PATH).
	Git string
	// GitInternalHosts are the hosts on the daemon's own networks
	// (loopback, link-local, private ranges) repositories may be cloned
	// from ([resources] git_internal_hosts); every other repository host
	// must resolve to public addresses only.
	GitInternalHosts []egress.HostPattern
	// Resolver resolves repository hosts (nil: net.DefaultResolver).
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
	// MaxOutputBytes bounds one collected output file (default 1 GiB).
	MaxOutputBytes int64
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	Log *slog.Logger
	// Failpoint, when set, is called at the named points (Fail*)
	// (crash tests hang the process there to SIGKILL it).
	Failpoint func(name string)
}

// FailAfterMemorySync: a read_write store's changes are memory versions;
// the bases they made are not yet saved beside the session's tree, so a
// re-run syncs the same changes again.
const FailAfterMemorySync = "after-memory-sync"

func (s *Service) failpoint(name string) {
	if s.cfg.Failpoint != nil {
		s.cfg.Failpoint(name)
	}
}

// Service runs sessions' resources: the API's checks and rows, and the
// session.ContextHook that puts them in the sandbox.
type Service struct {
	cfg Config
	log *slog.Logger

	mu  sync.RWMutex
	fs  Files
	mem Memory

	// locks serialises materialisation per session.
	locks sync.Map // session id → *sync.Mutex
}

// New returns a Service. Files and memory stores are refused until
// SetFiles and SetMemory give their services.
func New(c Config) *Service {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Git == "" {
		c.Git = "git"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = 1 << 30
	}
	return &Service{cfg: c, log: c.Log}
}

// SetFiles gives the files service (file resources, outputs).
func (s *Service) SetFiles(f Files) { s.mu.Lock(); s.fs = f; s.mu.Unlock() }

// SetMemory gives the memory service (memory_store resources).
func (s *Service) SetMemory(m Memory) { s.mu.Lock(); s.mem = m; s.mu.Unlock() }

func (s *Service) files() Files   { s.mu.RLock(); defer s.mu.RUnlock(); return s.fs }
func (s *Service) memory() Memory { s.mu.RLock(); defer s.mu.RUnlock(); return s.mem }

// Build checks the resources of a new session (field is the request's
// field, "resources") and returns their rows, ready for Create once the
// session exists. Nothing is written.
func (s *Service) Build(ctx context.Context, tenantID, sessionID, field string, specs []Spec) ([]*store.SessionResource, error) {
	if len(specs) > MaxResources {
		return nil, bad(field, "has %d resources; the limit is %d", len(specs), MaxResources)
	}
	var out []*store.SessionResource
	for i, sp := range specs {
		f := fmt.Sprintf("%s[%d]", field, i)
		r, err := s.build(ctx, tenantID, sessionID, f, sp)
		if err != nil {
			return nil, err
		}
		if err := checkOverlap(f, r, out); err != nil {
			return nil, err
		}
		r.ID = ids.New("sesrsc")
		if err := s.sealToken(f, r, sp.Token); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// checkOverlap refuses a mount path that is another resource's, or above
// or below it: one would hide the other.
func checkOverlap(field string, r *store.SessionResource, others []*store.SessionResource) error {
	for _, o := range others {
		if overlaps(r.MountPath, o.MountPath) {
			return &InputError{Status: http.StatusConflict, Field: field + ".mount_path",
				Msg: fmt.Sprintf("%q overlaps %q, the mount path of resource %s; give each resource its own path", r.MountPath, o.MountPath, o.ID)}
		}
	}
	return nil
}

func (s *Service) sealToken(field string, r *store.SessionResource, token string) error {
	if token == "" {
		return nil
	}
	if s.cfg.Keys == nil {
		return bad(field+".authorization_token", "is not supported yet: this daemon has no key to seal it with")
	}
	sealed, keyID, err := s.cfg.Keys.Seal(r.TenantID, r.ID, []byte(token))
	if err != nil {
		return fmt.Errorf("seal the token of resource %s: %w", r.ID, err)
	}
	r.Secret, r.KeyID = sealed, keyID
	return nil
}

// token opens a repository resource's token ("" when it has none).
func (s *Service) token(r *store.SessionResource) (string, error) {
	if len(r.Secret) == 0 {
		return "", nil
	}
	if s.cfg.Keys == nil {
		return "", fmt.Errorf("resource %s: its token is sealed and this daemon has no keyring", r.ID)
	}
	b, err := s.cfg.Keys.Open(r.TenantID, r.ID, r.KeyID, r.Secret)
	if err != nil {
		return "", fmt.Errorf("resource %s: open its token: %w", r.ID, err)
	}
	return string(b), nil
}

// CopyFor returns the rows that give session sessionID the resources rs
// (another session's: a fork's source): new ids, and each repository's
// token opened and sealed again for its new id (a sealed token is bound to
// its resource). Nothing is written.
func (s *Service) CopyFor(rs []*store.SessionResource, sessionID string) ([]*store.SessionResource, error) {
	out := make([]*store.SessionResource, 0, len(rs))
	for _, r := range rs {
		token, err := s.token(r)
		if err != nil {
			return nil, err
		}
		c := &store.SessionResource{ID: ids.New("sesrsc"), TenantID: r.TenantID, SessionID: sessionID,
			Kind: r.Kind, MountPath: r.MountPath, Doc: r.Doc}
		if err := s.sealToken("resources", c, token); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Create writes the rows Build made.
func (s *Service) Create(ctx context.Context, rs []*store.SessionResource) ([]*store.SessionResource, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	return s.cfg.Store.CreateSessionResources(ctx, rs)
}

// Add checks one resource and attaches it to an existing session.
func (s *Service) Add(ctx context.Context, sess *store.ManagedSession, sp Spec) (*store.SessionResource, error) {
	cur, err := s.List(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	if len(cur) >= MaxResources {
		return nil, bad("type", "session %s has %d resources; the limit is %d", sess.ID, len(cur), MaxResources)
	}
	if sp.Type == KindMemoryStore {
		// A read_write store is a mount of its own, fixed when the sandbox
		// starts; stores are attached when the session is created.
		return nil, bad("type", "memory stores are attached when the session is created (its resources field); they cannot be added later")
	}
	r, err := s.build(ctx, sess.TenantID, sess.ID, "", sp)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			ie.Field = trimDot(ie.Field)
		}
		return nil, err
	}
	if err := checkOverlap("", r, cur); err != nil {
		err.(*InputError).Field = "mount_path"
		return nil, err
	}
	r.ID = ids.New("sesrsc")
	if err := s.sealToken("", r, sp.Token); err != nil {
		return nil, err
	}
	out, err := s.cfg.Store.CreateSessionResources(ctx, []*store.SessionResource{r})
	if errors.Is(err, store.ErrConflict) {
		return nil, &InputError{Status: http.StatusConflict, Field: "mount_path", Msg: fmt.Sprintf("%q is the mount path of another resource of the session", r.MountPath)}
	}
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func trimDot(f string) string {
	if len(f) > 0 && f[0] == '.' {
		return f[1:]
	}
	return f
}

// List returns a session's resources by id.
func (s *Service) List(ctx context.Context, sessionID string) ([]*store.SessionResource, error) {
	return s.cfg.Store.ListSessionResources(ctx, sessionID, "", 0)
}

// Page returns up to limit resources after afterID.
func (s *Service) Page(ctx context.Context, sessionID, afterID string, limit int) ([]*store.SessionResource, error) {
	return s.cfg.Store.ListSessionResources(ctx, sessionID, afterID, limit)
}

// Get returns a resource of the session, or ErrNotFound.
func (s *Service) Get(ctx context.Context, sessionID, id string) (*store.SessionResource, error) {
	r, err := s.cfg.Store.GetSessionResource(ctx, id)
	if err == nil && r.SessionID != sessionID {
		err = fmt.Errorf("session resource %s: %w", id, store.ErrNotFound)
	}
	return r, err
}

// UpdateToken rotates a repository resource's token; the next clone uses it.
func (s *Service) UpdateToken(ctx context.Context, r *store.SessionResource, token string) (*store.SessionResource, error) {
	if r.Kind != KindGitHub {
		return nil, bad("authorization_token", "only github_repository resources have a token; resource %s is a %s", r.ID, r.Kind)
	}
	if token == "" {
		return nil, bad("authorization_token", "must not be empty")
	}
	cp := *r
	cp.Secret, cp.KeyID = nil, ""
	if err := s.sealToken("", &cp, token); err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			ie.Field = "authorization_token"
		}
		return nil, err
	}
	return s.cfg.Store.UpdateSessionResourceSecret(ctx, r.ID, cp.Secret, cp.KeyID)
}

// Delete detaches a resource; the sandbox loses it at the next tool call.
func (s *Service) Delete(ctx context.Context, r *store.SessionResource) error {
	return s.cfg.Store.DeleteSessionResource(ctx, r.ID)
}

// Render is a resource in the SDK's wire shape (never its token).
func Render(r *store.SessionResource) map[string]any {
	out := map[string]any{}
	_ = json.Unmarshal(r.Doc, &out)
	out["id"], out["type"], out["mount_path"] = r.ID, r.Kind, r.MountPath
	out["created_at"], out["updated_at"] = r.CreatedAt.UTC().Format(time.RFC3339Nano), r.UpdatedAt.UTC().Format(time.RFC3339Nano)
	return out
}

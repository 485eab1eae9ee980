package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Sandboxes reaches a sandbox's guest (the manager; it wakes the sandbox).
type Sandboxes interface {
	Client(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error
}

var sessionIDRE = regexp.MustCompile(`^sesn_[A-Za-z0-9]{1,64}$`)

// layout is a session's host directories, all under the daemon's Dir.
type layout struct{ root string }

func (s *Service) layout(sessionID string) (layout, error) {
	if !sessionIDRE.MatchString(sessionID) || s.cfg.Dir == "" {
		return layout{}, fmt.Errorf("session %q: no host tree", sessionID)
	}
	return layout{root: filepath.Join(s.cfg.Dir, sessionID)}, nil
}

func (l layout) mnt() string     { return filepath.Join(l.root, "mnt") }
func (l layout) outputs() string { return filepath.Join(l.root, "outputs") }
func (l layout) git() string     { return filepath.Join(l.root, "git") }
func (l layout) state() string   { return filepath.Join(l.root, "state.json") }

// host is where a /mnt path lives in the host tree.
func (l layout) host(sandboxPath string) string {
	return filepath.Join(l.mnt(), filepath.FromSlash(strings.TrimPrefix(sandboxPath, mntRoot)))
}

// ensure makes the tree, with the mount points of the rw binds inside the
// ro one (the sandbox could not make them under a read-only /mnt).
func (l layout) ensure() error {
	for _, d := range []string{l.mnt(), l.host(OutputsPath), l.host(defaultUploadsDir), l.host(linksDir), l.host(stagingDir), l.outputs()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Hooks are the sandbox manager hooks: the /mnt binds of a session's
// sandbox. They are fixed when the sandbox starts.
func (s *Service) Hooks() sandbox.Hooks {
	return sandbox.Hooks{Mounts: s.mounts, BeforeStop: s.beforeStop}
}

// sessionOf is the session sb belongs to, or nil. Only the session's own
// sandbox counts: metadata alone is not proof (the session names its
// sandbox once it made it).
func (s *Service) sessionOf(ctx context.Context, sb *store.Sandbox) *store.ManagedSession {
	sessionID := sb.Metadata["agentkernel.session"]
	if sessionID == "" {
		return nil
	}
	sess, err := s.cfg.Store.GetManagedSession(ctx, sessionID)
	if err != nil || sess.TenantID != sb.TenantID || sb.SessionKey != sessionID || (sess.SandboxID != "" && sess.SandboxID != sb.ID) {
		return nil
	}
	return sess
}

func (s *Service) mounts(sb *store.Sandbox) []sandbox.Mount {
	sess := s.sessionOf(context.Background(), sb)
	if sess == nil {
		return nil
	}
	sessionID := sess.ID
	l, err := s.layout(sessionID)
	if err == nil {
		err = l.ensure()
	}
	if err != nil {
		s.log.Warn("session resources: no /mnt for the sandbox", "session", sessionID, "sandbox", sb.ID, "err", err)
		return nil
	}
	out := []sandbox.Mount{
		{Source: l.mnt(), Target: mntRoot, ReadOnly: true},
		{Source: l.outputs(), Target: OutputsPath},
	}
	rw, err := s.rwMemoryMounts(context.Background(), l, sessionID)
	if err != nil {
		s.log.Warn("session resources: memory stores not mounted", "session", sessionID, "sandbox", sb.ID, "err", err)
	}
	for _, m := range rw {
		out = append(out, sandbox.Mount{Source: m[0], Target: m[1]})
	}
	return out
}

// state is what a session's sandbox shows, as the daemon last made it.
// It lives beside the tree, never inside what the sandbox sees.
type state struct {
	// Instance is the sandbox instance (id and start time) the guest-side
	// work (links, repository copies) was done in.
	Instance string `json:"instance"`
	// Done maps resource id → what was materialised.
	Done map[string]doneEntry `json:"done"`
	// Guest maps resource id → true when its guest-side part is in place
	// in Instance.
	Guest map[string]bool `json:"guest"`
	// Mem maps a read_write memory store resource's id → its memories'
	// bases (relative path → version and hash).
	Mem map[string]map[string]memBase `json:"mem,omitempty"`
}

type doneEntry struct {
	Kind      string `json:"kind"`
	MountPath string `json:"mount_path"`
	// Host is the tree path (relative to mnt) holding a file's bytes.
	Host string `json:"host,omitempty"`
}

func (l layout) load() (*state, error) {
	st := &state{Done: map[string]doneEntry{}, Guest: map[string]bool{}}
	b, err := os.ReadFile(l.state())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%s: %w", l.state(), err)
	}
	if st.Done == nil {
		st.Done = map[string]doneEntry{}
	}
	if st.Guest == nil {
		st.Guest = map[string]bool{}
	}
	return st, nil
}

func (l layout) save(st *state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeAtomic(l.state(), b, 0o600)
}

// writeAtomic writes a daemon-owned file through a temp file and rename.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (s *Service) lock(sessionID string) func() {
	v, _ := s.locks.LoadOrStore(sessionID, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Forget removes a session's host tree (the session was deleted).
func (s *Service) Forget(sessionID string) error {
	l, err := s.layout(sessionID)
	if err != nil {
		return nil
	}
	// Under the session's lock, so a Prepare, TurnEnd or BeforeStop in
	// flight finishes before the tree goes; the entry is dropped while
	// held, and a later lock (none should come) makes a fresh one.
	unlock := s.lock(sessionID)
	defer unlock()
	s.locks.Delete(sessionID)
	return os.RemoveAll(l.root)
}

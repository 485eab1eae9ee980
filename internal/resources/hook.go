package resources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Prepare implements session.ContextHook: the sandbox shows the session's
// resources as they are now. What the host tree already holds is kept;
// guest-side work (links, repository copies) is redone once per sandbox
// instance, so a woken or restored sandbox gets it back.
func (s *Service) Prepare(ctx context.Context, sess *store.ManagedSession, sandboxID string) error {
	l, err := s.layout(sess.ID)
	if err != nil {
		return nil // not a session the daemon made a tree for
	}
	defer s.lock(sess.ID)()
	want, err := s.List(ctx, sess.ID)
	if err != nil {
		return err
	}
	st, err := l.load()
	if err != nil {
		return err
	}
	if len(want) == 0 && len(st.Done) == 0 {
		return nil // nothing placed and nothing to place: most tool calls of most sessions
	}
	if err := l.ensure(); err != nil {
		return err
	}
	// Host side first: the tree is the daemon's own. Nothing is written
	// when nothing changed (this runs before every tool call).
	live := map[string]*store.SessionResource{}
	changed := false
	for _, r := range want {
		live[r.ID] = r
		if r.Kind == KindMemoryStore {
			if _, ok := st.Done[r.ID]; ok {
				continue
			}
			if err := s.placeMemory(ctx, l, st, r); err != nil {
				return err
			}
			st.Done[r.ID] = doneEntry{Kind: r.Kind, MountPath: r.MountPath}
			changed = true
			continue
		}
		if r.Kind != KindFile {
			continue
		}
		if e, ok := st.Done[r.ID]; ok {
			if _, err := os.Lstat(filepath.Join(l.mnt(), e.Host)); err == nil {
				continue
			}
		}
		rel, err := s.placeFile(ctx, l, r)
		if err != nil {
			return err
		}
		st.Done[r.ID] = doneEntry{Kind: r.Kind, MountPath: r.MountPath, Host: rel}
		delete(st.Guest, r.ID)
		changed = true
	}
	if changed {
		if err := l.save(st); err != nil {
			return err
		}
	}
	gone := []string{}
	for id := range st.Done {
		if live[id] == nil {
			gone = append(gone, id)
		}
	}
	needGuest, anyGuest := len(gone) > 0, false
	for _, r := range want {
		if guestSide(r) {
			anyGuest = true
			needGuest = needGuest || !st.Guest[r.ID]
		}
	}
	switch {
	case needGuest:
		return s.guestWork(ctx, sess, sandboxID, l, st, want, gone)
	case !anyGuest:
		return nil // everything is in the host tree: no sandbox instance to check
	default:
		return s.checkInstance(ctx, sess, sandboxID, l, st, want, gone)
	}
}

// guestSide reports whether a resource needs work inside the sandbox.
func guestSide(r *store.SessionResource) bool {
	return r.Kind == KindGitHub || (r.Kind == KindFile && !under(r.MountPath, mntRoot))
}

// checkInstance redoes the guest-side work when the sandbox was started
// again since it was done (woken, restored elsewhere).
func (s *Service) checkInstance(ctx context.Context, sess *store.ManagedSession, sandboxID string, l layout, st *state, want []*store.SessionResource, gone []string) error {
	sb, err := s.cfg.Store.GetSandbox(ctx, sandboxID)
	if err != nil {
		return err
	}
	if instanceOf(sb) == st.Instance {
		return nil
	}
	return s.guestWork(ctx, sess, sandboxID, l, st, want, gone)
}

func instanceOf(sb *store.Sandbox) string {
	if sb.StartedAt == nil {
		return sb.ID
	}
	return fmt.Sprintf("%s@%d", sb.ID, sb.StartedAt.UnixNano())
}

func (s *Service) guestWork(ctx context.Context, sess *store.ManagedSession, sandboxID string, l layout, st *state, want []*store.SessionResource, gone []string) error {
	return s.cfg.Sandboxes.Client(ctx, sess.TenantID, sandboxID, func(c *guest.Client) error {
		sb, err := s.cfg.Store.GetSandbox(ctx, sandboxID)
		if err != nil {
			return err
		}
		if inst := instanceOf(sb); inst != st.Instance {
			st.Instance, st.Guest = inst, map[string]bool{}
		}
		for _, id := range gone {
			if err := s.remove(ctx, c, l, st.Done[id]); err != nil {
				return fmt.Errorf("remove resource %s at %s: %w", id, st.Done[id].MountPath, err)
			}
			delete(st.Done, id)
			delete(st.Guest, id)
			if err := l.save(st); err != nil {
				return err
			}
		}
		for _, r := range want {
			if !guestSide(r) || st.Guest[r.ID] {
				continue
			}
			switch r.Kind {
			case KindFile:
				err = s.link(ctx, c, r)
			case KindGitHub:
				err = s.placeRepo(ctx, c, l, sess.ID, st.Instance, r)
				st.Done[r.ID] = doneEntry{Kind: r.Kind, MountPath: r.MountPath}
			}
			if err != nil {
				return err
			}
			st.Guest[r.ID] = true
			if err := l.save(st); err != nil {
				return err
			}
		}
		return l.save(st)
	})
}

// placeFile writes a file resource's bytes into the tree, read-only:
// at its mount path when that is under /mnt, else under /mnt/.links.
func (s *Service) placeFile(ctx context.Context, l layout, r *store.SessionResource) (string, error) {
	files := s.files()
	if files == nil {
		return "", fmt.Errorf("file resource %s: this daemon runs without the Files API", r.ID)
	}
	var d fileDoc
	if err := jsonInto(r.Doc, &d); err != nil {
		return "", err
	}
	target := r.MountPath
	if !under(target, mntRoot) {
		target = linksDir + "/" + r.ID
	}
	rel := strings.TrimPrefix(target, mntRoot+"/")
	dst := l.host(target)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	body, _, err := files.Open(ctx, r.TenantID, d.FileID)
	if err != nil {
		return "", fmt.Errorf("file resource %s: file %s: %w", r.ID, d.FileID, err)
	}
	defer body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, body)
	if err == nil {
		err = tmp.Chmod(0o444)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", fmt.Errorf("file resource %s: %w", r.ID, err)
	}
	return rel, nil
}

// link points a file resource's mount path outside /mnt at its bytes.
func (s *Service) link(ctx context.Context, c *guest.Client, r *store.SessionResource) error {
	target := linksDir + "/" + r.ID
	return guestSh(ctx, c, `mkdir -p "$(dirname "$1")" && ln -sfn "$2" "$1"`, r.MountPath, target)
}

// remove undoes what a deleted resource left.
func (s *Service) remove(ctx context.Context, c *guest.Client, l layout, e doneEntry) error {
	if e.Host != "" {
		if err := os.Remove(filepath.Join(l.mnt(), e.Host)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	switch {
	case e.Kind == KindMemoryStore && under(e.MountPath, MemoryRoot):
		// A read-only store's copy goes; a read_write store's mount stays
		// until the sandbox restarts (mounts are fixed at start).
		return os.RemoveAll(l.host(e.MountPath))
	case e.Kind == KindFile && !under(e.MountPath, mntRoot):
		// Only our link, never what the agent put there since.
		return guestSh(ctx, c, `if [ -L "$1" ]; then rm -f "$1"; fi`, e.MountPath)
	case e.Kind == KindGitHub:
		return c.Remove(ctx, guest.RemoveRequest{Path: e.MountPath, Recursive: true})
	}
	return nil
}

// guestSh runs a fixed script in the guest with args as $1…; a failure is
// an error carrying its output.
func guestSh(ctx context.Context, c *guest.Client, script string, args ...string) error {
	argv := append([]string{"sh", "-c", script, "sh"}, args...)
	stdout, stderr, res, err := c.ExecOutput(ctx, guest.ExecRequest{Argv: argv, Cwd: "/", TimeoutMS: 10 * 60 * 1000})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: exit %d: %s", path.Base(argv[0]), res.ExitCode, strings.TrimSpace(string(stderr)+string(stdout)))
	}
	return nil
}

// TurnEnd implements session.ContextHook: the turn's outputs become Files.
func (s *Service) TurnEnd(ctx context.Context, sess *store.ManagedSession, sandboxID string) error {
	l, err := s.layout(sess.ID)
	if err != nil {
		return nil
	}
	defer s.lock(sess.ID)()
	var errs []error
	if err := s.syncMemories(ctx, sess, l); err != nil {
		errs = append(errs, err)
	}
	if err := s.collectOutputs(ctx, sess, l); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// beforeStop is the sandbox hook run before a session's sandbox
// hibernates or is destroyed (also when the session is deleted): what the
// agent changed in its read_write memory stores since the last turn end
// (a turn cut short, a process left running) becomes memory versions
// before the sandbox goes. Outputs stay for the next turn end: they are
// kept in the host tree, which hibernation does not touch.
func (s *Service) beforeStop(ctx context.Context, sb *store.Sandbox) {
	sess := s.sessionOf(ctx, sb)
	if sess == nil {
		return
	}
	l, err := s.layout(sess.ID)
	if err != nil {
		return
	}
	defer s.lock(sess.ID)()
	if err := s.syncMemories(ctx, sess, l); err != nil {
		s.log.WarnContext(ctx, "session resources: memory sync before the sandbox stops", "session", sess.ID, "sandbox", sb.ID, "err", err)
	}
}

// syncMemories syncs every placed read_write memory store of the session;
// the caller holds the session's lock.
func (s *Service) syncMemories(ctx context.Context, sess *store.ManagedSession, l layout) error {
	if s.memory() == nil {
		return nil
	}
	if _, err := os.Stat(l.state()); errors.Is(err, os.ErrNotExist) {
		return nil // nothing was ever placed
	}
	rs, err := s.List(ctx, sess.ID)
	if err != nil {
		return err
	}
	st, err := l.load()
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rs {
		if _, placed := st.Done[r.ID]; r.Kind == KindMemoryStore && placed {
			if err := s.syncMemory(ctx, sess, l, st, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := l.save(st); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SystemPrompt implements session.ContextHook: the session's memory
// stores, where they are mounted, how they may be used (the SDK renders
// a store's description and the attachment's instructions into the
// system prompt).
func (s *Service) SystemPrompt(ctx context.Context, sess *store.ManagedSession) (string, error) {
	rs, err := s.List(ctx, sess.ID)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, r := range rs {
		if r.Kind != KindMemoryStore {
			continue
		}
		d, err := memoryDocOf(r)
		if err != nil {
			return "", err
		}
		if b.Len() == 0 {
			b.WriteString("# Memory\nThese memory stores are mounted as directories of files; each file is one memory.")
			b.WriteString(" Changes in a read-write store are saved when your turn ends.\n")
		}
		mode := "read-write"
		if d.Access == accessReadOnly {
			mode = "read-only"
		}
		fmt.Fprintf(&b, "\n## %s (%s/, %s)\n", d.Name, r.MountPath, mode)
		if d.Description != "" {
			b.WriteString(d.Description + "\n")
		}
		if d.Instructions != nil && *d.Instructions != "" {
			b.WriteString("Instructions: " + *d.Instructions + "\n")
		}
	}
	return strings.TrimSpace(b.String()), nil
}

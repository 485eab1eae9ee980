package guest

import (
	"errors"
	"io/fs"
	"os"
	"path"
)

// migrateRuntime moves the op records and agent events that an earlier
// version kept in the workspace (legacy: WorkDir/.agentkernel) into the
// runtime dir, so that nothing of the runtime stays in the user's files.
//
// Each record is copied durably under a temporary name and renamed into
// place before the old copy is removed, so a crash at any point leaves it
// readable in one place or the other, and the next start finishes the move.
// An op whose files cannot be read keeps its acceptance (the directory) and
// reads as accepted_gone: ambiguous, never re-run.
func migrateRuntime(legacy, runtime string) error {
	fi, err := os.Lstat(legacy)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil // the agent's own file or symlink, not ours
	}
	old, err := os.OpenRoot(legacy)
	if err != nil {
		return err
	}
	defer old.Close()
	if err := os.MkdirAll(runtime, 0o700); err != nil {
		return err
	}
	rt, err := os.OpenRoot(runtime)
	if err != nil {
		return err
	}
	defer rt.Close()

	if entries, err := fs.ReadDir(old.FS(), opsDir); err == nil {
		if err := mkdirDurable(rt, opsDir); err != nil {
			return err
		}
		for _, e := range entries {
			id := e.Name()
			if !e.IsDir() || validOpID(id) != nil {
				continue
			}
			if err := moveRecordDir(old, rt, opsDir, id, "accepted", "result.json"); err != nil {
				return err
			}
		}
		if err := old.RemoveAll(opsDir); err != nil {
			return err
		}
	}
	if fi, err := old.Lstat(agentEventsDir); err == nil && fi.IsDir() {
		if _, err := rt.Lstat(agentEventsDir); errors.Is(err, fs.ErrNotExist) {
			if err := moveRecordDir(old, rt, ".", agentEventsDir, "events.ndjson", "acked"); err != nil {
				return err
			}
		}
		if err := old.RemoveAll(agentEventsDir); err != nil {
			return err
		}
	}
	_ = os.Remove(legacy) // if nothing else (a monitor's files) is left in it
	return nil
}

// moveRecordDir copies parent/name/{files} from old into rt durably (the
// missing or unreadable ones are left out) unless rt has it already.
func moveRecordDir(old, rt *os.Root, parent, name string, files ...string) error {
	dst := path.Join(parent, name)
	if _, err := rt.Lstat(dst); err == nil {
		return nil // moved by an earlier start
	}
	tmp := path.Join(parent, ".moving-"+name)
	if err := rt.RemoveAll(tmp); err != nil {
		return err
	}
	if err := rt.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		b, err := readRegular(old, path.Join(parent, name, f))
		if err != nil {
			continue
		}
		if err := writeSynced(rt, path.Join(tmp, f), b); err != nil {
			return err
		}
	}
	if err := syncDir(rt, tmp); err != nil {
		return err
	}
	if err := rt.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(rt, parent)
}

// readRegular reads name if it is a regular file (not a symlink or FIFO
// the agent put there).
func readRegular(root *os.Root, name string) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fs.ErrInvalid
	}
	return root.ReadFile(name)
}

func writeSynced(root *os.Root, name string, b []byte) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

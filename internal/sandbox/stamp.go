package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The generation stamp says which generation of the workspace is on the
// host disk: a wake restores the latest backup only when that backup is
// newer, so a workspace that survived on disk is never overwritten by an
// older backup. It lives beside the workspace, in the sandbox's directory
// (DataDir/<id>/generation), which the sandbox cannot reach: nothing of the
// runtime appears in /workspace, and nothing the sandbox writes decides
// what the daemon reads or writes.
//
// The stamp names the workspace directory it describes (device and inode):
// when the workspace is removed and made again, or swapped in by a restore,
// an old stamp does not apply to it.
//
// Earlier versions kept it inside the workspace, at legacyStampPath; it is
// read once (as untrusted input) and removed at the first start after an
// upgrade, and removed from workspaces restored from their backups.
const (
	stampFile       = "generation"
	legacyStampDir  = ".agentkernel"
	legacyStampPath = legacyStampDir + "/generation"
	maxStampBytes   = 32
)

// sandboxDir is the sandbox's private directory: the workspace and the
// stamp.
func (m *Manager) sandboxDir(id string) string { return m.cfg.DataDir + "/" + id }

// readStamp returns the workspace's generation stamp (0 when absent, or
// when it describes another workspace directory than the one on disk).
func (m *Manager) readStamp(id string) int64 {
	b, err := readSmall(m.sandboxDir(id), stampFile)
	if err != nil {
		return 0
	}
	gen, ws, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if ws != m.workspaceIdentity(id) {
		return 0
	}
	n, err := parseGeneration(gen)
	if err != nil {
		return 0
	}
	return n
}

// workspaceIdentity is "dev:ino" of the workspace directory, "" if absent.
func (m *Manager) workspaceIdentity(id string) string {
	var st unix.Stat_t
	if err := unix.Lstat(m.workspaceDir(id), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// readSmall reads the small regular file name beneath dir, without
// following symlinks or blocking on a FIFO.
func readSmall(dir, name string) ([]byte, error) {
	d, err := beneath.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return beneath.ReadFile(d, name, maxStampBytes)
}

func parseGeneration(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("generation stamp %q is not a generation", s)
	}
	return n, nil
}

// writeStamp replaces the stamp atomically (temp file, rename), creating
// nothing through a symlink. It stamps the workspace directory on disk
// now: call it after the workspace is in place.
func (m *Manager) writeStamp(id string, gen int64) error {
	ws := m.workspaceIdentity(id)
	if ws == "" {
		return fmt.Errorf("sandbox %s: write generation stamp: no workspace directory", id)
	}
	d, err := beneath.OpenDir(m.sandboxDir(id))
	if err != nil {
		return err
	}
	defer d.Close()
	tmp := stampFile + ".tmp"
	_ = unix.Unlinkat(int(d.Fd()), tmp, 0)
	f, err := beneath.Open(d, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatInt(gen, 10) + " " + ws + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(int(d.Fd()), tmp, int(d.Fd()), stampFile)
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: write generation stamp: %w", id, err)
	}
	return nil
}

// migrateStamp moves a stamp left in the workspace by an earlier version
// beside it. The old file is the sandbox's to write, so its value is only
// believed up to what the daemon itself could have written (the sandbox's
// generation, or one more if the daemon died between stamping and
// recording): a sandbox can at most make its own workspace look older.
// Call it only while no instance runs.
func (m *Manager) migrateStamp(ctx context.Context, sb *store.Sandbox) error {
	if _, err := os.Lstat(m.sandboxDir(sb.ID) + "/" + stampFile); !errors.Is(err, fs.ErrNotExist) {
		return err // already beside the workspace (or unreadable: say so)
	}
	ws := m.workspaceDir(sb.ID)
	b, err := readSmall(ws, legacyStampPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var old int64
	if err == nil {
		old, err = parseGeneration(string(b))
	}
	if err != nil {
		m.log.WarnContext(ctx, "ignoring the workspace's old generation stamp", "sandbox", sb.ID, "err", err)
		old = 0
	}
	old = min(old, sb.Generation+1)
	if err := m.writeStamp(sb.ID, old); err != nil {
		return err
	}
	removeLegacyStamp(ws)
	m.log.InfoContext(ctx, "generation stamp moved out of the workspace", "sandbox", sb.ID, "generation", old)
	return nil
}

// removeLegacyStamp removes .agentkernel/generation from a workspace, and
// .agentkernel itself if that leaves it empty, following no symlink.
func removeLegacyStamp(ws string) {
	d, err := beneath.OpenDir(ws)
	if err != nil {
		return
	}
	defer d.Close()
	sub, err := beneath.Open(d, legacyStampDir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	defer sub.Close()
	if err := unix.Unlinkat(int(sub.Fd()), stampFile, 0); err == nil {
		_ = unix.Unlinkat(int(d.Fd()), legacyStampDir, unix.AT_REMOVEDIR)
	}
}

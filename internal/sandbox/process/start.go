package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/image"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Files in the sandbox's private run dir (Spec.RunDir), which is never
// mounted into the sandbox.
const (
	// LogName is bwrap's and the guest's log.
	LogName = "guest.log"
	// SocketName is the guest's socket: the driver creates and listens on
	// it, and hands the listening socket to the guest as an open file, so
	// nothing inside the sandbox can see, replace or redirect it.
	SocketName = "guest.sock"
)

// Start implements sandbox.Driver. bwrap is started with --block-fd: it
// sets up the namespaces and stops before exec'ing the guest, the driver
// moves the blocked child into its cgroups and then lets it go, so no
// process of the sandbox ever runs outside them.
func (d *Driver) Start(ctx context.Context, spec sandbox.Spec) (*sandbox.Handle, error) {
	if _, err := exec.LookPath(d.bwrap); err != nil {
		return nil, &sandbox.UnavailableError{Driver: Name, Reason: fmt.Sprintf("bwrap not found at %s: install the %q package", d.bwrap, "bubblewrap")}
	}
	root, err := d.validate(spec)
	if err != nil {
		return nil, err
	}
	st := &state{}
	guestFlags, err := d.planLimits(st, spec.ID, spec.Limits)
	if err != nil {
		return nil, err
	}
	args, err := d.bwrapArgs(spec, root, guestFlags)
	if err != nil {
		removeCgroups(st.CgroupDirs)
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			removeCgroups(st.CgroupDirs)
		}
	}()
	logf, err := openLog(spec.RunDir)
	if err != nil {
		return nil, fmt.Errorf("process driver: log: %w", err)
	}
	defer logf.Close()
	st.Socket = filepath.Join(spec.RunDir, SocketName)
	lnFile, ino, err := listen(st.Socket)
	if err != nil {
		return nil, fmt.Errorf("process driver: guest socket: %w", err)
	}
	defer lnFile.Close()
	st.SocketIno = ino
	secretR, err := secretPipe(spec.Secret)
	if err != nil {
		return nil, err
	}
	defer secretR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer blockW.Close()
	infoR, infoW, err := os.Pipe()
	if err != nil {
		blockR.Close()
		return nil, err
	}
	defer infoR.Close()

	cmd := exec.Command(d.bwrap, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{blockR, infoW, secretR, lnFile} // fds 3 to 6
	if spec.PoolPipe != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, spec.PoolPipe) // fd 7
	}
	// A session of its own: the daemon's terminal or process group going
	// away must not signal the sandbox.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	blockR.Close()
	infoW.Close()
	if err != nil {
		return nil, fmt.Errorf("process driver: start bwrap: %w", err)
	}
	p := &bwrapProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.exitCode = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	fail := func(err error) (*sandbox.Handle, error) {
		_ = cmd.Process.Kill()
		<-p.exited
		return nil, fmt.Errorf("process driver: start %s: %w%s", spec.ID, err, logTail(spec.RunDir))
	}

	childPID, err := readChildPID(ctx, infoR)
	if err != nil {
		return fail(err)
	}
	st.PID, st.BwrapPID, st.StartedAt = childPID, cmd.Process.Pid, time.Now().UTC()
	if st.StartTicks, _, err = procStart(childPID); err != nil {
		return fail(err)
	}
	// The child is blocked before exec'ing the guest: whatever it starts
	// later inherits these cgroups.
	if err := joinCgroups(st.CgroupDirs, childPID); err != nil {
		return fail(fmt.Errorf("join cgroups: %w", err))
	}
	if _, err := blockW.Write([]byte{1}); err != nil {
		return fail(fmt.Errorf("release bwrap: %w", err))
	}
	started = true
	d.mu.Lock()
	d.running[spec.ID] = p
	d.mu.Unlock()

	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	d.log.Info("sandbox started", "sandbox", spec.ID, "pid", childPID, "limits", st.Limits)
	return &sandbox.Handle{ID: spec.ID, Driver: Name, Secret: spec.Secret, State: raw}, nil
}

// Adopt implements sandbox.Pooler: the pooled instance h, whose run dir
// the manager has moved to spec.RunDir, becomes sandbox spec.ID's. Its
// guest socket is the same socket file under the new name (checked by
// inode); its cgroups keep the slot's name, which its state records.
func (d *Driver) Adopt(_ context.Context, h *sandbox.Handle, spec sandbox.Spec) (*sandbox.Handle, error) {
	st, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	if spec.ID == "" || strings.ContainsAny(spec.ID, "/\x00") || spec.ID == "." || spec.ID == ".." {
		return nil, fmt.Errorf("process driver: sandbox id %q must be non-empty without '/'", spec.ID)
	}
	if fi, err := os.Lstat(spec.RunDir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("process driver: RunDir %q must be a private directory (mode 0700, not a symlink)", spec.RunDir)
	}
	if !st.alive() {
		return nil, fmt.Errorf("process driver: adopt %s into %s (pid %d not running): %w", h.ID, spec.ID, st.PID, sandbox.ErrGone)
	}
	sock := filepath.Join(spec.RunDir, SocketName)
	if ino, err := sandbox.SocketIno(sock); err != nil || ino != st.SocketIno {
		return nil, fmt.Errorf("process driver: adopt %s into %s: %s is not the pooled guest's socket (%v)", h.ID, spec.ID, sock, err)
	}
	st.Socket = sock
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if p, ok := d.running[h.ID]; ok {
		delete(d.running, h.ID)
		d.running[spec.ID] = p
	}
	d.mu.Unlock()
	d.log.Info("pooled sandbox assigned", "slot", h.ID, "sandbox", spec.ID, "pid", st.PID)
	return &sandbox.Handle{ID: spec.ID, Driver: Name, Secret: h.Secret, State: raw}, nil
}

// listen creates the guest's listening socket at path and returns it as a
// file for the guest to inherit, and its inode (Dial checks it). The socket
// file stays when the daemon's copy is closed: the guest keeps listening,
// and a restarted daemon reaches it there.
func listen(path string) (*os.File, uint64, error) {
	if err := os.RemoveAll(path); err != nil { // an earlier instance's
		return nil, 0, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, 0, err
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		return nil, 0, err
	}
	ino, err := sandbox.SocketIno(path)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, ino, nil
}

// secretPipe returns the read end of a pipe that holds the encoded secret
// and is closed for writing: the guest reads it once, and it was never in a
// file, an argument or an environment variable.
func secretPipe(secret []byte) (*os.File, error) {
	if len(secret) != guest.SecretSize {
		return nil, fmt.Errorf("process driver: spec.Secret is %d bytes, want %d", len(secret), guest.SecretSize)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(guest.EncodeSecret(secret)) // fits the pipe's buffer
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// openLog opens the run dir's log for appending, following no symlink.
func openLog(runDir string) (*os.File, error) {
	d, err := beneath.OpenDir(runDir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := beneath.Open(d, LogName, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s/%s is not a regular file", runDir, LogName)
	}
	return f, nil
}

func (d *Driver) validate(spec sandbox.Spec) (root string, err error) {
	if spec.ID == "" || strings.ContainsAny(spec.ID, "/\x00") || spec.ID == "." || spec.ID == ".." {
		return "", fmt.Errorf("process driver: sandbox id %q must be non-empty without '/'", spec.ID)
	}
	if spec.Network != "" && spec.Network != sandbox.NetworkNone && spec.Network != sandbox.NetworkEgress && spec.Network != sandbox.NetworkHost {
		return "", fmt.Errorf("process driver: network %q: want %q, %q or %q", spec.Network, sandbox.NetworkNone, sandbox.NetworkEgress, sandbox.NetworkHost)
	}
	for field, dir := range map[string]string{"WorkspaceDir": spec.WorkspaceDir, "RunDir": spec.RunDir} {
		if !filepath.IsAbs(dir) {
			return "", fmt.Errorf("process driver: %s %q must be an absolute path", field, dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("process driver: %s %q is not a directory", field, dir)
		}
	}
	if fi, err := os.Lstat(spec.RunDir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("process driver: RunDir %q must be a private directory (mode 0700, not a symlink)", spec.RunDir)
	}
	if fi, err := os.Stat(spec.GuestBinary); err != nil || fi.IsDir() || !filepath.IsAbs(spec.GuestBinary) {
		return "", fmt.Errorf("process driver: GuestBinary %q is not an absolute path to a file", spec.GuestBinary)
	}
	return d.imageRoot(spec.Image)
}

// CheckImage implements sandbox.ImageChecker.
func (d *Driver) CheckImage(_ context.Context, image string) error {
	_, err := d.imageRoot(image)
	return err
}

// imageRoot is the rootfs dir of image, "" for the host's system dirs.
// Names follow image.ValidateName, so an import in progress (a hidden
// temp dir in ImagesDir) is never taken for an image.
func (d *Driver) imageRoot(name string) (root string, err error) {
	if name == "" {
		return "", nil
	}
	if d.cfg.ImagesDir == "" {
		return "", fmt.Errorf("process driver: image %q (no images dir configured): %w", name, sandbox.ErrUnknownImage)
	}
	root, err = image.Dir(d.cfg.ImagesDir, name)
	if errors.Is(err, image.ErrNotFound) {
		return "", fmt.Errorf("process driver: %v; import it with `agentkernel image import %s TARBALL`: %w", err, name, sandbox.ErrUnknownImage)
	}
	if err != nil {
		return "", fmt.Errorf("process driver: %v: %w", err, sandbox.ErrUnknownImage)
	}
	return root, nil
}

// readChildPID reads bwrap's --info-fd JSON ({"child-pid": N, …}); EOF
// means bwrap failed before creating the sandbox.
func readChildPID(ctx context.Context, r *os.File) (int, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = r.SetReadDeadline(dl)
	} else {
		_ = r.SetReadDeadline(time.Now().Add(30 * time.Second))
	}
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return 0, fmt.Errorf("bwrap gave no child pid: %w", err)
	}
	if info.ChildPID <= 0 {
		return 0, errors.New("bwrap gave no child pid")
	}
	return info.ChildPID, nil
}

// logTail returns the end of the run dir's log for error messages.
func logTail(runDir string) string {
	d, err := beneath.OpenDir(runDir)
	if err != nil {
		return ""
	}
	defer d.Close()
	f, err := beneath.Open(d, LogName, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return ""
	}
	n := min(fi.Size(), 2048)
	b := make([]byte, n)
	if _, err := f.ReadAt(b, fi.Size()-n); err != nil {
		return ""
	}
	return ": " + strings.TrimSpace(string(b))
}

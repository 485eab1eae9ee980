package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
)

// ErrUntrustedPeer: the socket the daemon would talk to is not the one the
// sandbox's guest serves (it was replaced, or someone else listens on it).
// The daemon does not talk to it.
var ErrUntrustedPeer = errors.New("not the sandbox's guest socket")

// Peer says what must be true of a guest socket before the daemon talks to
// it; zero fields are not checked.
type Peer struct {
	// Ino is the socket file's inode, for a socket the daemon created.
	Ino uint64
	// PID is the host pid of the process that must be listening (the
	// container's init), checked with SO_PEERCRED.
	PID int
}

// DialUnix connects to the unix socket name beneath dir without following
// any symlink on the way (see package beneath): dir is the daemon's own and
// trusted, name may lead into a directory the sandbox can write. It connects
// through the opened socket file itself (/proc/self/fd/N), so the path is
// resolved once, and checks peer.
func DialUnix(ctx context.Context, dir, name string, peer Peer) (net.Conn, error) {
	d, err := beneath.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := beneath.Open(d, name, unix.O_PATH, 0)
	if err != nil {
		if errors.Is(err, beneath.ErrSymlink) {
			return nil, fmt.Errorf("%w: %v", ErrUntrustedPeer, err)
		}
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%w: %s/%s is not a socket", ErrUntrustedPeer, dir, name)
	}
	if peer.Ino != 0 && st.Ino != peer.Ino {
		return nil, fmt.Errorf("%w: %s/%s was replaced (inode %d, want %d)", ErrUntrustedPeer, dir, name, st.Ino, peer.Ino)
	}
	var dl net.Dialer
	conn, err := dl.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(f.Fd())))
	if err != nil {
		return nil, err
	}
	if peer.PID != 0 {
		pid, err := peerPID(conn)
		if err == nil && pid != peer.PID {
			err = fmt.Errorf("%w: %s/%s is served by pid %d, not the guest (pid %d)", ErrUntrustedPeer, dir, name, pid, peer.PID)
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// peerPID is the pid that listens on the other end (SO_PEERCRED: the
// process that called listen, in the daemon's pid namespace).
func peerPID(conn net.Conn) (int, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("peer credentials: %T is not a unix socket", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("peer credentials: %w", cerr)
	}
	return int(cred.Pid), nil
}

// SocketIno is the inode of the socket file at path (the driver records it
// when it creates the socket, for Peer.Ino).
func SocketIno(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return 0, fmt.Errorf("%s is not a socket", path)
	}
	return st.Ino, nil
}

package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the file in the home that the running daemon holds an
// exclusive flock on, with its pid inside.
const LockFile = "daemon.lock"

// homeLock keeps a second daemon off a home that one already serves: two
// would recover (reattach, stop, restart) each other's sandboxes and write
// one store. flock, not a pid file: the kernel drops the lock when the
// holder dies, SIGKILL included, so a crashed daemon never blocks its
// restart. The descriptor is close-on-exec, so sandboxes (which outlive
// the daemon) never inherit it.
type homeLock struct{ f *os.File }

// lockHome takes the lock or says who holds it.
func lockHome(home string) (*homeLock, error) {
	path := filepath.Join(home, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the home: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			b, _ := io.ReadAll(io.LimitReader(f, 32))
			holder := strings.TrimSpace(string(b))
			if holder == "" {
				holder = "unknown: it is starting"
			}
			return nil, fmt.Errorf("home %s is in use by another agentkernel daemon (pid %s, which holds %s): stop that daemon first, or give this one its own --home / AGENTKERNEL_HOME",
				home, holder, path)
		}
		return nil, fmt.Errorf("lock the home: flock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the home: write pid to %s: %w", path, err)
	}
	return &homeLock{f: f}, nil
}

// release clears the pid and drops the lock (closing the file drops it).
func (l *homeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close()
	l.f = nil
}

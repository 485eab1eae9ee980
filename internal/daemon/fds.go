package daemon

import (
	"os"
	"strconv"
	"syscall"
)

// sealInheritedFDs marks every file descriptor above stderr close-on-exec.
// Go opens its own files that way, but descriptors the daemon inherited
// from whatever started it (a shell, a supervisor, a test harness) are not,
// and every sandbox would inherit them through bwrap: a sandbox must never
// hold an open file of the host's.
func sealInheritedFDs() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// The directory's own descriptor is gone by now: EBADF is fine.
		syscall.CloseOnExec(fd)
	}
	return nil
}

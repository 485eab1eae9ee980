package guest

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// execMode is the internal argv[0] of the launcher below.
const execMode = "__exec"

// The rlimit fallback of the process driver cannot put RLIMIT_AS on the
// guest itself: the Go runtime reserves far more address space than a
// small memory limit. So the guest starts each command through itself,
// `guest __exec <bytes> <path> <argv…>`, which sets RLIMIT_AS and execs the
// command: the limit applies to the command and everything it starts.
func (s *Server) wrapArgv(path string, argv []string) (string, []string) {
	if s.cfg.ChildRlimitAS == 0 {
		return path, argv
	}
	w := append([]string{}, s.cfg.SelfArgv...)
	w = append(w, execMode, strconv.FormatUint(s.cfg.ChildRlimitAS, 10), path)
	return s.self, append(w, argv...)
}

// execWithRlimit is the launcher; it returns only on error.
func execWithRlimit(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "guest __exec: want <bytes> <path> <argv…>")
		return 2
	}
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guest __exec:", err)
		return 2
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		fmt.Fprintln(os.Stderr, "guest __exec: RLIMIT_AS:", err)
		return 126
	}
	err = syscall.Exec(args[1], args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "%s: %v\n", args[2], err)
	return 126
}

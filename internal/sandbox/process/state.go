package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// state is Handle.State: enough for a new daemon process to find, check and
// stop a sandbox that outlived the one that started it.
type state struct {
	// PID is the host pid of the guest (PID 1 inside the sandbox).
	PID int `json:"pid"`
	// StartTicks is the guest's start time from /proc/PID/stat; a live pid
	// with another start time is a reused pid, not our sandbox.
	StartTicks uint64    `json:"start_ticks"`
	BwrapPID   int       `json:"bwrap_pid"`
	StartedAt  time.Time `json:"started_at"`
	// Limits says how limits were enforced: "cgroup", "rlimit" or "none".
	Limits     string   `json:"limits"`
	CgroupDirs []string `json:"cgroup_dirs,omitempty"`
	// CgroupVersion is 1 or 2 when Limits is "cgroup"; CgroupFiles maps a
	// limit field to the file it is read back from.
	CgroupVersion int               `json:"cgroup_version,omitempty"`
	CgroupFiles   map[string]string `json:"cgroup_files,omitempty"`
	// Enforced is the plan per limit field: mechanism and value, or why
	// not enforced.
	Enforced map[string]sandbox.Enforcement `json:"enforced,omitempty"`
	// Socket is the guest's socket in the private run dir, and SocketIno
	// its inode: Dial talks to that socket file and no other.
	Socket    string `json:"socket"`
	SocketIno uint64 `json:"socket_ino"`
}

func decodeState(h *sandbox.Handle) (*state, error) {
	if h == nil || h.Driver != Name {
		return nil, fmt.Errorf("process driver: handle is not a %s handle", Name)
	}
	var st state
	if err := json.Unmarshal(h.State, &st); err != nil || st.PID <= 0 {
		return nil, fmt.Errorf("process driver: bad handle state for %s: %v", h.ID, err)
	}
	return &st, nil
}

// procStart reads a process's start time (field 22 of /proc/PID/stat) and
// whether it is a zombie.
func procStart(pid int) (ticks uint64, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// comm (field 2) may contain spaces and parentheses: parse after the
	// last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, false, errors.New("short /proc stat")
	}
	ticks, err = strconv.ParseUint(f[19], 10, 64) // field 22 overall
	return ticks, f[0] == "Z", err
}

// alive reports whether the guest of st still runs (same pid, same start
// time, not a zombie).
func (st *state) alive() bool {
	ticks, zombie, err := procStart(st.PID)
	return err == nil && !zombie && ticks == st.StartTicks
}

// signal sends sig to the guest if it is still ours.
func (st *state) signal(sig syscall.Signal) {
	if st.alive() {
		_ = syscall.Kill(st.PID, sig)
	}
}

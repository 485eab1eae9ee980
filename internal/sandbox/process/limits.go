package process

import (
	"strconv"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// planLimits decides, before bwrap starts, how limits are enforced:
// cgroups where they are writable (the dirs are created with the limits
// written; the blocked sandbox joins them in Start), else rlimits. It
// returns extra guest flags.
func (d *Driver) planLimits(st *state, id string, l sandbox.Limits) []string {
	if l == (sandbox.Limits{}) {
		st.Limits = "none"
		return nil
	}
	if !d.cfg.DisableCgroups {
		dirs, err := cgroupDirs(d.cfg.CgroupRoot, id, l)
		if err == nil {
			st.Limits, st.CgroupDirs = "cgroup", dirs
			return nil
		}
		d.log.Warn("cgroup limits unavailable, falling back to rlimits", "sandbox", id, "err", err)
	}
	return rlimitPlan(st, l)
}

// rlimitPlan is the fallback. Memory becomes RLIMIT_AS on every command,
// set by the guest (the Go guest itself needs more address space than a
// small limit): an allocation fails instead of the OOM killer stepping in.
// RLIMIT_NPROC is no pids limit for processes running as uid 0: it counts
// every process of the uid on the host. CPU has no rlimit equivalent.
func rlimitPlan(st *state, l sandbox.Limits) []string {
	st.Limits = "rlimit"
	st.LimitNotes = map[string]string{}
	var flags []string
	if l.MemoryMB > 0 {
		flags = append(flags, "--child-rlimit-as", strconv.FormatInt(l.MemoryMB<<20, 10))
	}
	if l.Pids > 0 {
		st.LimitNotes["pids"] = "not enforced: no cgroup; RLIMIT_NPROC counts all of uid 0's host processes"
	}
	if l.CPUs > 0 {
		st.LimitNotes["cpus"] = "not enforced: no cgroup"
	}
	return flags
}

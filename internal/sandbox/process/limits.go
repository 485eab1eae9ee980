package process

import (
	"fmt"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// planLimits decides, before bwrap starts, how limits are enforced:
// cgroups where they are writable (the dirs are created with the limits
// written; the blocked sandbox joins them in Start), else rlimits. It
// records the plan per limit in st and returns extra guest flags.
func (d *Driver) planLimits(st *state, id string, l sandbox.Limits) ([]string, error) {
	if _, err := l.MemoryBytes(); err != nil {
		return nil, fmt.Errorf("process driver: %w", err)
	}
	if l == (sandbox.Limits{}) {
		st.Limits = "none"
		return nil, nil
	}
	if !d.cfg.DisableCgroups {
		cg, err := createCgroups(d.cfg.CgroupRoot, id, l)
		if err == nil {
			st.Limits, st.CgroupDirs, st.CgroupVersion, st.CgroupFiles = "cgroup", cg.dirs, cg.version, cg.files
			mech := sandbox.EnforcedCgroupV1
			if cg.version == 2 {
				mech = sandbox.EnforcedCgroupV2
			}
			st.Enforced = map[string]sandbox.Enforcement{}
			for field, v := range limitValues(l) {
				st.Enforced[field] = sandbox.Enforcement{Value: v, Mechanism: mech}
			}
			return nil, nil
		}
		d.log.Warn("cgroup limits unavailable, falling back to rlimits", "sandbox", id, "err", err)
		return rlimitPlan(st, l, "no writable cgroup ("+err.Error()+")"), nil
	}
	return rlimitPlan(st, l, "cgroups are disabled for this driver"), nil
}

// limitValues are the limits that are set, by field.
func limitValues(l sandbox.Limits) map[string]float64 {
	m := map[string]float64{}
	if l.MemoryMB > 0 {
		m[sandbox.LimitMemoryMB] = float64(l.MemoryMB)
	}
	if l.Pids > 0 {
		m[sandbox.LimitPids] = float64(l.Pids)
	}
	if l.CPUs > 0 {
		m[sandbox.LimitCPUs] = l.CPUs
	}
	return m
}

// rlimitPlan is the fallback. Memory becomes RLIMIT_AS on every command,
// set by the guest (the Go guest itself needs more address space than a
// small limit): an allocation fails instead of the OOM killer stepping in.
// RLIMIT_NPROC is no pids limit for processes running as uid 0: it counts
// every process of the uid on the host. CPU has no rlimit equivalent.
func rlimitPlan(st *state, l sandbox.Limits, why string) []string {
	st.Limits = "rlimit"
	st.Enforced = map[string]sandbox.Enforcement{}
	var flags []string
	if l.MemoryMB > 0 {
		flags = append(flags, "--child-rlimit-as", strconv.FormatInt(l.MemoryMB<<20, 10))
		st.Enforced[sandbox.LimitMemoryMB] = sandbox.Enforcement{Value: float64(l.MemoryMB), Mechanism: sandbox.EnforcedRlimit,
			Reason: "RLIMIT_AS on every command: address space, not resident memory (" + why + "); runtimes that reserve large address ranges may not start"}
	}
	if l.Pids > 0 {
		st.Enforced[sandbox.LimitPids] = sandbox.Enforcement{Mechanism: sandbox.NotEnforced,
			Reason: why + "; RLIMIT_NPROC is no substitute: it counts all of uid 0's host processes"}
	}
	if l.CPUs > 0 {
		st.Enforced[sandbox.LimitCPUs] = sandbox.Enforcement{Mechanism: sandbox.NotEnforced, Reason: why + "; CPU time has no rlimit equivalent"}
	}
	return flags
}

// enforcement is what Inspect reports: the plan, with the values in force
// read back from the cgroup files while the sandbox runs (Stop removes them).
func (st *state) enforcement(running bool) map[string]sandbox.Enforcement {
	if len(st.Enforced) == 0 {
		return nil
	}
	out := make(map[string]sandbox.Enforcement, len(st.Enforced))
	for field, e := range st.Enforced {
		if file := st.CgroupFiles[field]; file != "" && !running {
			e.Reason = "the sandbox has stopped; the value it ran with"
		} else if file != "" {
			v, err := readCgroupLimit(st.CgroupVersion, field, file)
			switch {
			case err != nil:
				e.Reason = "planned value; reading it back failed: " + err.Error()
			case v == 0:
				e = sandbox.Enforcement{Mechanism: sandbox.NotEnforced, Reason: file + " says max"}
			default:
				e.Value = v
			}
		}
		out[field] = e
	}
	return out
}

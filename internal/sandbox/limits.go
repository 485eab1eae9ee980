package sandbox

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
)

// Every sandbox has memory, pids and CPU limits: a fork bomb or a runaway
// allocation in one sandbox must not take the host. The defaults suit an
// agent's tools (git, a package install, a test run, a small build); the
// maximums are the operator's bound on what a request or an environment
// may ask for.
const (
	// DefaultMemoryMB fits a language runtime plus a package install or a
	// test suite, while 10–20 sandboxes still fit a 16–24 GB host.
	DefaultMemoryMB = 1024
	// DefaultPids is far above what a shell, a build (make -j, node
	// workers) or a test runner uses, and far below the host's pid space:
	// a fork bomb stops at 512.
	DefaultPids = 512
	// DefaultCPUs is one CPU's worth of time: a busy loop cannot starve the
	// daemon or the other sandboxes even on a 2-core host.
	DefaultCPUs = 1.0

	DefaultMaxMemoryMB = 8192
	DefaultMaxPids     = 4096
	DefaultMaxCPUs     = 4.0
)

// The floors a sandbox needs to start its guest and answer `exec true`.
// Measured on both drivers with the guest binary the daemon injects
// (cgroup v1, 2 CPUs): the guest needs 6 MB on the process driver, 8 MB on
// docker (whose own floor is 6 MB), and 10 pids (the guest's Go runtime
// threads plus `sh` and one child). Below 0.05 CPUs the first exec takes
// seconds (0.01: 3–5 s), which the wake probe cannot tell from a hang.
// Each floor leaves room over the measurement, so a limit accepted here
// starts; asking for less is a 400 at once instead of a 503 after the
// probe's 30 s.
const (
	MinMemoryMB = 16
	MinPids     = 16
	MinCPUs     = 0.05
)

// Ceilings no configuration may exceed: memory stays far below the int64
// overflow of the shift to bytes (2^43 MB), pids below the kernel's
// PID_MAX_LIMIT, CPUs below any machine's count.
const (
	CeilMemoryMB = 1 << 30 // 1 PiB
	CeilPids     = 1 << 22
	CeilCPUs     = 8192
)

// Limit field names, as in JSON, config keys and environment metadata.
const (
	LimitMemoryMB = "memory_mb"
	LimitPids     = "pids"
	LimitCPUs     = "cpus"
)

// LimitsRequest is what a caller asks for; a nil field takes the default.
// Zero is not "no limit": every sandbox has all three limits.
type LimitsRequest struct {
	MemoryMB *int64   `json:"memory_mb,omitempty"`
	Pids     *int64   `json:"pids,omitempty"`
	CPUs     *float64 `json:"cpus,omitempty"`
}

// Request turns limits where zero means "not set" into a request.
func (l Limits) Request() LimitsRequest {
	var r LimitsRequest
	if l.MemoryMB != 0 {
		r.MemoryMB = &l.MemoryMB
	}
	if l.Pids != 0 {
		r.Pids = &l.Pids
	}
	if l.CPUs != 0 {
		r.CPUs = &l.CPUs
	}
	return r
}

// MemoryBytes is the memory limit in bytes, refusing a value whose shift
// would overflow instead of wrapping into a small or negative limit.
func (l Limits) MemoryBytes() (int64, error) {
	if l.MemoryMB < 0 || l.MemoryMB > math.MaxInt64>>20 {
		return 0, fmt.Errorf("memory_mb %d is out of range (0 to %d)", l.MemoryMB, int64(math.MaxInt64>>20))
	}
	return l.MemoryMB << 20, nil
}

// LimitError is a limit a sandbox may not have. Field is the bare name
// ("memory_mb", or "max_memory_mb" in a policy); callers say where it came
// from (limits.memory_mb, metadata.agentkernel.memory_mb, sandbox.memory_mb).
type LimitError struct {
	Field  string
	Value  string
	Reason string
}

func (e *LimitError) Error() string { return e.Describe("") }

// Describe is the error with the field prefixed, e.g. "limits.".
func (e *LimitError) Describe(prefix string) string {
	return fmt.Sprintf("%s%s = %s: %s", prefix, e.Field, e.Value, e.Reason)
}

func (e *LimitError) Unwrap() error { return ErrInvalid }

// LimitPolicy is the operator's: defaults for sandboxes that ask for
// nothing, and maximums nobody may exceed.
type LimitPolicy struct {
	Default Limits
	Max     Limits
	// HostCPUs caps Max.CPUs: more CPUs than the host has is no limit, and
	// Docker refuses it (0 = runtime.NumCPU()).
	HostCPUs int
}

// DefaultLimitPolicy is the embedded default of [sandbox].
func DefaultLimitPolicy() LimitPolicy {
	return LimitPolicy{
		Default: Limits{MemoryMB: DefaultMemoryMB, Pids: DefaultPids, CPUs: DefaultCPUs},
		Max:     Limits{MemoryMB: DefaultMaxMemoryMB, Pids: DefaultMaxPids, CPUs: DefaultMaxCPUs},
	}
}

func (p LimitPolicy) hostCPUs() float64 {
	if p.HostCPUs > 0 {
		return float64(p.HostCPUs)
	}
	return float64(runtime.NumCPU())
}

// maxCPUs is the effective CPU maximum and what bounds it.
func (p LimitPolicy) maxCPUs() (float64, string) {
	if h := p.hostCPUs(); h < p.Max.CPUs {
		return h, fmt.Sprintf("this host's CPU count; [sandbox] max_cpus is %s", fmtFloat(p.Max.CPUs))
	}
	return p.Max.CPUs, "set by the operator: [sandbox] max_cpus"
}

// Check validates the policy itself (the [sandbox] keys): every value within
// floor and ceiling, every default within its maximum, the CPU default
// within the host.
func (p LimitPolicy) Check() []*LimitError {
	var errs []*LimitError
	add := func(e *LimitError) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	for _, pre := range []string{"", "max_"} {
		l := p.Default
		if pre != "" {
			l = p.Max
		}
		add(checkInt(pre+LimitMemoryMB, l.MemoryMB, MinMemoryMB, CeilMemoryMB, "the ceiling of "+strconv.Itoa(CeilMemoryMB)))
		add(checkInt(pre+LimitPids, l.Pids, MinPids, CeilPids, "the kernel's PID_MAX_LIMIT"))
		add(checkFloat(pre+LimitCPUs, l.CPUs, MinCPUs, CeilCPUs, "the ceiling of "+strconv.Itoa(CeilCPUs)))
	}
	if len(errs) > 0 {
		return errs
	}
	if p.Default.MemoryMB > p.Max.MemoryMB {
		add(&LimitError{Field: LimitMemoryMB, Value: fmtInt(p.Default.MemoryMB), Reason: "above max_memory_mb = " + fmtInt(p.Max.MemoryMB)})
	}
	if p.Default.Pids > p.Max.Pids {
		add(&LimitError{Field: LimitPids, Value: fmtInt(p.Default.Pids), Reason: "above max_pids = " + fmtInt(p.Max.Pids)})
	}
	if p.Default.CPUs > p.Max.CPUs {
		add(&LimitError{Field: LimitCPUs, Value: fmtFloat(p.Default.CPUs), Reason: "above max_cpus = " + fmtFloat(p.Max.CPUs)})
	} else if h := p.hostCPUs(); p.Default.CPUs > h {
		add(&LimitError{Field: LimitCPUs, Value: fmtFloat(p.Default.CPUs), Reason: fmt.Sprintf("above this host's %s CPUs", fmtFloat(h))})
	}
	return errs
}

// Resolve gives a request its effective limits: defaults where it asks for
// nothing, each asked-for value checked against the floor and the maximum.
func (p LimitPolicy) Resolve(r LimitsRequest) (Limits, error) {
	l := p.Default
	if r.MemoryMB != nil {
		l.MemoryMB = *r.MemoryMB
		if err := checkAsked(LimitMemoryMB, float64(l.MemoryMB), fmtInt(l.MemoryMB), MinMemoryMB, float64(p.Max.MemoryMB), "set by the operator: [sandbox] max_memory_mb", fmtInt(p.Default.MemoryMB)); err != nil {
			return Limits{}, err
		}
	}
	if r.Pids != nil {
		l.Pids = *r.Pids
		if err := checkAsked(LimitPids, float64(l.Pids), fmtInt(l.Pids), MinPids, float64(p.Max.Pids), "set by the operator: [sandbox] max_pids", fmtInt(p.Default.Pids)); err != nil {
			return Limits{}, err
		}
	}
	if r.CPUs != nil {
		l.CPUs = *r.CPUs
		max, why := p.maxCPUs()
		if err := checkAsked(LimitCPUs, l.CPUs, fmtFloat(l.CPUs), MinCPUs, max, why, fmtFloat(p.Default.CPUs)); err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

// checkAsked checks one requested value. Integers arrive as float64: every
// int64 compares correctly against floors and maximums this small.
func checkAsked(field string, v float64, shown string, floor, max float64, why, def string) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return &LimitError{Field: field, Value: shown, Reason: "not a finite number"}
	case v == 0:
		return &LimitError{Field: field, Value: shown, Reason: fmt.Sprintf("0 is not \"no limit\": every sandbox has one; leave the field out for the default of %s (the minimum is %s, the maximum %s)", def, fmtFloat(floor), fmtFloat(max))}
	case v < floor:
		return &LimitError{Field: field, Value: shown, Reason: fmt.Sprintf("below the minimum of %s%s a sandbox needs to start its guest and run a command", fmtFloat(floor), unit(field))}
	case v > max:
		return &LimitError{Field: field, Value: shown, Reason: fmt.Sprintf("above the maximum of %s%s (%s)", fmtFloat(max), unit(field), why)}
	}
	return nil
}

func checkInt(field string, v, floor, ceil int64, ceilWhy string) *LimitError {
	switch {
	case v < floor:
		return &LimitError{Field: field, Value: fmtInt(v), Reason: fmt.Sprintf("below the minimum of %d%s a sandbox needs to start its guest (there is no unlimited)", floor, unit(field))}
	case v > ceil:
		return &LimitError{Field: field, Value: fmtInt(v), Reason: fmt.Sprintf("above %s (%d)", ceilWhy, ceil)}
	}
	return nil
}

func checkFloat(field string, v, floor, ceil float64, ceilWhy string) *LimitError {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return &LimitError{Field: field, Value: fmtFloat(v), Reason: "not a finite number"}
	case v < floor:
		return &LimitError{Field: field, Value: fmtFloat(v), Reason: fmt.Sprintf("below the minimum of %s a sandbox needs to start its guest (there is no unlimited)", fmtFloat(floor))}
	case v > ceil:
		return &LimitError{Field: field, Value: fmtFloat(v), Reason: "above " + ceilWhy}
	}
	return nil
}

func unit(field string) string {
	if field == LimitMemoryMB || field == "max_"+LimitMemoryMB {
		return " MB"
	}
	return ""
}

func fmtInt(v int64) string     { return strconv.FormatInt(v, 10) }
func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Mechanisms that enforce a limit, per limit in Status.Enforcement.
const (
	EnforcedCgroupV2 = "cgroup v2"
	EnforcedCgroupV1 = "cgroup v1"
	EnforcedRlimit   = "rlimit"
	EnforcedDocker   = "docker"
	NotEnforced      = "not enforced"
)

// Enforcement says how one limit of a started sandbox is enforced.
type Enforcement struct {
	// Value is the limit in force in the field's unit, read back from the
	// kernel or the engine where the mechanism allows; 0 when not enforced.
	Value float64 `json:"value,omitempty"`
	// Mechanism is one of the Enforced* constants or NotEnforced.
	Mechanism string `json:"mechanism"`
	// Reason says why a limit is not enforced, or what the mechanism
	// really bounds (RLIMIT_AS is address space, not resident memory).
	Reason string `json:"reason,omitempty"`
}

package process

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// cgroupPlan is where a sandbox's cgroups are and where each limit can be
// read back.
type cgroupPlan struct {
	version int
	dirs    []string
	// files maps a limit field to the file that holds it (cgroup v1 CPU:
	// cpu.cfs_quota_us, with cpu.cfs_period_us beside it).
	files map[string]string
}

// createCgroups creates the sandbox's cgroups with its limits. On a pure
// cgroup v2 host they live under <root>/agentkernel (the root cgroup may
// enable controllers for children); on a v1 host under the daemon's own
// cgroup of each controller, so a daemon already confined by its
// supervisor keeps its sandboxes inside that confinement.
func createCgroups(root, id string, l sandbox.Limits) (cg cgroupPlan, err error) {
	defer func() {
		if err != nil {
			removeCgroups(cg.dirs)
			cg.dirs = nil
		}
	}()
	cg.files = map[string]string{}
	ctrls := neededControllers(l)
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		cg.version = 2
		dir, err := cgroupV2(root, id, ctrls, l)
		if dir != "" {
			cg.dirs = append(cg.dirs, dir)
			for field, f := range map[string]string{sandbox.LimitMemoryMB: "memory.max", sandbox.LimitPids: "pids.max", sandbox.LimitCPUs: "cpu.max"} {
				if _, ok := limitValues(l)[field]; ok {
					cg.files[field] = filepath.Join(dir, f)
				}
			}
		}
		return cg, err
	}
	cg.version = 1
	self, err := selfCgroupsV1()
	if err != nil {
		return cg, err
	}
	for _, c := range ctrls {
		mount := filepath.Join(root, c)
		if _, err := os.Stat(filepath.Join(mount, "cgroup.procs")); err != nil {
			return cg, fmt.Errorf("cgroup v1 controller %s not mounted at %s", c, mount)
		}
		dir := filepath.Join(mount, self[c], "agentkernel", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return cg, err
		}
		cg.dirs = append(cg.dirs, dir)
		field, file, err := writeV1Limits(dir, c, l)
		if err != nil {
			return cg, err
		}
		cg.files[field] = file
	}
	return cg, nil
}

func neededControllers(l sandbox.Limits) []string {
	var c []string
	if l.MemoryMB > 0 {
		c = append(c, "memory")
	}
	if l.Pids > 0 {
		c = append(c, "pids")
	}
	if l.CPUs > 0 {
		c = append(c, "cpu")
	}
	return c
}

func cgroupV2(root, id string, ctrls []string, l sandbox.Limits) (string, error) {
	enable := ""
	for _, c := range ctrls {
		enable += " +" + c
	}
	enable = strings.TrimSpace(enable)
	parent := filepath.Join(root, "agentkernel")
	if err := writeFile(filepath.Join(root, "cgroup.subtree_control"), enable); err != nil {
		return "", err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), enable); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, id)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if l.MemoryMB > 0 {
		b, err := l.MemoryBytes()
		if err != nil {
			return dir, err
		}
		if err := writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(b, 10)); err != nil {
			return dir, err
		}
		_ = writeFile(filepath.Join(dir, "memory.swap.max"), "0") // absent without swap accounting
	}
	if l.Pids > 0 {
		if err := writeFile(filepath.Join(dir, "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
			return dir, err
		}
	}
	if l.CPUs > 0 {
		quota := int64(l.CPUs * 100000)
		if err := writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d 100000", quota)); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// writeV1Limits writes one controller's limit and returns the limit field
// and the file to read it back from.
func writeV1Limits(dir, ctrl string, l sandbox.Limits) (field, file string, err error) {
	switch ctrl {
	case "memory":
		n, err := l.MemoryBytes()
		if err != nil {
			return "", "", err
		}
		b := strconv.FormatInt(n, 10)
		file = filepath.Join(dir, "memory.limit_in_bytes")
		if err := writeFile(file, b); err != nil {
			return "", "", err
		}
		// memsw (memory+swap) must not be below the memory limit; absent
		// without swap accounting.
		_ = writeFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), b)
		return sandbox.LimitMemoryMB, file, nil
	case "pids":
		file = filepath.Join(dir, "pids.max")
		return sandbox.LimitPids, file, writeFile(file, strconv.FormatInt(l.Pids, 10))
	case "cpu":
		if err := writeFile(filepath.Join(dir, "cpu.cfs_period_us"), "100000"); err != nil {
			return "", "", err
		}
		file = filepath.Join(dir, "cpu.cfs_quota_us")
		return sandbox.LimitCPUs, file, writeFile(file, strconv.FormatInt(int64(l.CPUs*100000), 10))
	}
	return "", "", fmt.Errorf("no limit for cgroup v1 controller %s", ctrl)
}

// readCgroupLimit reads a limit back from its cgroup file, in the limit's
// unit; 0 means the file says there is none ("max", or -1 for a v1 quota).
func readCgroupLimit(version int, field, file string) (float64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s is empty", file)
	}
	num := func(s string) (float64, error) {
		if s == "max" {
			return 0, nil
		}
		return strconv.ParseFloat(s, 64)
	}
	switch field {
	case sandbox.LimitMemoryMB:
		v, err := num(f[0])
		return v / (1 << 20), err
	case sandbox.LimitPids:
		return num(f[0])
	case sandbox.LimitCPUs:
		quota, err := num(f[0])
		if err != nil || quota <= 0 {
			return 0, err
		}
		period := "100000"
		if version == 2 && len(f) > 1 {
			period = f[1]
		} else if version == 1 {
			pb, err := os.ReadFile(filepath.Join(filepath.Dir(file), "cpu.cfs_period_us"))
			if err != nil {
				return 0, err
			}
			period = strings.TrimSpace(string(pb))
		}
		p, err := strconv.ParseFloat(period, 64)
		if err != nil || p <= 0 {
			return 0, fmt.Errorf("%s: bad period %q", file, period)
		}
		return quota / p, nil
	}
	return 0, fmt.Errorf("unknown limit %s", field)
}

// selfCgroupsV1 maps each v1 controller to this process's cgroup path.
func selfCgroupsV1() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, sc.Err()
}

// joinCgroups moves pid (and so everything it forks later) into dirs.
func joinCgroups(dirs []string, pid int) error {
	for _, d := range dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// killCgroups SIGKILLs every process left in the sandbox's cgroups.
func killCgroups(dirs []string) {
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// removeCgroups removes the dirs; a cgroup is busy until its last process
// has been reaped, so it retries briefly.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		var err error
		for i := 0; i < 50; i++ {
			err = os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func writeFile(p, s string) error {
	return os.WriteFile(p, []byte(s), 0o644)
}

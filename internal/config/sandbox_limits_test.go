package config

import (
	"strings"
	"testing"
)

// TestSandboxLimitDefaultsAndMaximums: every sandbox has limits by default,
// and the [sandbox] limit keys are validated by name: no zero meaning
// "unlimited", no default above its maximum, no value below what the guest
// needs or past what fits in bytes, no NaN.
func TestSandboxLimitDefaultsAndMaximums(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	cfg, _, err := Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil {
		t.Fatal(err)
	}
	sb := cfg.Sandbox
	if sb.MemoryMB != 1024 || sb.Pids != 512 || sb.CPUs != 1 || sb.MaxMemoryMB != 8192 || sb.MaxPids != 4096 || sb.MaxCPUs != 4 {
		t.Fatalf("limit defaults: %+v", sb)
	}
	for _, c := range []struct {
		file string
		want []string
	}{
		{"[sandbox]\nmemory_mb = 0\n", []string{"sandbox.memory_mb", "minimum of 16 MB", "no unlimited"}},
		{"[sandbox]\npids = -1\n", []string{"sandbox.pids", "minimum of 16"}},
		{"[sandbox]\nmemory_mb = 2048\nmax_memory_mb = 1024\n", []string{"sandbox.memory_mb", "max_memory_mb = 1024"}},
		{"[sandbox]\nmax_memory_mb = 4611686018427387904\n", []string{"sandbox.max_memory_mb", "ceiling"}},
		{"[sandbox]\nmax_pids = 100000000\n", []string{"sandbox.max_pids", "PID_MAX_LIMIT"}},
		{"[sandbox]\ncpus = nan\n", []string{"sandbox.cpus", "finite"}},
		{"[sandbox]\ncpus = 100000\nmax_cpus = 100000\n", []string{"sandbox.cpus", "sandbox.max_cpus"}},
		{"[sandbox]\ncpus = 0.01\n", []string{"sandbox.cpus", "minimum of 0.05"}},
	} {
		p := t.TempDir() + "/c.toml"
		writeFile(t, p, c.file)
		_, _, err := Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + home})
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %v does not mention %q", c.file, err, w)
			}
		}
	}
	_, _, err = Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home, "AGENTKERNEL_SANDBOX_MAX_PIDS=8"})
	if err == nil || !strings.Contains(err.Error(), "sandbox.max_pids") {
		t.Fatalf("max_pids from the environment: %v", err)
	}
}

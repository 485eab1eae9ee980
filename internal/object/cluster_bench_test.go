package object_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBenchCluster measures what several daemons on one PostgreSQL and one
// S3 server cost (issue 16), with the cluster tests' harness (real `serve`
// processes, one fresh database):
//
//   - forwarded: one object owned by n1 of three nodes; N sequential calls
//     through n1 (local) and N through n2 (forwarded by n2 to n1), in
//     interleaved rounds so the machine's noise hits both; per call mean,
//     p50 and p99, and the ratio forwarded/local. For a write-through
//     class (a store write per call) and a snapshot-mode class-mode one
//     (none).
//   - objects: calls/s across 1,000 objects of an isolation = "class"
//     class, C concurrent callers, through three cluster nodes round-robin
//     against one cluster node (and one plain daemon on the same store for
//     reference). All three set-ups run at once; a warm-up pass touches
//     every object (the leases are taken then), and the timed passes
//     alternate between the set-ups, so noise hits each. With the CPU time
//     per call the passes took (/proc): the machine's, the daemons', the
//     set-up's PostgreSQL backends' and this process's (callers, proxies).
//
// It is a measurement, not a check (the machine is shared): it runs only
// when AGENTKERNEL_BENCH_CLUSTER is set, and logs its figures.
//
//	AGENTKERNEL_BENCH_CLUSTER=1 go test -count=1 -run TestBenchCluster -v -timeout 20m ./internal/object/
//
// Knobs: AGENTKERNEL_BENCH_CLUSTER_CALLS (N, default 3000),
// _OBJECTS (1000), _CONC (32 callers), _TIMED (calls per timed pass,
// default 10 per object), _ROUNDS (timed passes per set-up, 5), _LEASE
// (lease_ttl, default the production default 15s).
func TestBenchCluster(t *testing.T) {
	if os.Getenv("AGENTKERNEL_BENCH_CLUSTER") == "" {
		t.Skip("AGENTKERNEL_BENCH_CLUSTER is not set")
	}
	lease := 15 * time.Second
	if v := os.Getenv("AGENTKERNEL_BENCH_CLUSTER_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		lease = d
	}
	opts := clusterOpts{leaseTTL: lease, classes: ccounterClass}
	t.Logf("lease_ttl %v, %d cores shared by the nodes, their sandboxes, PostgreSQL, S3 and the callers", lease, runtime.NumCPU())
	t.Run("forwarded", func(t *testing.T) { benchForwarded(t, opts) })
	t.Run("objects", func(t *testing.T) { benchObjects(t, opts) })
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchClient keeps connections alive to every node, as a real client
// with concurrency would (http.DefaultClient keeps two per host).
var benchClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConns: 512, MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}}

// benchCall calls method on class/id at nd; it returns the node that
// served it.
func (e *clusterEnv) benchCall(ctx context.Context, nd *clusterNode, class, id, method string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", nd.url+"/v1/objects/"+class+"/"+id+"/call",
		bytes.NewReader([]byte(`{"method":"`+method+`"}`)))
	if err != nil {
		return "", err
	}
	req.Header.Set("x-api-key", e.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s %s/%s at %s: %d %s", method, class, id, nd.name, resp.StatusCode, b)
	}
	var out struct{ Result json.RawMessage }
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return resp.Header.Get("X-Agentkernel-Node"), nil
}

type durStats struct{ mean, p50, p99 time.Duration }

func statsOf(ds []time.Duration) durStats {
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return durStats{sum / time.Duration(len(s)), q(0.50), q(0.99)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func benchForwarded(t *testing.T, opts clusterOpts) {
	n := envInt("AGENTKERNEL_BENCH_CLUSTER_CALLS", 3000)
	const perRound = 10
	e := newClusterEnvOpts(t, 3, opts)
	ctx := context.Background()
	n1, n2 := e.nodes[0], e.nodes[1]
	for _, tc := range []struct{ class, method, what string }{
		{"wcounter", "increment", "write-through increment (a store write per call)"},
		{"ccounter", "increment", "snapshot-mode increment, isolation class (no store write)"},
		{"ccounter", "get", "snapshot-mode get, isolation class"},
	} {
		id := "fwd-" + tc.class
		if served, err := e.benchCall(ctx, n1, tc.class, id, tc.method); err != nil || served != "n1" {
			t.Fatalf("first call of %s at n1: served by %q, %v", id, served, err)
		}
		// Warm both paths (n2's route cache, both connection pools).
		for range 50 {
			for _, nd := range []*clusterNode{n1, n2} {
				if _, err := e.benchCall(ctx, nd, tc.class, id, tc.method); err != nil {
					t.Fatal(err)
				}
			}
		}
		local := make([]time.Duration, 0, n)
		fwd := make([]time.Duration, 0, n)
		for round := 0; len(local) < n; round++ {
			order := []*clusterNode{n1, n2}
			if round%2 == 1 {
				order = []*clusterNode{n2, n1}
			}
			for _, nd := range order {
				for range perRound {
					t0 := time.Now()
					served, err := e.benchCall(ctx, nd, tc.class, id, tc.method)
					d := time.Since(t0)
					if err != nil {
						t.Fatal(err)
					}
					if served != "n1" {
						t.Fatalf("%s served by %q; want n1", id, served)
					}
					if nd == n1 {
						local = append(local, d)
					} else {
						fwd = append(fwd, d)
					}
				}
			}
		}
		l, f := statsOf(local), statsOf(fwd)
		t.Logf("forwarded vs local, %s, %d calls each:", tc.what, n)
		t.Logf("  local     (n1→n1): mean %s  p50 %s  p99 %s", ms(l.mean), ms(l.p50), ms(l.p99))
		t.Logf("  forwarded (n2→n1): mean %s  p50 %s  p99 %s", ms(f.mean), ms(f.p50), ms(f.p99))
		t.Logf("  ratio forwarded/local: mean %.2f×  p50 %.2f×  p99 %.2f×; forwarding adds %s (mean)",
			float64(f.mean)/float64(l.mean), float64(f.p50)/float64(l.p50), float64(f.p99)/float64(l.p99), ms(f.mean-l.mean))
		t.Logf("RESULT forwarded %s %s local_mean_ms=%.3f local_p50_ms=%.3f local_p99_ms=%.3f fwd_mean_ms=%.3f fwd_p50_ms=%.3f fwd_p99_ms=%.3f ratio_mean=%.2f ratio_p50=%.2f",
			tc.class, tc.method, msf(l.mean), msf(l.p50), msf(l.p99), msf(f.mean), msf(f.p50), msf(f.p99),
			float64(f.mean)/float64(l.mean), float64(f.p50)/float64(l.p50))
	}
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// objectsSetup is one of the compared set-ups of benchObjects.
type objectsSetup struct {
	name  string
	e     *clusterEnv
	rates []float64
	fwd   []float64
	// cpu is the CPU time the timed passes took, calls their calls.
	cpu   cpuSample
	calls int
}

func benchObjects(t *testing.T, opts clusterOpts) {
	objects := envInt("AGENTKERNEL_BENCH_CLUSTER_OBJECTS", 1000)
	conc := envInt("AGENTKERNEL_BENCH_CLUSTER_CONC", 32)
	timed := envInt("AGENTKERNEL_BENCH_CLUSTER_TIMED", 10*objects)
	rounds := envInt("AGENTKERNEL_BENCH_CLUSTER_ROUNDS", 5)
	single := opts
	single.single = true
	setups := []*objectsSetup{
		{name: "3 nodes", e: newClusterEnvOpts(t, 3, opts)},
		{name: "1 node", e: newClusterEnvOpts(t, 1, opts)},
		{name: "1 plain daemon (no [cluster])", e: newClusterEnvOpts(t, 1, single)},
	}
	ctx := context.Background()
	// pass calls objects[perm[k % objects]] through node k % nodes for k
	// in [0, calls), conc at a time; it returns the calls/s and the share
	// of calls another node served (forwarded).
	pass := func(s *objectsSetup, calls int, perm []int) (float64, float64, cpuSample) {
		var next, forwarded atomic.Int64
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		cpu0 := sampleCPU(s.e)
		t0 := time.Now()
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k := int(next.Add(1) - 1)
					if k >= calls {
						return
					}
					nd := s.e.nodes[k%len(s.e.nodes)]
					served, err := s.e.benchCall(ctx, nd, "ccounter", fmt.Sprint("o", perm[k%objects]), "increment")
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						next.Store(int64(calls))
						return
					}
					if served != "" && served != nd.name {
						forwarded.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(t0)
		cpu := sampleCPU(s.e).minus(cpu0)
		if firstErr != nil {
			t.Fatalf("%s: %v", s.name, firstErr)
		}
		return float64(calls) / el.Seconds(), float64(forwarded.Load()) / float64(calls), cpu
	}
	ident := make([]int, objects)
	for i := range ident {
		ident[i] = i
	}
	for _, s := range setups {
		rate, _, _ := pass(s, objects, ident)
		t.Logf("%s: warm-up (first call of each of %d objects: lease, placement in the shared sandbox): %.0f calls/s", s.name, objects, rate)
	}
	rng := rand.New(rand.NewPCG(16, 16))
	for r := range rounds {
		// A new order each round, not lined up with the warm-up's (whose
		// object i is owned by node i % 3): about 2 in 3 calls to the 3
		// nodes are forwarded.
		perm := rng.Perm(objects)
		for i := range setups {
			s := setups[(i+r)%len(setups)]
			rate, f, cpu := pass(s, timed, perm)
			s.rates = append(s.rates, rate)
			s.fwd = append(s.fwd, f)
			s.cpu = s.cpu.plus(cpu)
			s.calls += timed
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	base := med(setups[1].rates)
	t.Logf("calls/s across %d objects (isolation class), %d callers, %d calls per timed pass, %d passes each, interleaved:", objects, conc, timed, rounds)
	for _, s := range setups {
		t.Logf("  %-30s median %6.0f calls/s  (passes %v)  forwarded %.0f%%  vs 1 node %.2f×",
			s.name, med(s.rates), roundAll(s.rates), 100*med(s.fwd), med(s.rates)/base)
		c, per := s.cpu, func(ticks int64) float64 { return float64(ticks) * 1000 / clockTicks / float64(s.calls) }
		t.Logf("  %-30s CPU per call: machine %.3f ms = daemons %.3f + postgres %.3f + callers and PG proxies %.3f + rest (sandboxes, S3, other work) %.3f",
			"", per(c.machine), per(c.daemons), per(c.postgres), per(c.self), per(c.machine-c.daemons-c.postgres-c.self))
		t.Logf("RESULT objects %q median_calls_per_s=%.0f passes=%v forwarded=%.2f vs_1node=%.2f",
			s.name, med(s.rates), roundAll(s.rates), med(s.fwd), med(s.rates)/base)
	}
}

func roundAll(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

// cpuSample is CPU time so far in clock ticks: the machine's (busy, steal
// left out), a set-up's daemons', the PostgreSQL backends of its database
// and this test process's (the callers and the PostgreSQL proxies).
type cpuSample struct{ machine, daemons, postgres, self int64 }

func (a cpuSample) minus(b cpuSample) cpuSample {
	return cpuSample{a.machine - b.machine, a.daemons - b.daemons, a.postgres - b.postgres, a.self - b.self}
}

func (a cpuSample) plus(b cpuSample) cpuSample {
	return cpuSample{a.machine + b.machine, a.daemons + b.daemons, a.postgres + b.postgres, a.self + b.self}
}

// sampleCPU reads the CPU times; postgres is the backends serving the
// set-up's database (one that exits between two samples loses its time,
// one started between them counts from 0).
func sampleCPU(e *clusterEnv) cpuSample {
	var c cpuSample
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		// cpu user nice system idle iowait irq softirq steal
		for _, i := range []int{1, 2, 3, 6, 7} {
			if i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				c.machine += v
			}
		}
	}
	for _, nd := range e.nodes {
		c.daemons += procTicks(nd.cmd.Process.Pid)
	}
	c.self = procTicks(os.Getpid())
	u, _ := url.Parse(e.pg)
	db := strings.TrimPrefix(u.Path, "/")
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		// A backend's title: "postgres: user database host(port) state".
		if title, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(title), "postgres: ") &&
			strings.Contains(string(title), " "+db+" ") {
			c.postgres += procTicks(pid)
		}
	}
	return c
}

// procTicks is a process's user and system time so far.
func procTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

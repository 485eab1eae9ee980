package object_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// BenchmarkManyObjects (issue 15): calls/s across 1,000 warmed objects
// (AGENTKERNEL_BENCH_OBJECTS), closed loop of 64 callers, with the DEFAULT
// limits (max_active_objects 200), isolation "class" against "object";
// and the memory a live object costs: the PSS of the object sandboxes'
// processes (from /proc/<pid>/smaps_rollup of each running sandbox's
// bwrap and its descendants) divided by the live objects, plus the
// daemon's heap growth per warmed object. Run one at a time:
//
//	go test ./internal/object -run '^$' -bench ManyObjects -benchtime 2000x
func BenchmarkManyObjects(b *testing.B) {
	ctx := context.Background()
	objects := 1000
	if v, err := strconv.Atoi(os.Getenv("AGENTKERNEL_BENCH_OBJECTS")); err == nil && v > 0 {
		objects = v
	}
	for _, tc := range []struct{ isolation, class string }{{"class", "ccounter"}, {"object", "counter"}} {
		b.Run(fmt.Sprintf("isolation-%s-%dobjects", tc.isolation, objects), func(b *testing.B) {
			_, app := builds(b)
			d, c := benchDaemon(b, func(cfg *config.Config) {
				// Default limits: nothing under [durable_objects] but app_roots.
				cfg.Objects = append(cfg.Objects, config.ObjectClassConfig{Class: "ccounter", InitCommand: []string{"/app/counter"}, AppDir: app, Isolation: "class"})
			})
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			t0 := time.Now()
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for i := range objects {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if _, err := c.Objects.Call(ctx, tc.class, fmt.Sprint("o", i), agentkernel.ObjectCall{Method: "get"}); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			warm := time.Since(t0)
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			live := liveObjects(b, c, tc.class)
			pss := sandboxPSS(b, d)
			wakes0 := wakeCount(b, d, tc.class)

			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			for w := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						id := fmt.Sprint("o", (int(n)+w)%objects)
						if _, err := c.Objects.Call(ctx, tc.class, id, agentkernel.ObjectCall{Method: "increment"}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
			b.ReportMetric(float64(wakeCount(b, d, tc.class)-wakes0)/float64(b.N), "wakes/call")
			b.ReportMetric(float64(liveObjects(b, c, tc.class)), "live-after")
			// (After the loop: ResetTimer drops metrics reported before it.)
			b.ReportMetric(warm.Seconds(), "warmup-s")
			b.ReportMetric(float64(live), "live-after-warmup")
			if live > 0 {
				b.ReportMetric(float64(pss)/float64(live)/(1<<20), "sandbox-PSS-MiB/live-object")
			}
			b.ReportMetric((float64(after.HeapInuse)-float64(before.HeapInuse))/float64(objects)/1024, "daemon-heap-KiB/object")
		})
	}
}

func liveObjects(b *testing.B, c *agentkernel.Client, class string) int {
	n, after := 0, ""
	for {
		objs, err := c.Objects.List(context.Background(), agentkernel.ObjectListParams{Class: class, Status: "Active", After: after, Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		n += len(objs)
		if len(objs) < 1000 {
			return n
		}
		after = objs[len(objs)-1].Class + "/" + objs[len(objs)-1].ID
	}
}

// wakeCount reads agentkernel_object_wake_duration_seconds_count{class}.
func wakeCount(b *testing.B, d *daemontest.Daemon, class string) int64 {
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.AdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	prefix := `agentkernel_object_wake_duration_seconds_count{class="` + class + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int64(n)
		}
	}
	return 0
}

// sandboxPSS sums the PSS of every running sandbox's processes: its bwrap
// and all their descendants (the guest and the object's server).
func sandboxPSS(b *testing.B, d *daemontest.Daemon) int64 {
	list, err := d.Sandboxes().List(context.Background(), "", "active")
	if err != nil {
		b.Fatal(err)
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so cut at the last ')'.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var total int64
	for _, in := range list {
		var h struct{ State []byte }
		if json.Unmarshal(in.Handle, &h) != nil {
			continue
		}
		var st struct {
			PID      int `json:"pid"`
			BwrapPID int `json:"bwrap_pid"`
		}
		if json.Unmarshal(h.State, &st) != nil {
			continue
		}
		root := st.BwrapPID
		if root == 0 {
			root = st.PID
		}
		queue := []int{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = append(queue[1:], children[p]...)
			total += pssOf(p)
		}
	}
	return total
}

// pssOf reads Pss from /proc/<pid>/smaps_rollup, in bytes.
func pssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

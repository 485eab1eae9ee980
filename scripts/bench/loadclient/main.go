// Command loadclient is the closed-loop client of scripts/bench/compare-workerd.sh:
// the same client, in the same run, against agentkernel's counter object and
// workerd's SQLite-backed Durable Object counter. It is a bench tool, not a
// test: nothing in the test suite runs it.
//
//	loadclient run -name ROW -objects N -concurrency C -duration D -turns T \
//	    -ak-url URL -ak-key KEY -ak-class CLASS [-workerd-url URL]
//
// warms every object on both systems (one call each), then runs T turns of
// each system alternately (agentkernel, workerd, agentkernel, workerd, … —
// "A B A B"), each turn preceded by one untimed call to every object of
// that system (workerd evicts a Durable Object idle for ~10 s, so without
// it the other system's turn would leave workerd's objects cold) and
// itself a closed loop of C callers for D, every caller
// sending `increment` to the next object round robin and waiting for the
// answer before sending the next. It prints one markdown table row (calls/s,
// p50, p99 per system, the ratio agentkernel/workerd) on stdout and per-turn
// figures on stderr. Every answer's value is checked: an object's
// increments must return distinct values (a repeated value is a lost
// update), so a fast wrong answer cannot pass for throughput.
//
//	loadclient pss [-match STR] PID...
//
// prints the summed PSS in kB of the given processes, their descendants,
// and (with -match) every process whose command line contains STR and its
// descendants, then the number of processes counted.
//
//	loadclient active -ak-url URL -ak-key KEY -ak-class CLASS
//
// prints how many of the tenant's objects of CLASS agentkernel lists as
// Active (live: a running sandbox holds them).
//
//	loadclient freeport
//
// prints a free TCP port on 127.0.0.1.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "pss":
		err = pssCmd(os.Args[2:])
	case "active":
		err = activeCmd(os.Args[2:])
	case "freeport":
		err = freePort()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadclient:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: loadclient run|pss|active|freeport [flags] (see the package comment)")
	os.Exit(2)
}

func freePort() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

// system is one side of the comparison: how to address an object's
// increment and get, and how to read the value out of the answer.
type system struct {
	name string
	// req builds the request for method ("increment" or "get") on id.
	req func(ctx context.Context, id, method string) (*http.Request, error)
	// value extracts the counter's value from a 200 answer.
	value func(body []byte) (int64, error)
}

func agentkernelSystem(base, key, class string) system {
	return system{
		name: "agentkernel",
		req: func(ctx context.Context, id, method string) (*http.Request, error) {
			body := `{"method":"get"}`
			if method == "increment" {
				body = `{"method":"increment","args":{"amount":1}}`
			}
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/objects/"+class+"/"+id+"/call", strings.NewReader(body))
			if err != nil {
				return nil, err
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("x-api-key", key)
			return r, nil
		},
		value: func(b []byte) (int64, error) {
			var v struct {
				Result *struct {
					Value *int64 `json:"value"`
				} `json:"result"`
			}
			if err := json.Unmarshal(b, &v); err != nil || v.Result == nil || v.Result.Value == nil {
				return 0, fmt.Errorf("unexpected answer %.200q", b)
			}
			return *v.Result.Value, nil
		},
	}
}

func workerdSystem(base string) system {
	return system{
		name: "workerd",
		req: func(ctx context.Context, id, method string) (*http.Request, error) {
			var body io.Reader
			if method == "increment" {
				body = strings.NewReader(`{"amount":1}`)
			}
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/obj/"+id+"/"+method, body)
			if err != nil {
				return nil, err
			}
			r.Header.Set("Content-Type", "application/json")
			return r, nil
		},
		value: func(b []byte) (int64, error) {
			var v struct {
				Value *int64 `json:"value"`
			}
			if err := json.Unmarshal(b, &v); err != nil || v.Value == nil {
				return 0, fmt.Errorf("unexpected answer %.200q", b)
			}
			return *v.Value, nil
		},
	}
}

type runFlags struct {
	name        string
	objects     int
	prefix      string
	concurrency int
	duration    time.Duration
	turns       int
	akURL       string
	akKey       string
	akClass     string
	workerdURL  string
	timeout     time.Duration
}

// result is one system's figures over all its turns.
type result struct {
	calls    int64
	elapsed  time.Duration
	turnRate []float64
	lat      []time.Duration
	errors   int64
	firstErr string
	lost     int64
}

func (r *result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.calls) / r.elapsed.Seconds()
}

func (r *result) pct(p int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, len(r.lat)*p/100)]
}

func runCmd(args []string) error {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&f.name, "name", "row", "row label")
	fs.IntVar(&f.objects, "objects", 1, "objects, called round robin")
	fs.StringVar(&f.prefix, "id-prefix", "o", "object ids are PREFIX-0 … PREFIX-(N-1)")
	fs.IntVar(&f.concurrency, "concurrency", 16, "closed-loop callers")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "length of one turn")
	fs.IntVar(&f.turns, "turns", 2, "turns per system, alternating (2 = A B A B)")
	fs.StringVar(&f.akURL, "ak-url", "", "agentkernel daemon URL")
	fs.StringVar(&f.akKey, "ak-key", "", "agentkernel API key")
	fs.StringVar(&f.akClass, "ak-class", "counter", "agentkernel object class")
	fs.StringVar(&f.workerdURL, "workerd-url", "", "workerd URL (empty: agentkernel only)")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "per-call timeout")
	_ = fs.Parse(args)
	if f.akURL == "" && f.workerdURL == "" {
		return errors.New("run: neither -ak-url nor -workerd-url given")
	}
	if f.objects < 1 || f.concurrency < 1 || f.turns < 1 || f.duration <= 0 {
		return errors.New("run: -objects, -concurrency, -turns and -duration must be positive")
	}

	// No signal handling: Ctrl-C kills the client outright, so the calling
	// shell sees a death by SIGINT and runs its own trap.
	ctx := context.Background()
	hc := &http.Client{
		Timeout: f.timeout,
		Transport: &http.Transport{
			MaxIdleConns:        4 * f.concurrency,
			MaxIdleConnsPerHost: 2 * f.concurrency,
			DisableCompression:  true,
			IdleConnTimeout:     5 * time.Minute,
		},
	}
	var systems []system
	if f.akURL != "" {
		systems = append(systems, agentkernelSystem(strings.TrimRight(f.akURL, "/"), f.akKey, f.akClass))
	}
	if f.workerdURL != "" {
		systems = append(systems, workerdSystem(strings.TrimRight(f.workerdURL, "/")))
	}
	ids := make([]string, f.objects)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", f.prefix, i)
	}

	for _, s := range systems {
		t0 := time.Now()
		if err := warm(ctx, hc, s, ids, f.concurrency); err != nil {
			return fmt.Errorf("%s: warming %d objects: %w", s.name, len(ids), err)
		}
		fmt.Fprintf(os.Stderr, "  %s: %s: warmed %d objects in %.1fs\n", f.name, s.name, len(ids), time.Since(t0).Seconds())
	}

	results := make([]*result, len(systems))
	seen := make([]map[int32][]int64, len(systems))
	for i := range results {
		results[i] = &result{}
		seen[i] = map[int32][]int64{}
	}
	for turn := range f.turns {
		for i, s := range systems {
			if err := ctx.Err(); err != nil {
				return err
			}
			// Every turn starts with every object live on its system:
			// workerd evicts a Durable Object idle for about 10 s, which
			// the other system's turn would otherwise cause (agentkernel's
			// idle timeout is 300 s). Untimed.
			if turn > 0 || i > 0 {
				t0 := time.Now()
				if err := warm(ctx, hc, s, ids, f.concurrency); err != nil {
					return fmt.Errorf("%s: re-warming %d objects: %w", s.name, len(ids), err)
				}
				fmt.Fprintf(os.Stderr, "  %s: turn %d %s: re-warmed in %.1fs\n", f.name, turn+1, s.name, time.Since(t0).Seconds())
			}
			from := len(results[i].lat)
			calls, elapsed := loop(ctx, hc, s, ids, f.concurrency, f.duration, results[i], seen[i])
			r := float64(calls) / elapsed.Seconds()
			results[i].turnRate = append(results[i].turnRate, r)
			var slowest time.Duration
			if from < len(results[i].lat) {
				slowest = slices.Max(results[i].lat[from:])
			}
			fmt.Fprintf(os.Stderr, "  %s: turn %d %s: %d calls in %.2fs = %.0f calls/s, slowest %s ms\n", f.name, turn+1, s.name, calls, elapsed.Seconds(), r, ms(slowest))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, r := range results {
		slices.Sort(r.lat)
		r.lost = lostUpdates(seen[i])
		if r.errors > 0 || r.lost > 0 {
			fmt.Fprintf(os.Stderr, "  %s: %s: %d failed calls (first: %s), %d lost updates\n", f.name, systems[i].name, r.errors, r.firstErr, r.lost)
		}
	}
	fmt.Println(row(f.name, systems, results))
	for _, r := range results {
		if r.errors > 0 || r.lost > 0 {
			return errors.New("some calls failed or lost updates (see above)")
		}
	}
	return nil
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

func rates(r *result) string {
	s := make([]string, len(r.turnRate))
	for i, v := range r.turnRate {
		s[i] = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.Join(s, ", ")
}

// row is one line of the markdown table the script prints:
// | row | ak calls/s | ak p50 / p99 ms | workerd calls/s | workerd p50 / p99 ms | ratio |.
func row(name string, systems []system, rs []*result) string {
	cells := []string{name}
	var ak, wd *result
	for i, s := range systems {
		if s.name == "agentkernel" {
			ak = rs[i]
		} else {
			wd = rs[i]
		}
	}
	for _, r := range []*result{ak, wd} {
		if r == nil {
			cells = append(cells, "—", "—")
			continue
		}
		cells = append(cells,
			fmt.Sprintf("%.0f (%s)", r.rate(), rates(r)),
			fmt.Sprintf("%s / %s", ms(r.pct(50)), ms(r.pct(99))))
	}
	ratio := "—"
	if ak != nil && wd != nil && wd.rate() > 0 {
		ratio = fmt.Sprintf("**%.2f×** (p50 %.2f×)", ak.rate()/wd.rate(), float64(ak.pct(50))/float64(max(wd.pct(50), 1)))
	}
	cells = append(cells, ratio)
	return "| " + strings.Join(cells, " | ") + " |"
}

// call sends method to id and returns the counter's value.
func call(ctx context.Context, hc *http.Client, s system, id, method string) (int64, error) {
	req, err := s.req(ctx, id, method)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s %s: status %d: %.300s", method, id, resp.StatusCode, bytes.TrimSpace(b))
	}
	return s.value(b)
}

func warm(ctx context.Context, hc *http.Client, s system, ids []string, concurrency int) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(concurrency, len(ids)) {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= len(ids) || ctx.Err() != nil {
					return
				}
				if _, err := call(ctx, hc, s, ids[n], "get"); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

type sample struct {
	obj   int32
	value int64
}

// loop runs one closed-loop turn; figures are added to r, values to seen.
func loop(ctx context.Context, hc *http.Client, s system, ids []string, concurrency int, d time.Duration, r *result, seen map[int32][]int64) (int64, time.Duration) {
	var (
		next  atomic.Int64
		calls atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
	)
	start := time.Now()
	deadline := start.Add(d)
	for range concurrency {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			var samples []sample
			var errs, inARow int64
			var firstErr string
			// A caller gives up after 10 failures in a row (a server that
			// went away), rather than spinning on refused connections.
			for time.Now().Before(deadline) && ctx.Err() == nil && inARow < 10 {
				obj := int32(next.Add(1) % int64(len(ids)))
				t0 := time.Now()
				v, err := call(ctx, hc, s, ids[obj], "increment")
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					errs++
					inARow++
					if firstErr == "" {
						firstErr = err.Error()
					}
					continue
				}
				inARow = 0
				lat = append(lat, time.Since(t0))
				samples = append(samples, sample{obj, v})
			}
			calls.Add(int64(len(lat)))
			mu.Lock()
			defer mu.Unlock()
			r.lat = append(r.lat, lat...)
			r.errors += errs
			if r.firstErr == "" {
				r.firstErr = firstErr
			}
			for _, x := range samples {
				seen[x.obj] = append(seen[x.obj], x.value)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.calls += calls.Load()
	r.elapsed += elapsed
	return calls.Load(), elapsed
}

// lostUpdates counts answers that repeated a value an earlier increment of
// the same object already returned.
func lostUpdates(seen map[int32][]int64) int64 {
	var lost int64
	for _, vs := range seen {
		slices.Sort(vs)
		for i := 1; i < len(vs); i++ {
			if vs[i] == vs[i-1] {
				lost++
			}
		}
	}
	return lost
}

func pssCmd(args []string) error {
	fs := flag.NewFlagSet("pss", flag.ExitOnError)
	match := fs.String("match", "", "also count processes whose command line contains this (and their descendants)")
	_ = fs.Parse(args)
	procs, err := processes()
	if err != nil {
		return err
	}
	roots := map[int]bool{}
	for _, a := range fs.Args() {
		pid, err := strconv.Atoi(a)
		if err != nil {
			return fmt.Errorf("pss: %q is not a pid", a)
		}
		roots[pid] = true
	}
	if *match != "" {
		for pid, p := range procs {
			if pid != os.Getpid() && strings.Contains(p.cmdline, *match) {
				roots[pid] = true
			}
		}
	}
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	counted := map[int]bool{}
	var walk func(int)
	walk = func(pid int) {
		if counted[pid] {
			return
		}
		if _, ok := procs[pid]; !ok {
			return
		}
		counted[pid] = true
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for pid := range roots {
		walk(pid)
	}
	var total int64
	for pid := range counted {
		kb, err := pssKB(pid)
		if err != nil {
			continue // exited meanwhile
		}
		total += kb
	}
	fmt.Println(total, len(counted))
	return nil
}

type proc struct {
	ppid    int
	cmdline string
}

func processes() (map[int]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = proc{ppid: ppid, cmdline: string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))}
	}
	return out, nil
}

func pssKB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	// A kernel thread or zombie has no mappings.
	return 0, nil
}

func activeCmd(args []string) error {
	fs := flag.NewFlagSet("active", flag.ExitOnError)
	base := fs.String("ak-url", "", "agentkernel daemon URL")
	key := fs.String("ak-key", "", "agentkernel API key")
	class := fs.String("ak-class", "counter", "object class")
	_ = fs.Parse(args)
	n, after := 0, ""
	for {
		q := url.Values{"class": {*class}, "status": {"Active"}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		req, err := http.NewRequest(http.MethodGet, strings.TrimRight(*base, "/")+"/v1/objects?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("x-api-key", *key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("list objects: status %d: %.300s", resp.StatusCode, b)
		}
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		n += len(page.Data)
		if !page.HasMore || len(page.Data) == 0 {
			break
		}
		after = page.Data[len(page.Data)-1].ID
	}
	fmt.Println(n)
	return nil
}

package object_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/guest"
)

// Benchmarks of seed 002's figures, through a real daemon on the process
// driver. Run (one at a time on this 2-core machine):
//
//	go test ./internal/object -run '^$' -bench . -benchtime 2000x
//
// p50/p99 are reported as metrics; ratios are computed within one run.

func benchDaemon(b *testing.B, mut func(*config.Config)) (*daemontest.Daemon, *agentkernel.Client) {
	b.Helper()
	_, app := builds(b)
	d := daemontest.Start(b, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{
			{Class: "counter", InitCommand: []string{"/app/counter"}, AppDir: app},
			{Class: "wcounter", InitCommand: []string{"/app/counter"}, AppDir: app, StorageMode: "write-through"},
		}
		c.DurableObjects.AppRoots = []string{app}
		if mut != nil {
			mut(c)
		}
	})
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey),
		agentkernel.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}))
	b.Cleanup(func() {
		ctx := context.Background()
		for {
			objs, _ := c.Objects.List(ctx, agentkernel.ObjectListParams{})
			if len(objs) == 0 {
				return
			}
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for _, o := range objs {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					_ = c.Objects.Delete(ctx, o.Class, o.ID)
					<-sem
				}()
			}
			wg.Wait()
		}
	})
	return d, c
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func postIncrement(b *testing.B, hc *http.Client, url string, mode string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"amount":1}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agentkernel-Storage-Mode", mode)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkWarmCall: one sequential caller, warm object.
func BenchmarkWarmCall(b *testing.B) {
	ctx := context.Background()
	b.Run("direct-host-tcp", func(b *testing.B) {
		_, app := builds(b)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		cmd := exec.Command(filepath.Join(app, "counter"), port)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		hc := &http.Client{}
		for range 200 {
			if r, err := hc.Get("http://127.0.0.1:" + port + "/__health"); err == nil {
				r.Body.Close()
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			postIncrement(b, hc, "http://127.0.0.1:"+port+"/increment", "snapshot")
			lat = append(lat, time.Since(t0))
		}
		report(b, lat)
	})
	b.Run("direct-guest-proxy", func(b *testing.B) {
		d, c := benchDaemon(b, nil)
		if _, err := c.Objects.Call(ctx, "counter", "direct", agentkernel.ObjectCall{Method: "get"}); err != nil {
			b.Fatal(err)
		}
		o, err := c.Objects.Get(ctx, "counter", "direct")
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		err = d.Sandboxes().Client(ctx, "", o.SandboxID, func(gc *guest.Client) error {
			hc := gc.ProxyClient()
			for range b.N {
				t0 := time.Now()
				postIncrement(b, hc, "http://object/increment", "snapshot")
				lat = append(lat, time.Since(t0))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		report(b, lat)
	})
	b.Run("direct-guest-objconn", func(b *testing.B) {
		d, c := benchDaemon(b, nil)
		if _, err := c.Objects.Call(ctx, "counter", "direct", agentkernel.ObjectCall{Method: "get"}); err != nil {
			b.Fatal(err)
		}
		o, err := c.Objects.Get(ctx, "counter", "direct")
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		err = d.Sandboxes().Client(ctx, "", o.SandboxID, func(gc *guest.Client) error {
			hc := gc.ObjectClient()
			for range b.N {
				t0 := time.Now()
				postIncrement(b, hc, "http://object/increment", "snapshot")
				lat = append(lat, time.Since(t0))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		report(b, lat)
	})
	for _, class := range []string{"counter", "wcounter"} {
		b.Run("agentkernel-api-"+class, func(b *testing.B) {
			_, c := benchDaemon(b, nil)
			if _, err := c.Objects.Call(ctx, class, "warm", agentkernel.ObjectCall{Method: "get"}); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := c.Objects.Call(ctx, class, "warm", agentkernel.ObjectCall{Method: "increment", Args: map[string]any{"amount": 1}}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			report(b, lat)
		})
	}
}

// BenchmarkThroughput: concurrent callers on one object, and spread over
// many objects (AGENTKERNEL_BENCH_OBJECTS, default 100).
func BenchmarkThroughput(b *testing.B) {
	ctx := context.Background()
	many := 100
	if v, err := strconv.Atoi(os.Getenv("AGENTKERNEL_BENCH_OBJECTS")); err == nil && v > 0 {
		many = v
	}
	for _, tc := range []struct {
		class   string
		objects int
		callers int
	}{
		{"counter", 1, 16}, {"wcounter", 1, 16},
		{"counter", many, 64}, {"wcounter", many, 64},
	} {
		b.Run(fmt.Sprintf("%s-%dobjects", tc.class, tc.objects), func(b *testing.B) {
			_, c := benchDaemon(b, func(cfg *config.Config) { cfg.DurableObjects.MaxActiveObjects = int64(max(200, tc.objects)) })
			// Create every object first (sandbox starts are not the subject).
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for i := range tc.objects {
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
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			for w := range tc.callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						id := fmt.Sprint("o", (int(n)+w)%tc.objects)
						if _, err := c.Objects.Call(ctx, tc.class, id, agentkernel.ObjectCall{Method: "increment"}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkWake: a hibernated object answers a call (wake = start the
// sandbox, start the server, inject storage, forward the call).
func BenchmarkWake(b *testing.B) {
	ctx := context.Background()
	_, c := benchDaemon(b, nil)
	if _, err := c.Objects.Call(ctx, "counter", "w", agentkernel.ObjectCall{Method: "increment"}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := c.Objects.Hibernate(ctx, "counter", "w"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := c.Objects.Call(ctx, "counter", "w", agentkernel.ObjectCall{Method: "get"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	report(b, lat)
}

// BenchmarkHibernate10MB: hibernation of an object holding 10 MB (20 keys
// of 512 KiB): dump, one transaction, sandbox stop.
func BenchmarkHibernate10MB(b *testing.B) {
	ctx := context.Background()
	_, c := benchDaemon(b, nil)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := c.Objects.Call(ctx, "counter", "big", agentkernel.ObjectCall{Method: "fill", Args: map[string]any{"keys": 20, "bytes": 512 << 10}}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		o, err := c.Objects.Hibernate(ctx, "counter", "big")
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if o.StorageBytes < 10<<20 {
			b.Fatalf("stored %d bytes", o.StorageBytes)
		}
	}
	report(b, lat)
}

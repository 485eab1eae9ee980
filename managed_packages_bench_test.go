package agentkernel_test

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// BenchmarkEnvironmentPackages measures an environment's package build (a
// pip wheel and an npm tarball from local indexes on 127.0.0.1, through
// the real daemon: build sandbox, egress proxy, layer) against the same
// two installs run by hand on the host, and the wake latency (cold →
// first exec answered) of a sandbox that starts from the built layer
// against one on the base image.
//
//	go test -run '^$' -bench EnvironmentPackages -benchtime 1x .
func BenchmarkEnvironmentPackages(b *testing.B) {
	ctx := context.Background()
	name, wheel := makeWheel(b, "akdemo", "1.0", "hello")
	idx := httptest.NewServer(&pipIndex{wheels: map[string][]byte{"akdemo": wheel}, names: map[string]string{"akdemo": name}, gets: map[string]int{}})
	b.Cleanup(idx.Close)
	npm := npmRegistry(b, "akdemo-js", "1.0.0", makeNpmTarball(b, "akdemo-js", "1.0.0", "hello"))
	d := daemontest.Start(b, func(c *config.Config) {
		c.Packages.PipIndexURL = idx.URL + "/simple"
		c.Packages.NpmRegistry = npm.URL + "/"
	})
	c := sdkClient(d, d.AdminKey)
	for b.Loop() {
		// By hand: the same installs on the host.
		dir := b.TempDir()
		start := time.Now()
		for _, argv := range [][]string{
			{"python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--target", dir + "/python", "--index-url", idx.URL + "/simple", "--trusted-host", idx.Listener.Addr().String(), "akdemo"},
			{"npm", "install", "--prefix", dir + "/node", "--no-audit", "--no-fund", "--registry", npm.URL + "/", "--cache", dir + "/cache", "akdemo-js@1.0.0"},
		} {
			if out, err := exec.Command("/usr/bin/"+argv[0], argv[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", argv, err, out)
			}
		}
		byHand := time.Since(start)

		// The environment's build, create to ready.
		start = time.Now()
		env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bench",
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
				Packages: anthropic.BetaPackagesParams{Pip: []string{"akdemo"}, Npm: []string{"akdemo-js@1.0.0"}}}}})
		if err != nil {
			b.Fatal(err)
		}
		row, err := d.Store().GetEnvironment(ctx, env.ID)
		if err != nil {
			b.Fatal(err)
		}
		layer, err := d.Packages().Layer(ctx, row, "", "")
		if err != nil {
			b.Fatal(err)
		}
		build := time.Since(start)
		b.ReportMetric(ms(build), "build-ms")
		b.ReportMetric(ms(byHand), "by-hand-ms")

		// Wake: the base image against the layer, interleaved.
		mgr := d.Sandboxes()
		if layer[packages.MetaLayer] == "" {
			b.Fatal("no layer")
		}
		newSandbox := func(meta map[string]string) string {
			in, err := mgr.Create(ctx, sandbox.CreateParams{TenantID: row.TenantID, Metadata: meta})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { mgr.Destroy(context.Background(), row.TenantID, in.ID) })
			return in.ID
		}
		ids := []string{newSandbox(nil), newSandbox(layer)}
		ds := [2][]time.Duration{}
		for range 30 {
			for i, id := range ids {
				if _, err := mgr.Hibernate(ctx, row.TenantID, id); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				res, err := mgr.Exec(ctx, row.TenantID, id, guest.ExecRequest{Argv: []string{"true"}}, nil)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v %v", res, err)
				}
				ds[i] = append(ds[i], time.Since(start))
			}
		}
		p50 := func(d []time.Duration) time.Duration {
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			return d[len(d)/2]
		}
		base, withLayer := p50(ds[0]), p50(ds[1])
		b.ReportMetric(ms(base), "wake-base-p50-ms")
		b.ReportMetric(ms(withLayer), "wake-layer-p50-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package egress

import (
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkHTTPS measures one HTTPS POST with a 1 KB body directly,
// through a CONNECT tunnel, and through TLS interception with a
// placeholder substituted in the header and the body. The three are
// interleaved in one run (one request of each per iteration) so the
// ratios compare like with like on a busy machine; p50/p99 per path and
// the ratios to direct are reported as metrics.
//
//	go test -run '^$' -bench BenchmarkHTTPS -benchtime 2000x ./internal/egress/
func BenchmarkHTTPS(b *testing.B) {
	for _, keepAlive := range []bool{false, true} {
		name := "new-conn"
		if keepAlive {
			name = "keep-alive"
		}
		b.Run(name, func(b *testing.B) { benchHTTPS(b, keepAlive) })
	}
}

func benchHTTPS(b *testing.B, keepAlive bool) {
	tunnelled, intercepted := newUpstream(b, true), newUpstream(b, true)
	th, tp := tunnelled.hostPort(b)
	ih, ip := intercepted.hostPort(b)
	credHost := allow(b, ih+":"+strconv.Itoa(ip))
	pol := &Policy{Allow: allow(b, th+":"+strconv.Itoa(tp), ih+":"+strconv.Itoa(ip)), Credentials: []Credential{cred(credHost)}}
	e := startProxy(b, fixed(pol), pool(intercepted.Certificate()), func(c *Config) { c.Log = slog.New(slog.DiscardHandler) })
	ph := Placeholder("vcrd_api")
	body := strings.Repeat("b", 1024-len(ph)) + ph

	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: tunnelled.Client().Transport.(*http.Transport).TLSClientConfig, DisableKeepAlives: !keepAlive}}
	b.Cleanup(direct.CloseIdleConnections)
	paths := []struct {
		name string
		c    *http.Client
		url  string
	}{
		{"direct", direct, tunnelled.URL},
		{"connect", e.client(b, pool(tunnelled.Certificate()), keepAlive), tunnelled.URL},
		{"substitute", e.client(b, caPool(b, e), keepAlive), intercepted.URL},
	}
	lat := make([][]time.Duration, len(paths))
	do := func(c *http.Client, url string) time.Duration {
		req, _ := http.NewRequest("POST", url+"/bench", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ph)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %s", url, resp.Status)
		}
		return d
	}
	for _, p := range paths { // warm up: leaf cache, upstream pools
		do(p.c, p.url)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, p := range paths {
			lat[j] = append(lat[j], do(p.c, p.url))
		}
	}
	b.StopTimer()
	if got := intercepted.last(b).Auth; got != "Bearer "+secret {
		b.Fatalf("the intercepted upstream saw %q", got)
	}
	q := func(ds []time.Duration, f float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[int(f*float64(len(s)-1))].Microseconds())
	}
	for j, p := range paths {
		b.ReportMetric(q(lat[j], 0.50), p.name+"-p50-µs")
		b.ReportMetric(q(lat[j], 0.99), p.name+"-p99-µs")
		if j > 0 {
			b.ReportMetric(q(lat[j], 0.50)/q(lat[0], 0.50), p.name+"/direct-p50")
			b.ReportMetric(q(lat[j], 0.99)/q(lat[0], 0.99), p.name+"/direct-p99")
		}
	}
	b.ReportMetric(0, "ns/op")
}

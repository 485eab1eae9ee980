package sandbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/store"
)

type metrics struct {
	warmup           *prometheus.HistogramVec
	restore          *prometheus.HistogramVec
	snapshotDuration *prometheus.HistogramVec
	snapshotBytes    *prometheus.CounterVec
	hibernations     *prometheus.CounterVec
	poolAssign       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, m *Manager) *metrics {
	buckets := prometheus.ExponentialBuckets(0.002, 2, 15)
	mt := &metrics{
		warmup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentkernel_sandbox_warmup_duration_seconds", Help: "Time from cold (or recycled) to active.", Buckets: buckets,
		}, []string{"driver"}),
		restore: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentkernel_sandbox_restore_duration_seconds", Help: "Time to restore a workspace backup.", Buckets: buckets,
		}, []string{"driver"}),
		snapshotDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentkernel_sandbox_snapshot_duration_seconds", Help: "Time to write and verify a workspace snapshot.", Buckets: buckets,
		}, []string{"driver"}),
		snapshotBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_sandbox_snapshot_bytes_total", Help: "Compressed bytes of verified workspace snapshots.",
		}, []string{"driver"}),
		hibernations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_sandbox_hibernations_total", Help: "Sandboxes stopped after a verified snapshot, by reason.",
		}, []string{"driver", "reason"}),
	}
	mt.poolAssign = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentkernel_sandbox_pool_starts_total",
		Help: "Instance starts by how they began: assigned from the warm pool, fresh because the pool was empty (pool_empty) or the assignment failed (assign_failed, logged), or fresh because its driver does not pool (not_pooled: docker).",
	}, []string{"driver", "result"})
	poolReady := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentkernel_sandbox_pool_ready",
		Help: "Pooled sandboxes started and waiting for a wake, all shapes together.",
	}, func() float64 { _, ready := m.PoolStats(); return float64(ready) })
	reg.MustRegister(mt.warmup, mt.restore, mt.snapshotDuration, mt.snapshotBytes, mt.hibernations, mt.poolAssign, poolReady, &stateCollector{m: m})
	return mt
}

// stateCollector reports sandboxes by derived state and driver at scrape
// time, from the store: state is derived, so it is counted, not tracked.
type stateCollector struct{ m *Manager }

var stateDesc = prometheus.NewDesc("agentkernel_sandboxes", "Sandboxes by lifecycle state and driver.", []string{"state", "driver"}, nil)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stateDesc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := map[[2]string]int{}
	for d := range c.m.cfg.Drivers {
		for _, s := range States {
			if s != StateDestroyed {
				counts[[2]string{string(s), d}] = 0
			}
		}
	}
	// Page by page: a scrape holds one page of rows, not every sandbox
	// (each hibernated object keeps a cold one).
	p := store.ListSandboxesParams{Limit: 500}
	for {
		sbs, err := c.m.cfg.Store.ListSandboxes(ctx, p)
		if err != nil {
			return
		}
		for _, sb := range sbs {
			counts[[2]string{string(Derive(sb)), sb.Driver}]++
		}
		if len(sbs) < p.Limit {
			break
		}
		p.AfterID = sbs[len(sbs)-1].ID
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}

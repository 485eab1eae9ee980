package blobgc

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	runs         prometheus.Counter
	errors       prometheus.Counter
	deleted      *prometheus.CounterVec
	deletedBytes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentkernel_blob_gc_runs_total", Help: "Blob garbage collection passes finished.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentkernel_blob_gc_errors_total", Help: "Errors of blob garbage collection passes (the pass goes on).",
		}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_blob_gc_deleted_total", Help: "Unreferenced blobs (kind=blob) and temp files of dead writes (kind=temp) deleted.",
		}, []string{"kind"}),
		deletedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_blob_gc_deleted_bytes_total", Help: "Bytes freed by the blob garbage collector, by kind (blob, temp).",
		}, []string{"kind"}),
	}
	for _, kind := range []string{"blob", "temp"} {
		m.deleted.WithLabelValues(kind)
		m.deletedBytes.WithLabelValues(kind)
	}
	for _, c := range []prometheus.Collector{m.runs, m.errors, m.deleted, m.deletedBytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

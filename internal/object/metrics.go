package object

import "github.com/prometheus/client_golang/prometheus"

// metrics are seed 002's, by name.
type metrics struct {
	active       *prometheus.GaugeVec
	calls        *prometheus.CounterVec
	hibernations *prometheus.CounterVec
	wake         *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentkernel_objects_active", Help: "Durable objects Active on this node, by class.",
		}, []string{"class"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_object_calls_total", Help: "Method calls delivered to durable objects.",
		}, []string{"class", "method"}),
		hibernations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_object_hibernations_total", Help: "Durable object hibernations.",
		}, []string{"class"}),
		wake: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentkernel_object_wake_duration_seconds", Help: "Time from a call to a Hibernating object to its server holding the storage.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"class"}),
	}
	reg.MustRegister(m.active, m.calls, m.hibernations, m.wake)
	return m
}

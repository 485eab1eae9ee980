package egress

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	decisions *prometheus.CounterVec
	active    *prometheus.GaugeVec
	bytes     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_egress_decisions_total", Help: "Egress proxy decisions by verdict (allowed, refused, injected).",
		}, []string{"verdict"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentkernel_egress_active_connections", Help: "Open sandbox connections through the egress proxy: CONNECT tunnels passed untouched (tunnel) and intercepted for credential substitution (intercepted).",
		}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentkernel_egress_tunnel_bytes_total", Help: "Bytes through untouched CONNECT tunnels, out of (out) and into (in) sandboxes.",
		}, []string{"direction"}),
	}
	for _, v := range []string{VerdictAllowed, VerdictRefused, VerdictInjected} {
		m.decisions.WithLabelValues(v)
	}
	for _, k := range []string{"tunnel", "intercepted"} {
		m.active.WithLabelValues(k)
	}
	for _, d := range []string{"out", "in"} {
		m.bytes.WithLabelValues(d)
	}
	for _, c := range []prometheus.Collector{m.decisions, m.active, m.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
)

// egressAuditQueue bounds the decisions waiting for the audit writer.
const egressAuditQueue = 8192

// egressAudit writes the egress proxy's decisions to the tenant's audit
// log (GET /v1/audit?subject=<session id>), off the proxy's path: a
// bounded queue drained by one writer. A decision that finds the queue
// full is counted (agentkernel_egress_audit_dropped_total) and logged
// rather than stalling the sandbox's connection. Records hold the host,
// port, verdict, reason and credential ids, never a secret value.
type egressAudit struct {
	st      egressAuditStore
	log     *slog.Logger
	q       chan egress.Decision
	dropped prometheus.Counter

	stopOnce sync.Once
	done     chan struct{}
}

// egressAuditStore is what the audit writer needs of the store.
type egressAuditStore interface {
	AppendAudit(ctx context.Context, r *store.AuditRecord) error
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

func newEgressAudit(st egressAuditStore, reg prometheus.Registerer, log *slog.Logger) *egressAudit {
	a := &egressAudit{st: st, log: log, q: make(chan egress.Decision, egressAuditQueue), done: make(chan struct{}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentkernel_egress_audit_dropped_total",
			Help: "Egress decisions not written to the audit log because its queue was full.",
		})}
	reg.MustRegister(a.dropped)
	return a
}

// Record implements egress.Auditor.
func (a *egressAudit) Record(d egress.Decision) {
	select {
	case a.q <- d:
	default:
		a.dropped.Inc()
		a.log.Warn("egress audit queue full; decision not recorded", "session", d.SessionID, "sandbox", d.SandboxID, "host", d.Host, "verdict", d.Verdict)
	}
}

// Start implements Service.
func (a *egressAudit) Start(context.Context) error {
	go a.run()
	return nil
}

// Stop implements Service: it writes what is queued, then returns.
func (a *egressAudit) Stop() {
	a.stopOnce.Do(func() { close(a.q) })
	<-a.done
}

func (a *egressAudit) run() {
	defer close(a.done)
	for d := range a.q {
		if d.TenantID == "" && d.SandboxID != "" {
			// Refused before a policy named the tenant (a sandbox of no
			// session): the record goes to the sandbox's tenant.
			if sb, err := a.st.GetSandbox(context.Background(), d.SandboxID); err == nil {
				d.TenantID = sb.TenantID
			}
		}
		if err := a.st.AppendAudit(context.Background(), auditRecord(d)); err != nil {
			a.log.Warn("egress audit write failed", "session", d.SessionID, "host", d.Host, "err", err)
		}
	}
}

// auditRecord is a decision as an audit record: kind egress.<verdict>,
// about the session (or the sandbox, for one that belongs to none).
func auditRecord(d egress.Decision) *store.AuditRecord {
	subject := d.SessionID
	if subject == "" {
		subject = d.SandboxID
	}
	data, _ := json.Marshal(map[string]any{
		"sandbox_id": d.SandboxID, "session_id": d.SessionID, "method": d.Method,
		"host": d.Host, "port": d.Port, "verdict": d.Verdict, "reason": d.Reason, "credential_ids": d.Creds,
	})
	return &store.AuditRecord{TenantID: d.TenantID, Kind: "egress." + d.Verdict, Subject: subject, Data: data, At: d.At}
}

package object

import (
	"context"
	"encoding/json"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// audit appends an audit record about an object. A failed append is
// logged, not returned: the transition it records has already happened.
func (r *Runtime) audit(ctx context.Context, key store.ObjectKey, kind string, data map[string]any) {
	b, _ := json.Marshal(data)
	rec := &store.AuditRecord{ID: ids.New("aud"), TenantID: key.TenantID, Kind: kind, Subject: subject(key), Data: b, At: r.clock.Now()}
	if err := r.st.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		r.log.WarnContext(ctx, "object: audit append failed", "kind", kind, "object", subject(key), "err", err)
	}
}

// Audit lists a tenant's audit records, oldest first.
func (r *Runtime) Audit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditRecord, error) {
	if p.Limit <= 0 || p.Limit > 1000 {
		p.Limit = 1000
	}
	return r.st.ListAudit(ctx, p)
}

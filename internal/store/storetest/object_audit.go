package storetest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

var objAuditCases = []objCase{
	{"AppendAndList", testAuditAppendList},
	{"Pages", testAuditPages},
}

func (e *objEnv) audit(p store.ListAuditParams) []*store.AuditRecord {
	e.t.Helper()
	rs, err := e.s.ListAudit(e.ctx, p)
	mustOK(e.t, err, fmt.Sprintf("ListAudit(%+v)", p))
	return rs
}

func auditIDs(rs []*store.AuditRecord) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testAuditAppendList(e *objEnv) {
	r := store.AuditRecord{TenantID: "tnt_a", Kind: "ObjectCreated", Subject: "counter/user-1",
		Data: json.RawMessage(`{"sandbox":"sbx_1"}`)}
	mustOK(e.t, e.s.AppendAudit(e.ctx, &r), "AppendAudit")
	if !strings.HasPrefix(r.ID, "aud_") || r.At.IsZero() {
		e.t.Fatalf("AppendAudit filled ID %q and At %v: want an aud_ id and a time", r.ID, r.At)
	}
	given := store.AuditRecord{ID: "aud_zzzz", TenantID: "tnt_a", Kind: "AlarmFailed", Subject: "counter/user-1", At: objAt(0)}
	mustOK(e.t, e.s.AppendAudit(e.ctx, &given), "AppendAudit with id and time")
	mustOK(e.t, e.s.AppendAudit(e.ctx, &store.AuditRecord{TenantID: "tnt_b", Kind: "ObjectCreated"}), "AppendAudit tenant b")
	mustErrIs(e.t, e.s.AppendAudit(e.ctx, &store.AuditRecord{ID: "aud_zzzz", TenantID: "tnt_a", Kind: "X"}),
		store.ErrAlreadyExists, "AppendAudit with a taken id")
	mustErrIs(e.t, e.s.AppendAudit(e.ctx, &store.AuditRecord{TenantID: "tnt_a"}), store.ErrInvalid, "AppendAudit without a kind")
	mustErrIs(e.t, e.s.AppendAudit(e.ctx, &store.AuditRecord{TenantID: "tnt_a", Kind: "X", Data: json.RawMessage(`{`)}),
		store.ErrInvalid, "AppendAudit with bad data")

	all := e.audit(store.ListAuditParams{TenantID: "tnt_a"})
	objSameList(e.t, "tenant a, oldest first", auditIDs(all), r.ID, "aud_zzzz")
	got := all[0]
	equal(e.t, "TenantID", got.TenantID, "tnt_a")
	equal(e.t, "Kind", got.Kind, "ObjectCreated")
	equal(e.t, "Subject", got.Subject, "counter/user-1")
	jsonEq(e.t, "Data", got.Data, `{"sandbox":"sbx_1"}`)
	objSameTime(e.t, "At", got.At, r.At)
	objSameTime(e.t, "given At", all[1].At, objAt(0))
	if all[1].Data != nil {
		e.t.Fatalf("record without data read back %s", all[1].Data)
	}
	objSameList(e.t, "tenant a, AlarmFailed", auditIDs(e.audit(store.ListAuditParams{TenantID: "tnt_a", Kind: "AlarmFailed"})), "aud_zzzz")
	other := store.AuditRecord{TenantID: "tnt_a", Kind: "AlarmFailed", Subject: "counter/user-2"}
	mustOK(e.t, e.s.AppendAudit(e.ctx, &other), "AppendAudit another subject")
	objSameList(e.t, "tenant a, subject counter/user-1", auditIDs(e.audit(store.ListAuditParams{TenantID: "tnt_a", Subject: "counter/user-1"})), r.ID, "aud_zzzz")
	objSameList(e.t, "tenant a, AlarmFailed about counter/user-2", auditIDs(e.audit(store.ListAuditParams{TenantID: "tnt_a", Kind: "AlarmFailed", Subject: "counter/user-2"})), other.ID)
	equal(e.t, "tenant b, subject counter/user-1", len(e.audit(store.ListAuditParams{TenantID: "tnt_b", Subject: "counter/user-1"})), 0)
	equal(e.t, "tenant b records", len(e.audit(store.ListAuditParams{TenantID: "tnt_b"})), 1)
	equal(e.t, "unknown tenant records", len(e.audit(store.ListAuditParams{TenantID: "tnt_c"})), 0)
}

func testAuditPages(e *objEnv) {
	var want []string
	for i := range 7 {
		r := store.AuditRecord{TenantID: "tnt_a", Kind: "ObjectHibernated", Subject: fmt.Sprintf("counter/%d", i)}
		if i%3 == 0 {
			r.Kind = "ObjectWoken"
		}
		mustOK(e.t, e.s.AppendAudit(e.ctx, &r), "AppendAudit")
		if r.Kind == "ObjectHibernated" {
			want = append(want, r.ID)
		}
		mustOK(e.t, e.s.AppendAudit(e.ctx, &store.AuditRecord{TenantID: "tnt_b", Kind: r.Kind}), "AppendAudit tenant b")
	}
	var paged []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 7 {
			e.t.Fatalf("paging did not end: %v", paged)
		}
		page := e.audit(store.ListAuditParams{TenantID: "tnt_a", Kind: "ObjectHibernated", AfterID: after, Limit: 2})
		if len(page) > 2 {
			e.t.Fatalf("page of %d with Limit 2", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, auditIDs(page)...)
		after = page[len(page)-1].ID
	}
	objSameList(e.t, "paged ObjectHibernated", paged, want...)
}

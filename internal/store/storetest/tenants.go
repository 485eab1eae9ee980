package storetest

import (
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var tenantCases = []testCase{
	{"Tenants", testTenants},
	{"APIKeys", testAPIKeys},
	{"EnvironmentKeys", testEnvironmentKeys},
}

// Each subtest's env already created one tenant; these tests count from it.

func testTenants(e *env) {
	acme, err := e.s.CreateTenant(e.ctx, store.Tenant{ID: "tnt_acme", Name: "acme"})
	mustOK(e.t, err, "CreateTenant")
	if acme.ID != "tnt_acme" || acme.Name != "acme" || acme.CreatedAt.IsZero() {
		e.t.Fatalf("created tenant: %+v", acme)
	}
	gen, err := e.s.CreateTenant(e.ctx, store.Tenant{Name: "generated"})
	mustOK(e.t, err, "CreateTenant without id")
	if gen.ID == "" {
		e.t.Fatal("CreateTenant did not generate an id")
	}

	got, err := e.s.GetTenant(e.ctx, "tnt_acme")
	mustOK(e.t, err, "GetTenant")
	equal(e.t, "GetTenant name", got.Name, "acme")
	if !got.CreatedAt.Equal(acme.CreatedAt) {
		e.t.Fatalf("CreatedAt: create said %v, get says %v", acme.CreatedAt, got.CreatedAt)
	}
	got, err = e.s.GetTenantByName(e.ctx, "generated")
	mustOK(e.t, err, "GetTenantByName")
	equal(e.t, "GetTenantByName id", got.ID, gen.ID)

	list, err := e.s.ListTenants(e.ctx)
	mustOK(e.t, err, "ListTenants")
	equal(e.t, "tenants", len(list), 3)
	seen := map[string]bool{}
	for _, tn := range list {
		seen[tn.ID] = true
	}
	if !seen[e.tenant] || !seen["tnt_acme"] || !seen[gen.ID] {
		e.t.Fatalf("ListTenants: %v", list)
	}

	_, err = e.s.CreateTenant(e.ctx, store.Tenant{ID: "tnt_other", Name: "acme"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateTenant with a taken name")
	_, err = e.s.CreateTenant(e.ctx, store.Tenant{ID: "tnt_acme", Name: "acme2"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateTenant with a taken id")
	_, err = e.s.CreateTenant(e.ctx, store.Tenant{Name: ""})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateTenant without a name")
	_, err = e.s.GetTenant(e.ctx, "tnt_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetTenant(unknown)")
	_, err = e.s.GetTenantByName(e.ctx, "nobody")
	mustErrIs(e.t, err, store.ErrNotFound, "GetTenantByName(unknown)")
}

func testAPIKeys(e *env) {
	t2, err := e.s.CreateTenant(e.ctx, store.Tenant{Name: "second"})
	mustOK(e.t, err, "CreateTenant")
	n, err := e.s.CountAdminKeys(e.ctx)
	mustOK(e.t, err, "CountAdminKeys")
	equal(e.t, "admin keys at start", n, 0)

	admin, err := e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: e.tenant, Name: "bootstrap",
		Prefix: "ak_adm", Hash: "hash-admin", Admin: true})
	mustOK(e.t, err, "CreateAPIKey(admin)")
	if admin.ID == "" || !admin.Admin || admin.RevokedAt != nil || admin.CreatedAt.IsZero() || admin.Prefix != "ak_adm" {
		e.t.Fatalf("admin key: %+v", admin)
	}
	user, err := e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{ID: "key_user", TenantID: e.tenant, Name: "ci",
		Prefix: "ak_usr", Hash: "hash-user"})
	mustOK(e.t, err, "CreateAPIKey(user)")
	_, err = e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: t2.ID, Name: "t2 admin", Hash: "hash-t2", Admin: true})
	mustOK(e.t, err, "CreateAPIKey(second tenant)")

	got, err := e.s.GetAPIKeyByHash(e.ctx, "hash-user")
	mustOK(e.t, err, "GetAPIKeyByHash")
	if got.ID != "key_user" || got.TenantID != e.tenant || got.Name != "ci" || got.Admin {
		e.t.Fatalf("key by hash: %+v", got)
	}
	got, err = e.s.GetAPIKey(e.ctx, admin.ID)
	mustOK(e.t, err, "GetAPIKey")
	equal(e.t, "GetAPIKey hash", got.Hash, "hash-admin")

	mine, err := e.s.ListAPIKeys(e.ctx, e.tenant)
	mustOK(e.t, err, "ListAPIKeys(tenant)")
	if len(mine) != 2 || mine[0].ID != admin.ID || mine[1].ID != user.ID {
		e.t.Fatalf("tenant keys: %+v", mine)
	}
	all, err := e.s.ListAPIKeys(e.ctx, "")
	mustOK(e.t, err, "ListAPIKeys(all)")
	equal(e.t, "all keys", len(all), 3)
	n, _ = e.s.CountAdminKeys(e.ctx)
	equal(e.t, "admin keys", n, 2)

	at := time.Now().Truncate(time.Millisecond).UTC()
	mustOK(e.t, e.s.RevokeAPIKey(e.ctx, admin.ID, at), "RevokeAPIKey")
	mustOK(e.t, e.s.RevokeAPIKey(e.ctx, admin.ID, at.Add(time.Hour)), "RevokeAPIKey twice")
	got, err = e.s.GetAPIKeyByHash(e.ctx, "hash-admin")
	mustOK(e.t, err, "GetAPIKeyByHash(revoked)")
	if got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
		e.t.Fatalf("RevokedAt: got %v, want the first revocation %v", got.RevokedAt, at)
	}
	n, _ = e.s.CountAdminKeys(e.ctx)
	equal(e.t, "admin keys after revoking one", n, 1)

	_, err = e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: e.tenant, Name: "dup", Hash: "hash-user"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateAPIKey with a taken hash")
	_, err = e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{ID: "key_user", TenantID: e.tenant, Hash: "hash-new"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateAPIKey with a taken id")
	_, err = e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: "tnt_missing", Name: "x", Hash: "hash-x"})
	mustErrIs(e.t, err, store.ErrNotFound, "CreateAPIKey(unknown tenant)")
	_, err = e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: e.tenant, Name: "x"})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateAPIKey without hash")
	_, err = e.s.GetAPIKeyByHash(e.ctx, "hash-missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetAPIKeyByHash(unknown)")
	_, err = e.s.GetAPIKey(e.ctx, "key_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetAPIKey(unknown)")
	mustErrIs(e.t, e.s.RevokeAPIKey(e.ctx, "key_missing", at), store.ErrNotFound, "RevokeAPIKey(unknown)")
}

// An environment key (issue 16) keeps its environment through create, both
// lookups and the listing; a tenant key's is "".
func testEnvironmentKeys(e *env) {
	envKey, err := e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: e.tenant, Name: "worker",
		Prefix: "ak_env", Hash: "hash-env", EnvironmentID: "env_worker"})
	mustOK(e.t, err, "CreateAPIKey(environment)")
	equal(e.t, "created key's EnvironmentID", envKey.EnvironmentID, "env_worker")
	tenantKey, err := e.s.CreateAPIKey(e.ctx, store.CreateAPIKeyParams{TenantID: e.tenant, Name: "ci", Hash: "hash-tenant"})
	mustOK(e.t, err, "CreateAPIKey(tenant)")
	equal(e.t, "tenant key's EnvironmentID", tenantKey.EnvironmentID, "")

	got, err := e.s.GetAPIKey(e.ctx, envKey.ID)
	mustOK(e.t, err, "GetAPIKey")
	equal(e.t, "GetAPIKey EnvironmentID", got.EnvironmentID, "env_worker")
	got, err = e.s.GetAPIKeyByHash(e.ctx, "hash-env")
	mustOK(e.t, err, "GetAPIKeyByHash")
	equal(e.t, "GetAPIKeyByHash EnvironmentID", got.EnvironmentID, "env_worker")
	list, err := e.s.ListAPIKeys(e.ctx, e.tenant)
	mustOK(e.t, err, "ListAPIKeys")
	equal(e.t, "keys", len(list), 2)
	equal(e.t, "listed environment key", list[0].EnvironmentID, "env_worker")
	equal(e.t, "listed tenant key", list[1].EnvironmentID, "")
}

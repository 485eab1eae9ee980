package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseVaults runs the VaultStore contract (vaults and their
// credentials). newStore must return a fresh, empty store for each call
// and arrange its Close with t.Cleanup.
func ExerciseVaults(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.VaultStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(e *vtEnv)
	}{
		{"VaultCRUD", testVaultCRUD},
		{"VaultList", testVaultList},
		{"VaultArchiveArchivesCredentials", testVaultArchive},
		{"VaultDeleteCascades", testVaultDelete},
		{"CredentialCRUD", testCredentialCRUD},
		{"CredentialVersionGuardsWrites", testCredentialVersions},
		{"CredentialList", testCredentialList},
		{"CredentialsInVaults", testCredentialsIn},
		{"Rekey", testCredentialRekey},
		{"RekeyRacesUpdate", testCredentialRekeyRace},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(&vtEnv{ctx: ctx, t: t, s: newStore(t)})
		})
	}
}

type vtEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.VaultStore
}

func (e *vtEnv) vault(v store.Vault) *store.Vault {
	e.t.Helper()
	if v.TenantID == "" {
		v.TenantID = mgTenant
	}
	out, err := e.s.CreateVault(e.ctx, &v)
	mustOK(e.t, err, fmt.Sprintf("CreateVault(%q)", v.ID))
	return out
}

func (e *vtEnv) cred(c store.VaultCredential) *store.VaultCredential {
	e.t.Helper()
	if c.TenantID == "" {
		c.TenantID = mgTenant
	}
	if c.Kind == "" {
		c.Kind = "static_bearer"
	}
	if c.KeyID == "" {
		c.KeyID = "k1"
	}
	if c.Secret == nil {
		c.Secret = []byte("sealed:" + c.ID)
	}
	out, err := e.s.CreateVaultCredential(e.ctx, &c)
	mustOK(e.t, err, fmt.Sprintf("CreateVaultCredential(%q)", c.ID))
	return out
}

func vaultID(v *store.Vault) string                { return v.ID }
func credentialID(c *store.VaultCredential) string { return c.ID }

func testVaultCRUD(e *vtEnv) {
	created := e.vault(store.Vault{ID: "vlt_1", Doc: json.RawMessage(`{"display_name":"a","metadata":{"k":"v"}}`),
		CreatedAt: sbAt(0), UpdatedAt: sbAt(time.Second)})
	got, err := e.s.GetVault(e.ctx, "vlt_1")
	mustOK(e.t, err, "GetVault")
	for what, v := range map[string]*store.Vault{"created": created, "read": got} {
		equal(e.t, what+" TenantID", v.TenantID, mgTenant)
		jsonEq(e.t, what+" Doc", v.Doc, `{"display_name":"a","metadata":{"k":"v"}}`)
		sbSameTime(e.t, what+" CreatedAt", v.CreatedAt, sbAt(0))
		sbSameTime(e.t, what+" UpdatedAt", v.UpdatedAt, sbAt(time.Second))
		sbSameTimePtr(e.t, what+" ArchivedAt", v.ArchivedAt, nil)
	}
	up, err := e.s.UpdateVault(e.ctx, "vlt_1", json.RawMessage(`{"display_name":"b"}`))
	mustOK(e.t, err, "UpdateVault")
	jsonEq(e.t, "updated Doc", up.Doc, `{"display_name":"b"}`)
	if up.UpdatedAt.Equal(sbAt(time.Second)) {
		e.t.Fatalf("UpdateVault left UpdatedAt at %v", up.UpdatedAt)
	}
	_, err = e.s.CreateVault(e.ctx, &store.Vault{ID: "vlt_1", TenantID: mgTenant})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateVault with a taken id")
	_, err = e.s.UpdateVault(e.ctx, "vlt_1", json.RawMessage(`[]`))
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateVault with a non-object Doc")
	_, err = e.s.GetVault(e.ctx, "vlt_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetVault of an unknown vault")
	_, err = e.s.UpdateVault(e.ctx, "vlt_missing", json.RawMessage(`{}`))
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateVault of an unknown vault")
	gen := e.vault(store.Vault{})
	mgHasPrefix(e.t, "CreateVault", gen.ID, "vlt")
	jsonEq(e.t, "empty Doc", gen.Doc, `{}`)
}

func testVaultList(e *vtEnv) {
	for i := range 4 {
		e.vault(store.Vault{ID: fmt.Sprintf("vlt_%d", i)})
	}
	e.vault(store.Vault{ID: "vlt_other", TenantID: mgOtherTenant})
	_, err := e.s.ArchiveVault(e.ctx, "vlt_2", sbAt(0))
	mustOK(e.t, err, "ArchiveVault")
	list := func(p store.ListResourcesParams) []string {
		if p.TenantID == "" {
			p.TenantID = mgTenant
		}
		l, err := e.s.ListVaults(e.ctx, p)
		return mgIDs(e.t, fmt.Sprintf("ListVaults(%+v)", p), l, err, vaultID)
	}
	mgEqualIDs(e.t, "all", list(store.ListResourcesParams{}), "vlt_0", "vlt_1", "vlt_3")
	mgEqualIDs(e.t, "IncludeArchived", list(store.ListResourcesParams{IncludeArchived: true}), "vlt_0", "vlt_1", "vlt_2", "vlt_3")
	mgEqualIDs(e.t, "other tenant", list(store.ListResourcesParams{TenantID: mgOtherTenant}), "vlt_other")
	mgEqualIDs(e.t, "AfterID Limit", list(store.ListResourcesParams{AfterID: "vlt_0", Limit: 1}), "vlt_1")
	mgEqualIDs(e.t, "Descending BeforeID", list(store.ListResourcesParams{Descending: true, BeforeID: "vlt_3", IncludeArchived: true}), "vlt_2", "vlt_1", "vlt_0")
}

func testVaultArchive(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_a"})
	e.cred(store.VaultCredential{ID: "vcrd_1", VaultID: "vlt_a"})
	early, err := e.s.ArchiveVaultCredential(e.ctx, "vcrd_1", sbAt(time.Minute))
	mustOK(e.t, err, "ArchiveVaultCredential")
	e.cred(store.VaultCredential{ID: "vcrd_2", VaultID: "vlt_a"})
	v, err := e.s.ArchiveVault(e.ctx, "vlt_a", sbAt(time.Hour))
	mustOK(e.t, err, "ArchiveVault")
	sbSameTimePtr(e.t, "vault ArchivedAt", v.ArchivedAt, sbAtPtr(time.Hour))
	again, err := e.s.ArchiveVault(e.ctx, "vlt_a", sbAt(2*time.Hour))
	mustOK(e.t, err, "ArchiveVault twice")
	sbSameTimePtr(e.t, "ArchivedAt after archiving twice", again.ArchivedAt, sbAtPtr(time.Hour))
	c1, err := e.s.GetVaultCredential(e.ctx, "vcrd_1")
	mustOK(e.t, err, "GetVaultCredential 1")
	sbSameTimePtr(e.t, "credential archived before keeps its time", c1.ArchivedAt, early.ArchivedAt)
	c2, err := e.s.GetVaultCredential(e.ctx, "vcrd_2")
	mustOK(e.t, err, "GetVaultCredential 2")
	sbSameTimePtr(e.t, "credential archived with its vault", c2.ArchivedAt, sbAtPtr(time.Hour))
	_, err = e.s.UpdateVault(e.ctx, "vlt_a", json.RawMessage(`{}`))
	mustErrIs(e.t, err, store.ErrConflict, "UpdateVault of an archived vault")
	_, err = e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{VaultID: "vlt_a", TenantID: mgTenant, Kind: "static_bearer", KeyID: "k1", Secret: []byte("x")})
	mustErrIs(e.t, err, store.ErrConflict, "CreateVaultCredential in an archived vault")
	_, err = e.s.ArchiveVault(e.ctx, "vlt_missing", sbAt(0))
	mustErrIs(e.t, err, store.ErrNotFound, "ArchiveVault of an unknown vault")
}

func testVaultDelete(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_del"})
	e.vault(store.Vault{ID: "vlt_keep"})
	e.cred(store.VaultCredential{ID: "vcrd_del", VaultID: "vlt_del"})
	e.cred(store.VaultCredential{ID: "vcrd_keep", VaultID: "vlt_keep"})
	mustOK(e.t, e.s.DeleteVault(e.ctx, "vlt_del"), "DeleteVault")
	_, err := e.s.GetVault(e.ctx, "vlt_del")
	mustErrIs(e.t, err, store.ErrNotFound, "GetVault after delete")
	_, err = e.s.GetVaultCredential(e.ctx, "vcrd_del")
	mustErrIs(e.t, err, store.ErrNotFound, "GetVaultCredential of a deleted vault's credential")
	mustErrIs(e.t, e.s.DeleteVault(e.ctx, "vlt_del"), store.ErrNotFound, "DeleteVault twice")
	_, err = e.s.GetVaultCredential(e.ctx, "vcrd_keep")
	mustOK(e.t, err, "GetVaultCredential of the other vault's credential")
	mustOK(e.t, e.s.DeleteVaultCredential(e.ctx, "vcrd_keep"), "DeleteVaultCredential")
	mustErrIs(e.t, e.s.DeleteVaultCredential(e.ctx, "vcrd_keep"), store.ErrNotFound, "DeleteVaultCredential twice")
}

func testCredentialCRUD(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_c"})
	_, err := e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{VaultID: "vlt_missing", TenantID: mgTenant, Kind: "static_bearer", KeyID: "k1", Secret: []byte("x")})
	mustErrIs(e.t, err, store.ErrNotFound, "CreateVaultCredential in an unknown vault")
	_, err = e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{VaultID: "vlt_c", TenantID: mgTenant, Kind: "static_bearer", KeyID: "k1"})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateVaultCredential without a secret")
	secret := []byte{0, 1, 2, 0xff, 'x'} // bytes, not text
	created := e.cred(store.VaultCredential{ID: "vcrd_c", VaultID: "vlt_c", Kind: "mcp_oauth",
		Doc: json.RawMessage(`{"auth":{"type":"mcp_oauth"}}`), Secret: secret, KeyID: "key_a", CreatedAt: sbAt(0)})
	got, err := e.s.GetVaultCredential(e.ctx, "vcrd_c")
	mustOK(e.t, err, "GetVaultCredential")
	for what, c := range map[string]*store.VaultCredential{"created": created, "read": got} {
		equal(e.t, what+" VaultID", c.VaultID, "vlt_c")
		equal(e.t, what+" TenantID", c.TenantID, mgTenant)
		equal(e.t, what+" Kind", c.Kind, "mcp_oauth")
		equal(e.t, what+" KeyID", c.KeyID, "key_a")
		equal(e.t, what+" Version", c.Version, int64(1))
		if !bytes.Equal(c.Secret, secret) {
			e.t.Fatalf("%s Secret = %x, want %x", what, c.Secret, secret)
		}
		jsonEq(e.t, what+" Doc", c.Doc, `{"auth":{"type":"mcp_oauth"}}`)
		sbSameTime(e.t, what+" CreatedAt", c.CreatedAt, sbAt(0))
	}
	mgHasPrefix(e.t, "CreateVaultCredential", e.cred(store.VaultCredential{VaultID: "vlt_c"}).ID, "vcrd")
	_, err = e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{ID: "vcrd_c", VaultID: "vlt_c", TenantID: mgTenant, Kind: "x", KeyID: "k", Secret: []byte("x")})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateVaultCredential with a taken id")

	got.Doc, got.Secret, got.KeyID = json.RawMessage(`{"auth":{"type":"mcp_oauth","x":1}}`), []byte("new"), "key_b"
	up, err := e.s.UpdateVaultCredential(e.ctx, got)
	mustOK(e.t, err, "UpdateVaultCredential")
	equal(e.t, "updated Version", up.Version, int64(2))
	equal(e.t, "updated KeyID", up.KeyID, "key_b")
	equal(e.t, "updated Secret", string(up.Secret), "new")
	jsonEq(e.t, "updated Doc", up.Doc, `{"auth":{"type":"mcp_oauth","x":1}}`)
	_, err = e.s.ArchiveVaultCredential(e.ctx, "vcrd_c", sbAt(time.Hour))
	mustOK(e.t, err, "ArchiveVaultCredential")
	_, err = e.s.UpdateVaultCredential(e.ctx, up)
	mustErrIs(e.t, err, store.ErrConflict, "UpdateVaultCredential of an archived credential")
	up.ID = "vcrd_missing"
	_, err = e.s.UpdateVaultCredential(e.ctx, up)
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateVaultCredential of an unknown credential")
	_, err = e.s.ArchiveVaultCredential(e.ctx, "vcrd_missing", sbAt(0))
	mustErrIs(e.t, err, store.ErrNotFound, "ArchiveVaultCredential of an unknown credential")
}

func testCredentialVersions(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_v"})
	c := e.cred(store.VaultCredential{ID: "vcrd_v", VaultID: "vlt_v"})
	first := *c
	first.Secret = []byte("first")
	_, err := e.s.UpdateVaultCredential(e.ctx, &first)
	mustOK(e.t, err, "UpdateVaultCredential at version 1")
	stale := *c
	stale.Secret = []byte("stale")
	_, err = e.s.UpdateVaultCredential(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateVaultCredential at a stale version")
	got, err := e.s.GetVaultCredential(e.ctx, "vcrd_v")
	mustOK(e.t, err, "GetVaultCredential")
	equal(e.t, "Secret after the refused write", string(got.Secret), "first")
}

func testCredentialList(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_l"})
	e.vault(store.Vault{ID: "vlt_m"})
	for i := range 4 {
		e.cred(store.VaultCredential{ID: fmt.Sprintf("vcrd_%d", i), VaultID: "vlt_l"})
	}
	e.cred(store.VaultCredential{ID: "vcrd_m", VaultID: "vlt_m"})
	_, err := e.s.ArchiveVaultCredential(e.ctx, "vcrd_2", sbAt(0))
	mustOK(e.t, err, "ArchiveVaultCredential")
	list := func(p store.ListResourcesParams) []string {
		if p.TenantID == "" {
			p.TenantID = mgTenant
		}
		if p.VaultID == "" {
			p.VaultID = "vlt_l"
		}
		l, err := e.s.ListVaultCredentials(e.ctx, p)
		return mgIDs(e.t, fmt.Sprintf("ListVaultCredentials(%+v)", p), l, err, credentialID)
	}
	mgEqualIDs(e.t, "all", list(store.ListResourcesParams{}), "vcrd_0", "vcrd_1", "vcrd_3")
	mgEqualIDs(e.t, "IncludeArchived", list(store.ListResourcesParams{IncludeArchived: true}), "vcrd_0", "vcrd_1", "vcrd_2", "vcrd_3")
	mgEqualIDs(e.t, "other vault", list(store.ListResourcesParams{VaultID: "vlt_m"}), "vcrd_m")
	mgEqualIDs(e.t, "other tenant", list(store.ListResourcesParams{TenantID: mgOtherTenant}))
	mgEqualIDs(e.t, "AfterID Limit", list(store.ListResourcesParams{AfterID: "vcrd_0", Limit: 1}), "vcrd_1")
	mgEqualIDs(e.t, "Descending", list(store.ListResourcesParams{Descending: true, Limit: 2}), "vcrd_3", "vcrd_1")
}

func testCredentialsIn(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_x"})
	e.vault(store.Vault{ID: "vlt_y"})
	e.vault(store.Vault{ID: "vlt_z", TenantID: mgOtherTenant})
	e.cred(store.VaultCredential{ID: "vcrd_x1", VaultID: "vlt_x"})
	e.cred(store.VaultCredential{ID: "vcrd_y1", VaultID: "vlt_y"})
	e.cred(store.VaultCredential{ID: "vcrd_x2", VaultID: "vlt_x"})
	e.cred(store.VaultCredential{ID: "vcrd_x3", VaultID: "vlt_x"})
	e.cred(store.VaultCredential{ID: "vcrd_z1", VaultID: "vlt_z", TenantID: mgOtherTenant})
	_, err := e.s.ArchiveVaultCredential(e.ctx, "vcrd_x3", sbAt(0))
	mustOK(e.t, err, "ArchiveVaultCredential")
	in := func(tenant string, vaults ...string) []string {
		l, err := e.s.ListVaultCredentialsIn(e.ctx, tenant, vaults)
		return mgIDs(e.t, fmt.Sprintf("ListVaultCredentialsIn(%v)", vaults), l, err, credentialID)
	}
	mgEqualIDs(e.t, "vault order as given", in(mgTenant, "vlt_y", "vlt_x"), "vcrd_y1", "vcrd_x1", "vcrd_x2")
	mgEqualIDs(e.t, "another tenant's vault", in(mgTenant, "vlt_z"))
	mgEqualIDs(e.t, "none", in(mgTenant))
}

func testCredentialRekey(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_r"})
	e.vault(store.Vault{ID: "vlt_o", TenantID: mgOtherTenant})
	e.cred(store.VaultCredential{ID: "vcrd_1", VaultID: "vlt_r", KeyID: "old"})
	e.cred(store.VaultCredential{ID: "vcrd_2", VaultID: "vlt_r", KeyID: "new"})
	e.cred(store.VaultCredential{ID: "vcrd_3", VaultID: "vlt_o", TenantID: mgOtherTenant, KeyID: "old"})
	e.cred(store.VaultCredential{ID: "vcrd_4", VaultID: "vlt_r", KeyID: "older"})
	_, err := e.s.ArchiveVaultCredential(e.ctx, "vcrd_4", sbAt(0))
	mustOK(e.t, err, "ArchiveVaultCredential")
	todo := func(after string, limit int) []string {
		l, err := e.s.ListCredentialsNotUnderKey(e.ctx, "new", after, limit)
		return mgIDs(e.t, "ListCredentialsNotUnderKey", l, err, credentialID)
	}
	mgEqualIDs(e.t, "every tenant, archived too", todo("", 0), "vcrd_1", "vcrd_3", "vcrd_4")
	mgEqualIDs(e.t, "paged", todo("vcrd_1", 1), "vcrd_3")
	before, err := e.s.GetVaultCredential(e.ctx, "vcrd_4")
	mustOK(e.t, err, "GetVaultCredential")
	out, err := e.s.RekeyVaultCredential(e.ctx, "vcrd_4", before.Version, []byte("resealed"), "new")
	mustOK(e.t, err, "RekeyVaultCredential of an archived credential")
	equal(e.t, "rekeyed KeyID", out.KeyID, "new")
	equal(e.t, "rekeyed Secret", string(out.Secret), "resealed")
	equal(e.t, "rekeyed Version", out.Version, before.Version+1)
	sbSameTime(e.t, "rekeyed UpdatedAt", out.UpdatedAt, before.UpdatedAt)
	_, err = e.s.RekeyVaultCredential(e.ctx, "vcrd_4", before.Version, []byte("again"), "new")
	mustErrIs(e.t, err, store.ErrVersionMismatch, "RekeyVaultCredential at a stale version")
	_, err = e.s.RekeyVaultCredential(e.ctx, "vcrd_missing", 1, []byte("x"), "new")
	mustErrIs(e.t, err, store.ErrNotFound, "RekeyVaultCredential of an unknown credential")
	mgEqualIDs(e.t, "after one rekey", todo("", 0), "vcrd_1", "vcrd_3")
}

// testCredentialRekeyRace: a rotation and an update racing on one row:
// exactly one wins at each version, and the loser is told so.
func testCredentialRekeyRace(e *vtEnv) {
	e.vault(store.Vault{ID: "vlt_race"})
	c := e.cred(store.VaultCredential{ID: "vcrd_race", VaultID: "vlt_race", KeyID: "old"})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, errs[0] = e.s.RekeyVaultCredential(e.ctx, c.ID, c.Version, []byte("rekeyed"), "new")
	}()
	go func() {
		defer wg.Done()
		u := *c
		u.Secret = []byte("updated")
		_, errs[1] = e.s.UpdateVaultCredential(e.ctx, &u)
	}()
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			mustErrIs(e.t, err, store.ErrVersionMismatch, "the losing write")
		}
	}
	equal(e.t, "writers that won", won, 1)
	got, err := e.s.GetVaultCredential(e.ctx, c.ID)
	mustOK(e.t, err, "GetVaultCredential")
	equal(e.t, "Version", got.Version, c.Version+1)
}

package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// vaultDoc is a vault's stored body (anthropic.BetaManagedAgentsVault
// without id, type and timestamps).
type vaultDoc struct {
	DisplayName string            `json:"display_name"`
	Metadata    map[string]string `json:"metadata"`
}

// maxDisplayName bounds display_name of vaults and credentials (the SDK's
// "1-255 characters").
const maxDisplayName = 255

// vaultAPI serves /v1/vaults and their credentials.
type vaultAPI struct {
	*managedAPI
	st     store.VaultStore
	vaults *vault.Service
}

func (s *Server) registerVaultRoutes(m *managedAPI, st store.VaultStore, vs *vault.Service) {
	v := &vaultAPI{managedAPI: m, st: st, vaults: vs}
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/vaults", a(s.noQuery(v.createVault)))
	s.mux.HandleFunc("GET /v1/vaults", a(s.query(v.listVaults, "limit", "page", "include_archived")))
	s.mux.HandleFunc("GET /v1/vaults/{id}", a(s.noQuery(v.getVault)))
	s.mux.HandleFunc("POST /v1/vaults/{id}", a(s.noQuery(v.updateVault)))
	s.mux.HandleFunc("DELETE /v1/vaults/{id}", a(s.noQuery(v.deleteVault)))
	s.mux.HandleFunc("POST /v1/vaults/{id}/archive", a(s.noQuery(v.archiveVault)))

	s.mux.HandleFunc("POST /v1/vaults/{id}/credentials", a(s.noQuery(v.createCredential)))
	s.mux.HandleFunc("GET /v1/vaults/{id}/credentials", a(s.query(v.listCredentials, "limit", "page", "include_archived")))
	s.mux.HandleFunc("GET /v1/vaults/{id}/credentials/{cid}", a(s.noQuery(v.getCredential)))
	s.mux.HandleFunc("POST /v1/vaults/{id}/credentials/{cid}", a(s.noQuery(v.updateCredential)))
	s.mux.HandleFunc("DELETE /v1/vaults/{id}/credentials/{cid}", a(s.noQuery(v.deleteCredential)))
	s.mux.HandleFunc("POST /v1/vaults/{id}/credentials/{cid}/archive", a(s.noQuery(v.archiveCredential)))
	s.mux.HandleFunc("POST /v1/vaults/{id}/credentials/{cid}/mcp_oauth_validate", a(s.noQuery(v.validateCredential)))
}

// vaultFor reads a vault the caller's tenant owns; another tenant's vault
// answers exactly like a missing one.
func (v *vaultAPI) vaultFor(r *http.Request, id string) (*store.Vault, error) {
	out, err := v.st.GetVault(r.Context(), id)
	if err == nil && out.TenantID != tenant(r) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("vault", id, err)
	}
	return out, nil
}

func timeJSON(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func timePtrJSON(t *time.Time) any {
	if t == nil {
		return nil
	}
	return timeJSON(*t)
}

func (v *vaultAPI) vaultJSON(x *store.Vault) (map[string]any, error) {
	var d vaultDoc
	if err := json.Unmarshal(x.Doc, &d); err != nil {
		return nil, err
	}
	return map[string]any{
		"id": x.ID, "type": "vault", "display_name": d.DisplayName, "metadata": orEmptyMap(d.Metadata),
		"created_at": timeJSON(x.CreatedAt), "updated_at": timeJSON(x.UpdatedAt), "archived_at": timePtrJSON(x.ArchivedAt),
	}, nil
}

func (v *vaultAPI) writeVault(w http.ResponseWriter, r *http.Request, x *store.Vault) {
	out, err := v.vaultJSON(x)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// displayName reads display_name: required and 1–255 characters when
// required, else optional (null clears when nullable).
func displayName(in obj, required bool) (string, error) {
	var (
		s   string
		err error
	)
	if required {
		s, err = in.ReqStr("display_name")
	} else {
		s, err = in.Str("display_name")
	}
	if err == nil {
		err = in.LimitLen("display_name", s, maxDisplayName)
	}
	return s, err
}

func (v *vaultAPI) applyVaultFields(in obj, d *vaultDoc, create bool) error {
	if create || in.Has("display_name") {
		name, err := displayName(in, true)
		if err != nil {
			return err
		}
		d.DisplayName = name
	}
	if in.Has("metadata") {
		md, err := in.MetadataPatch("metadata", d.Metadata, false)
		if err != nil {
			return err
		}
		d.Metadata = md
	}
	return nil
}

func (v *vaultAPI) createVault(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	d := vaultDoc{Metadata: map[string]string{}}
	if err := firstErr(v.applyVaultFields(in, &d, true), in.Strict()); err != nil {
		v.writeError(w, r, err)
		return
	}
	x, err := v.st.CreateVault(r.Context(), &store.Vault{ID: ids.New("vlt"), TenantID: tenant(r), Doc: mustJSON(d)})
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	v.writeVault(w, r, x)
}

func (v *vaultAPI) getVault(w http.ResponseWriter, r *http.Request) {
	x, err := v.vaultFor(r, r.PathValue("id"))
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	v.writeVault(w, r, x)
}

func (v *vaultAPI) updateVault(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := decodeObject(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	cur, err := v.vaultFor(r, id)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	if cur.ArchivedAt != nil {
		v.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "vault %q is archived; archived vaults cannot be updated", id))
		return
	}
	var d vaultDoc
	if err := json.Unmarshal(cur.Doc, &d); err != nil {
		v.writeError(w, r, err)
		return
	}
	if err := firstErr(v.applyVaultFields(in, &d, false), in.Strict()); err != nil {
		v.writeError(w, r, err)
		return
	}
	x, err := v.st.UpdateVault(r.Context(), id, mustJSON(d))
	if err != nil {
		v.writeError(w, r, notFoundAs("vault", id, err))
		return
	}
	v.writeVault(w, r, x)
}

func (v *vaultAPI) archiveVault(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := v.vaultFor(r, id); err != nil {
		v.writeError(w, r, err)
		return
	}
	x, err := v.st.ArchiveVault(r.Context(), id, v.now())
	if err != nil {
		v.writeError(w, r, notFoundAs("vault", id, err))
		return
	}
	v.writeVault(w, r, x)
}

func (v *vaultAPI) deleteVault(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := v.vaultFor(r, id); err != nil {
		v.writeError(w, r, err)
		return
	}
	if err := v.st.DeleteVault(r.Context(), id); err != nil {
		v.writeError(w, r, notFoundAs("vault", id, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "vault_deleted"})
}

// listPage reads limit, page and include_archived, the query every vault
// listing takes (the SDK's BetaVaultListParams), and pages through list.
func listPage[T any](r *http.Request, list func(lp store.ListResourcesParams) ([]T, error), id func(T) string) ([]T, bool, error) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, false)
	if err != nil {
		return nil, false, err
	}
	archived, err := queryBool(q, "include_archived")
	if err != nil {
		return nil, false, err
	}
	return collectPage(p.limit, p.cursor, func(after string, n int) ([]T, error) {
		return list(store.ListResourcesParams{TenantID: tenant(r), Limit: n, IncludeArchived: archived, AfterID: after})
	}, id, func(T) bool { return true })
}

func (v *vaultAPI) listVaults(w http.ResponseWriter, r *http.Request) {
	page, more, err := listPage(r, func(lp store.ListResourcesParams) ([]*store.Vault, error) {
		return v.st.ListVaults(r.Context(), lp)
	}, func(x *store.Vault) string { return x.ID })
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, x := range page {
		j, err := v.vaultJSON(x)
		if err != nil {
			v.writeError(w, r, err)
			return
		}
		out = append(out, j)
	}
	writePage(w, out, more, func(m map[string]any) string { return m["id"].(string) })
}

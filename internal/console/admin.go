package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/agentkernel/agentkernel"
)

// Keys (any key sees its tenant's; an admin key makes and revokes any, a
// tenant key its tenant's environment keys, as the API says) and tenants
// (admin keys only).

func (c *Console) registerAdmin() {
	c.addNav(navItem{Label: "Keys", Path: Prefix + "/keys"})
	c.mux.HandleFunc("GET "+Prefix+"/keys", c.authed(c.keyList))
	c.mux.HandleFunc("POST "+Prefix+"/keys", c.authed(c.keyCreate))
	c.mux.HandleFunc("POST "+Prefix+"/keys/{id}/revoke", c.authed(c.keyRevoke))
	c.addNav(navItem{Label: "Tenants", Path: Prefix + "/tenants", Admin: true})
	c.mux.HandleFunc("GET "+Prefix+"/tenants", c.authed(c.tenantList))
	c.mux.HandleFunc("POST "+Prefix+"/tenants", c.authed(c.tenantCreate))
}

// keyJSON is the API's key, as the SDK reads it.
type keyJSON = agentkernel.APIKey

// tenantJSON is the API's tenant, as the SDK reads it.
type tenantJSON = agentkernel.Tenant

func (c *Console) keyList(w http.ResponseWriter, r *http.Request, u *user) {
	c.keysPage(w, r, u, http.StatusOK, nil, "")
}

// keysPage shows the keys, with a key just made (its secret shown this
// once) or an error of the last action.
func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, u *user, status int, made *keyJSON, failed string) {
	var list struct {
		Data []keyJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/keys", nil, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, status, "keys", map[string]any{"Keys": list.Data, "Made": made, "Error": failed})
}

func (c *Console) keyCreate(w http.ResponseWriter, r *http.Request, u *user) {
	body := map[string]any{"name": strings.TrimSpace(r.PostFormValue("name"))}
	if t := strings.TrimSpace(r.PostFormValue("tenant_id")); t != "" {
		body["tenant_id"] = t
	}
	if e := strings.TrimSpace(r.PostFormValue("environment_id")); e != "" {
		body["environment_id"] = e
	}
	if r.PostFormValue("admin") == "1" {
		body["admin"] = true
	}
	var k keyJSON
	if err := c.call(r.Context(), u, http.MethodPost, "/v1/keys", nil, body, &k); err != nil {
		c.keysPage(w, r, u, statusOf(err), nil, errorText(err))
		return
	}
	c.keysPage(w, r, u, http.StatusOK, &k, "")
}

func (c *Console) keyRevoke(w http.ResponseWriter, r *http.Request, u *user) {
	if err := c.call(r.Context(), u, http.MethodDelete, "/v1/keys/"+url.PathEscape(r.PathValue("id")), nil, nil, nil); err != nil {
		c.keysPage(w, r, u, statusOf(err), nil, errorText(err))
		return
	}
	http.Redirect(w, r, Prefix+"/keys", http.StatusSeeOther)
}

func (c *Console) tenantList(w http.ResponseWriter, r *http.Request, u *user) {
	var list struct {
		Data []tenantJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/tenants", nil, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "tenants", map[string]any{"Tenants": list.Data})
}

func (c *Console) tenantCreate(w http.ResponseWriter, r *http.Request, u *user) {
	if err := c.call(r.Context(), u, http.MethodPost, "/v1/tenants", nil, map[string]any{"name": strings.TrimSpace(r.PostFormValue("name"))}, nil); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tenants", http.StatusSeeOther)
}

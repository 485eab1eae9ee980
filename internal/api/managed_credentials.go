package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// Credential limits. A secret is a token or a key, not a file: 16 KiB is
// far beyond any real one and keeps a sealed row small.
const (
	maxSecretBytes   = 16 << 10
	maxURLBytes      = 2048
	maxClientIDBytes = 1024
	maxScopeBytes    = 2048
	maxAllowedHosts  = 16 // the SDK's limit
	maxSecretName    = 256
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are variables the sandbox's outbound path itself sets; a
// credential may not shadow them.
var reservedEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PATH", "HOME"}

// secretField reads a required secret string within the size limit. The
// value is never part of an error.
func secretField(in obj, k string, required bool) (string, bool, error) {
	if !in.Set(k) {
		switch {
		case in.Has(k):
			return "", false, BadRequest("field %q must be a string, not null (leave it out to keep the stored value)", in.Field(k))
		case required:
			return "", false, BadRequest("field %q is required", in.Field(k))
		}
		return "", false, nil
	}
	s, err := in.Str(k)
	if err != nil {
		return "", false, err
	}
	if s == "" {
		return "", false, BadRequest("field %q must not be empty", in.Field(k))
	}
	if len(s) > maxSecretBytes {
		return "", false, Errorf(http.StatusRequestEntityTooLarge, TypeInvalidRequest,
			"field %q is %d bytes; the limit for a secret is %d bytes", in.Field(k), len(s), maxSecretBytes)
	}
	return s, true, nil
}

// urlField reads a required http(s) URL.
func urlField(in obj, k string) (string, error) {
	s, err := in.ReqStr(k)
	if err != nil {
		return "", err
	}
	if len(s) > maxURLBytes {
		return "", BadRequest("field %q is %d bytes; the limit is %d", in.Field(k), len(s), maxURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", BadRequest("field %q must be an http or https URL with a host and no user info, e.g. https://mcp.example.com/mcp", in.Field(k))
	}
	return s, nil
}

func boundedStr(in obj, k string, max int) (string, error) {
	s, err := in.Str(k)
	if err == nil && len(s) > max {
		err = BadRequest("field %q is %d bytes; the limit is %d", in.Field(k), len(s), max)
	}
	return s, err
}

// futureTime reads an RFC 3339 time that must be after now.
func futureTime(in obj, k string, now time.Time) (*time.Time, error) {
	s, err := in.Str(k)
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, BadRequest("field %q must be an RFC 3339 time, e.g. 2030-01-02T15:04:05Z", in.Field(k))
	}
	if !t.After(now) {
		return nil, BadRequest("field %q must be in the future", in.Field(k))
	}
	t = t.UTC()
	return &t, nil
}

// parseAuth reads a create's auth: the kind's non-secret fields into
// vault.Auth and its secrets into vault.Secrets.
func (v *vaultAPI) parseAuth(a obj) (vault.Auth, vault.Secrets, error) {
	var (
		auth vault.Auth
		sec  vault.Secrets
		err  error
	)
	auth.Type, err = a.ReqStr("type")
	if err != nil {
		return auth, sec, err
	}
	switch auth.Type {
	case vault.KindStaticBearer:
		if auth.MCPServerURL, err = urlField(a, "mcp_server_url"); err != nil {
			return auth, sec, err
		}
		sec.Token, _, err = secretField(a, "token", true)
	case vault.KindMCPOAuth:
		if auth.MCPServerURL, err = urlField(a, "mcp_server_url"); err != nil {
			return auth, sec, err
		}
		if sec.AccessToken, _, err = secretField(a, "access_token", true); err != nil {
			return auth, sec, err
		}
		if a.Set("expires_at") {
			if auth.ExpiresAt, err = futureTime(a, "expires_at", v.vaults.Now()); err != nil {
				return auth, sec, err
			}
		}
		rf, ok, err := a.Object("refresh")
		if err != nil || !ok {
			return auth, sec, err
		}
		auth.Refresh, err = parseRefresh(rf, &sec)
	case vault.KindEnvVar:
		err = parseEnvVar(a, &auth, &sec)
	default:
		err = BadRequest("field %q must be static_bearer, mcp_oauth or environment_variable; got %q", a.Field("type"), auth.Type)
	}
	return auth, sec, err
}

func parseRefresh(rf obj, sec *vault.Secrets) (*vault.Refresh, error) {
	var (
		r   vault.Refresh
		err error
	)
	if r.TokenEndpoint, err = urlField(rf, "token_endpoint"); err != nil {
		return nil, err
	}
	if r.ClientID, err = rf.ReqStr("client_id"); err == nil && len(r.ClientID) > maxClientIDBytes {
		err = BadRequest("field %q is %d bytes; the limit is %d", rf.Field("client_id"), len(r.ClientID), maxClientIDBytes)
	}
	if err != nil {
		return nil, err
	}
	if sec.RefreshToken, _, err = secretField(rf, "refresh_token", true); err != nil {
		return nil, err
	}
	for _, k := range []string{"scope", "resource"} {
		if !rf.Set(k) {
			continue
		}
		s, err := boundedStr(rf, k, maxScopeBytes)
		if err != nil {
			return nil, err
		}
		if k == "scope" {
			r.Scope = &s
		} else {
			r.Resource = &s
		}
	}
	ta, ok, err := rf.Object("token_endpoint_auth")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, BadRequest("field %q is required (type none, client_secret_basic or client_secret_post)", rf.Field("token_endpoint_auth"))
	}
	if r.TokenEndpointAuth, err = ta.ReqStr("type"); err != nil {
		return nil, err
	}
	switch r.TokenEndpointAuth {
	case vault.AuthNone:
	case vault.AuthBasic, vault.AuthPost:
		if sec.ClientSecret, _, err = secretField(ta, "client_secret", true); err != nil {
			return nil, err
		}
	default:
		return nil, BadRequest("field %q must be none, client_secret_basic or client_secret_post; got %q", ta.Field("type"), r.TokenEndpointAuth)
	}
	return &r, nil
}

func parseEnvVar(a obj, auth *vault.Auth, sec *vault.Secrets) error {
	name, err := a.ReqStr("secret_name")
	if err != nil {
		return err
	}
	if len(name) > maxSecretName || !envName.MatchString(name) {
		return BadRequest("field %q must be an environment variable name (letters, digits and _, not starting with a digit, at most %d bytes); got %q", a.Field("secret_name"), maxSecretName, name)
	}
	if slices.Contains(reservedEnv, strings.ToUpper(name)) {
		return BadRequest("field %q: %s is set by agentkernel inside the sandbox; choose another name", a.Field("secret_name"), name)
	}
	auth.SecretName = name
	if sec.Value, _, err = secretField(a, "secret_value", true); err != nil {
		return err
	}
	nw, ok, err := a.Object("networking")
	if err != nil {
		return err
	}
	if !ok {
		return BadRequest("field %q is required: {\"type\": \"unrestricted\"} or {\"type\": \"limited\", \"allowed_hosts\": [...]}", a.Field("networking"))
	}
	if auth.Networking, err = parseCredNetworking(nw); err != nil {
		return err
	}
	auth.InjectionLocation = &vault.Injection{Header: true}
	return applyInjection(a, auth)
}

func parseCredNetworking(nw obj) (*vault.Networking, error) {
	typ, err := nw.ReqStr("type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "unrestricted":
		return &vault.Networking{Type: typ}, nil
	case "limited":
		hosts, err := nw.Strings("allowed_hosts")
		if err != nil {
			return nil, err
		}
		if len(hosts) == 0 {
			return nil, BadRequest("field %q must list at least one host for limited networking", nw.Field("allowed_hosts"))
		}
		if len(hosts) > maxAllowedHosts {
			return nil, BadRequest("field %q has %d entries; the limit is %d", nw.Field("allowed_hosts"), len(hosts), maxAllowedHosts)
		}
		if _, err := egress.ParseHosts(hosts); err != nil {
			var ie *egress.IndexedHostError
			if errors.As(err, &ie) {
				return nil, BadRequest("field %q: %v", fmt.Sprintf("%s[%d]", nw.Field("allowed_hosts"), ie.Index), ie.Err)
			}
			return nil, BadRequest("field %q: %v", nw.Field("allowed_hosts"), err)
		}
		return &vault.Networking{Type: typ, AllowedHosts: hosts}, nil
	}
	return nil, BadRequest("field %q must be unrestricted or limited; got %q", nw.Field("type"), typ)
}

// applyInjection patches injection_location's header and body.
func applyInjection(a obj, auth *vault.Auth) error {
	il, ok, err := a.Object("injection_location")
	if err != nil || !ok {
		return err
	}
	for k, dst := range map[string]*bool{"header": &auth.InjectionLocation.Header, "body": &auth.InjectionLocation.Body} {
		if il.Set(k) {
			b, err := il.Bool(k)
			if err != nil {
				return err
			}
			*dst = b
		} else if il.Has(k) {
			return BadRequest("field %q must be true or false", il.Field(k))
		}
	}
	if !auth.InjectionLocation.Header && !auth.InjectionLocation.Body {
		return BadRequest("field %q: header and body are both false, so the value would never be substituted", a.Field("injection_location"))
	}
	return nil
}

// applyAuthUpdate patches the credential's auth with an update's auth
// (the SDK's *UpdateParams: the type cannot change, mcp_server_url,
// secret_name and client_id are immutable).
func (v *vaultAPI) applyAuthUpdate(a obj, doc *vault.Doc, sec *vault.Secrets) error {
	typ, err := a.ReqStr("type")
	if err != nil {
		return err
	}
	if typ != doc.Auth.Type {
		return BadRequest("field %q is %q but the credential is %s; a credential's type cannot change (create a new credential)", a.Field("type"), typ, doc.Auth.Type)
	}
	switch typ {
	case vault.KindStaticBearer:
		if s, ok, err := secretField(a, "token", false); err != nil {
			return err
		} else if ok {
			sec.Token = s
		}
	case vault.KindMCPOAuth:
		if s, ok, err := secretField(a, "access_token", false); err != nil {
			return err
		} else if ok {
			sec.AccessToken = s
		}
		if a.Set("expires_at") {
			if doc.Auth.ExpiresAt, err = futureTime(a, "expires_at", v.vaults.Now()); err != nil {
				return err
			}
		} else if a.Has("expires_at") {
			doc.Auth.ExpiresAt = nil
		}
		rf, ok, err := a.Object("refresh")
		if err != nil || !ok {
			return err
		}
		if doc.Auth.Refresh == nil {
			return BadRequest("field %q: the credential has no refresh configuration; it is set when the credential is created", a.Field("refresh"))
		}
		return applyRefreshUpdate(rf, doc.Auth.Refresh, sec)
	case vault.KindEnvVar:
		if s, ok, err := secretField(a, "secret_value", false); err != nil {
			return err
		} else if ok {
			sec.Value = s
		}
		if doc.Auth.InjectionLocation == nil {
			doc.Auth.InjectionLocation = &vault.Injection{Header: true}
		}
		if err := applyInjection(a, &doc.Auth); err != nil {
			return err
		}
		nw, ok, err := a.Object("networking")
		if err != nil || !ok {
			return err
		}
		doc.Auth.Networking, err = parseCredNetworking(nw)
		return err
	}
	return nil
}

func applyRefreshUpdate(rf obj, r *vault.Refresh, sec *vault.Secrets) error {
	if s, ok, err := secretField(rf, "refresh_token", false); err != nil {
		return err
	} else if ok {
		sec.RefreshToken = s
	}
	if rf.Has("scope") {
		s, err := boundedStr(rf, "scope", maxScopeBytes)
		if err != nil {
			return err
		}
		r.Scope = nil // "" clears the stored scope (SDK docs)
		if s != "" {
			r.Scope = &s
		}
	}
	ta, ok, err := rf.Object("token_endpoint_auth")
	if err != nil || !ok {
		return err
	}
	typ, err := ta.ReqStr("type")
	if err != nil {
		return err
	}
	if typ != vault.AuthBasic && typ != vault.AuthPost {
		return BadRequest("field %q must be client_secret_basic or client_secret_post; got %q", ta.Field("type"), typ)
	}
	if r.TokenEndpointAuth != vault.AuthBasic && r.TokenEndpointAuth != vault.AuthPost {
		return BadRequest("field %q: the credential's token endpoint auth is %s, which has no client secret to replace", rf.Field("token_endpoint_auth"), r.TokenEndpointAuth)
	}
	// The credential keeps its auth type whatever type is sent (SDK docs).
	if s, ok, err := secretField(ta, "client_secret", false); err != nil {
		return err
	} else if ok {
		sec.ClientSecret = s
	}
	return nil
}

// applyCredentialFields applies display_name and metadata.
func applyCredentialFields(in obj, doc *vault.Doc) error {
	if in.Has("display_name") {
		doc.DisplayName = nil
		if in.Set("display_name") {
			s, err := displayName(in, false)
			if err != nil {
				return err
			}
			doc.DisplayName = &s
		}
	}
	if in.Has("metadata") {
		md, err := in.MetadataPatch("metadata", doc.Metadata, false)
		if err != nil {
			return err
		}
		doc.Metadata = md
	}
	return nil
}

// credentialFor reads a credential of a vault the caller's tenant owns.
func (v *vaultAPI) credentialFor(r *http.Request) (*store.VaultCredential, error) {
	vaultID, id := r.PathValue("id"), r.PathValue("cid")
	if _, err := v.vaultFor(r, vaultID); err != nil {
		return nil, err
	}
	c, err := v.st.GetVaultCredential(r.Context(), id)
	if err == nil && (c.TenantID != tenant(r) || c.VaultID != vaultID) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("credential", id, err)
	}
	return c, nil
}

// credentialJSON is the SDK's BetaManagedAgentsCredential: every field
// but the secrets.
func credentialJSON(c *store.VaultCredential) (map[string]any, error) {
	d, err := vault.DecodeDoc(c)
	if err != nil {
		return nil, err
	}
	a := d.Auth
	auth := map[string]any{"type": a.Type}
	switch a.Type {
	case vault.KindStaticBearer:
		auth["mcp_server_url"] = a.MCPServerURL
	case vault.KindMCPOAuth:
		auth["mcp_server_url"] = a.MCPServerURL
		auth["expires_at"] = timePtrJSON(a.ExpiresAt)
		auth["refresh"] = nil
		if r := a.Refresh; r != nil {
			auth["refresh"] = map[string]any{"token_endpoint": r.TokenEndpoint, "client_id": r.ClientID,
				"token_endpoint_auth": map[string]any{"type": r.TokenEndpointAuth}, "scope": r.Scope, "resource": r.Resource}
		}
	case vault.KindEnvVar:
		auth["secret_name"] = a.SecretName
		inj := vault.Injection{Header: true}
		if a.InjectionLocation != nil {
			inj = *a.InjectionLocation
		}
		auth["injection_location"] = map[string]any{"header": inj.Header, "body": inj.Body}
		nw := map[string]any{"type": "unrestricted"}
		if a.Networking != nil && a.Networking.Type == "limited" {
			nw = map[string]any{"type": "limited", "allowed_hosts": a.Networking.AllowedHosts}
		}
		auth["networking"] = nw
	}
	return map[string]any{
		"id": c.ID, "type": "vault_credential", "vault_id": c.VaultID, "display_name": d.DisplayName,
		"metadata": orEmptyMap(d.Metadata), "auth": auth,
		"created_at": timeJSON(c.CreatedAt), "updated_at": timeJSON(c.UpdatedAt), "archived_at": timePtrJSON(c.ArchivedAt),
	}, nil
}

func (v *vaultAPI) writeCredential(w http.ResponseWriter, r *http.Request, c *store.VaultCredential) {
	out, err := credentialJSON(c)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (v *vaultAPI) createCredential(w http.ResponseWriter, r *http.Request) {
	vaultID := r.PathValue("id")
	in, err := decodeObject(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	x, err := v.vaultFor(r, vaultID)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	if x.ArchivedAt != nil {
		v.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "vault %q is archived; archived vaults take no new credentials", vaultID))
		return
	}
	doc := vault.Doc{Metadata: map[string]string{}}
	var sec vault.Secrets
	a, ok, err := in.Object("auth")
	if err == nil && !ok {
		err = BadRequest("field \"auth\" is required: an object whose type is static_bearer, mcp_oauth or environment_variable")
	}
	if err == nil {
		doc.Auth, sec, err = v.parseAuth(a)
	}
	if err := firstErr(err, applyCredentialFields(in, &doc), in.Strict()); err != nil {
		v.writeError(w, r, err)
		return
	}
	if doc.Auth.Type == vault.KindEnvVar {
		if err := v.checkSecretNameFree(r, vaultID, "", doc.Auth.SecretName); err != nil {
			v.writeError(w, r, err)
			return
		}
	}
	c, err := v.vaults.Create(r.Context(), tenant(r), vaultID, doc, sec)
	if err != nil {
		v.writeError(w, r, notFoundAs("vault", vaultID, err))
		return
	}
	v.writeCredential(w, r, c)
}

// checkSecretNameFree refuses a second live environment_variable
// credential with the same variable in one vault: the sandbox has one
// environment.
func (v *vaultAPI) checkSecretNameFree(r *http.Request, vaultID, self, name string) error {
	rows, err := v.st.ListVaultCredentialsIn(r.Context(), tenant(r), []string{vaultID})
	if err != nil {
		return err
	}
	for _, c := range rows {
		if c.Kind != vault.KindEnvVar || c.ID == self {
			continue
		}
		d, err := vault.DecodeDoc(c)
		if err != nil {
			return err
		}
		if d.Auth.SecretName == name {
			return Errorf(http.StatusConflict, TypeConflict, "credential %s in vault %s already sets %s; update or archive it instead", c.ID, vaultID, name)
		}
	}
	return nil
}

func (v *vaultAPI) getCredential(w http.ResponseWriter, r *http.Request) {
	c, err := v.credentialFor(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	v.writeCredential(w, r, c)
}

func (v *vaultAPI) updateCredential(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	cur, err := v.credentialFor(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	if cur.ArchivedAt != nil {
		v.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "credential %q is archived; archived credentials cannot be updated", cur.ID))
		return
	}
	doc, err := vault.DecodeDoc(cur)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	sec, err := v.vaults.Secrets(cur)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	a, ok, err := in.Object("auth")
	if err == nil && ok {
		err = v.applyAuthUpdate(a, &doc, &sec)
	}
	if err := firstErr(err, applyCredentialFields(in, &doc), in.Strict()); err != nil {
		v.writeError(w, r, err)
		return
	}
	c, err := v.vaults.Update(r.Context(), cur, doc, sec)
	if err != nil {
		v.writeError(w, r, notFoundAs("credential", cur.ID, err))
		return
	}
	v.writeCredential(w, r, c)
}

func (v *vaultAPI) archiveCredential(w http.ResponseWriter, r *http.Request) {
	cur, err := v.credentialFor(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	c, err := v.st.ArchiveVaultCredential(r.Context(), cur.ID, v.now())
	if err != nil {
		v.writeError(w, r, notFoundAs("credential", cur.ID, err))
		return
	}
	v.writeCredential(w, r, c)
}

func (v *vaultAPI) deleteCredential(w http.ResponseWriter, r *http.Request) {
	cur, err := v.credentialFor(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	if err := v.st.DeleteVaultCredential(r.Context(), cur.ID); err != nil {
		v.writeError(w, r, notFoundAs("credential", cur.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": cur.ID, "type": "vault_credential_deleted"})
}

func (v *vaultAPI) listCredentials(w http.ResponseWriter, r *http.Request) {
	vaultID := r.PathValue("id")
	if _, err := v.vaultFor(r, vaultID); err != nil {
		v.writeError(w, r, err)
		return
	}
	page, more, err := listPage(r, func(lp store.ListResourcesParams) ([]*store.VaultCredential, error) {
		lp.VaultID = vaultID
		return v.st.ListVaultCredentials(r.Context(), lp)
	}, func(c *store.VaultCredential) string { return c.ID })
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, c := range page {
		j, err := credentialJSON(c)
		if err != nil {
			v.writeError(w, r, err)
			return
		}
		out = append(out, j)
	}
	writePage(w, out, more, func(m map[string]any) string { return m["id"].(string) })
}

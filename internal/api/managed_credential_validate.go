package api

import (
	"net/http"

	"github.com/agentkernel/agentkernel/internal/vault"
)

// validateCredential probes an mcp_oauth credential against its MCP server
// (the SDK's MCPOAuthValidate): refresh when near expiry, connect, list
// tools, and report each step the SDK's way.
func (v *vaultAPI) validateCredential(w http.ResponseWriter, r *http.Request) {
	c, err := v.credentialFor(r)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	if c.Kind != vault.KindMCPOAuth {
		v.writeError(w, r, BadRequest("credential %s is %s; mcp_oauth_validate validates mcp_oauth credentials", c.ID, c.Kind))
		return
	}
	if c.ArchivedAt != nil {
		v.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "credential %q is archived; archived credentials are not used", c.ID))
		return
	}
	res, err := v.vaults.Validate(r.Context(), c)
	if err != nil {
		v.writeError(w, r, err)
		return
	}
	httpJSON := func(h *vault.HTTPResponse) any {
		if h == nil {
			return nil
		}
		return map[string]any{"status_code": h.StatusCode, "content_type": h.ContentType, "body": h.Body, "body_truncated": h.Truncated}
	}
	var refresh, probe any
	if res.Refresh != nil {
		refresh = map[string]any{"status": res.Refresh.Status, "http_response": httpJSON(res.Refresh.HTTP)}
	}
	if res.Probe != nil {
		probe = map[string]any{"method": res.Probe.Method, "http_response": httpJSON(res.Probe.HTTP)}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "vault_credential_validation", "credential_id": res.CredentialID, "vault_id": res.VaultID,
		"has_refresh_token": res.HasRefreshToken, "status": res.Status, "refresh": refresh, "mcp_probe": probe,
		"validated_at": timeJSON(res.ValidatedAt),
	})
}

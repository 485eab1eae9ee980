package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Refresh outcomes (the SDK's BetaManagedAgentsRefreshObjectStatus).
const (
	RefreshSucceeded    = "succeeded"
	RefreshFailed       = "failed"
	RefreshConnectError = "connect_error"
	RefreshNoToken      = "no_refresh_token"
)

// HTTPResponse is an error answer captured for a validation report, its
// body truncated and scrubbed of the credential's secrets.
type HTTPResponse struct {
	StatusCode  int
	ContentType string
	Body        string
	Truncated   bool
}

// maxCapturedBody bounds a captured error body.
const maxCapturedBody = 4 << 10

// RefreshError is a refresh that did not give a new access token. Its
// message names the credential, the endpoint and the OAuth error code,
// never a token.
type RefreshError struct {
	CredentialID string
	Endpoint     string
	Status       string // RefreshFailed, RefreshConnectError, RefreshNoToken
	HTTP         *HTTPResponse
	OAuthError   string // the token endpoint's "error", if it gave one
	Reason       string
}

func (e *RefreshError) Error() string {
	msg := fmt.Sprintf("credential %s: refreshing its access token", e.CredentialID)
	if e.Endpoint != "" {
		msg += " at " + e.Endpoint
	}
	msg += ": " + e.Reason
	if e.OAuthError != "" {
		msg += " (error " + e.OAuthError + ")"
	}
	if e.Status == RefreshFailed {
		msg += "; update the credential's refresh token or authorize again"
	}
	return msg
}

// needsRefresh reports an mcp_oauth access token that expires within the
// margin and can be refreshed.
func (s *Service) needsRefresh(doc Doc) bool {
	a := doc.Auth
	return a.Type == KindMCPOAuth && a.Refresh != nil && a.ExpiresAt != nil && a.ExpiresAt.Sub(s.now()) < s.margin
}

// Fresh returns the credential with its secrets, refreshing its OAuth
// access token first when it expires within the margin.
func (s *Service) Fresh(ctx context.Context, c *store.VaultCredential) (*store.VaultCredential, Secrets, error) {
	doc, err := DecodeDoc(c)
	if err != nil {
		return nil, Secrets{}, err
	}
	if !s.needsRefresh(doc) {
		sec, err := s.Secrets(c)
		return c, sec, err
	}
	return s.Refresh(ctx, c.ID, false)
}

type refreshed struct {
	c   *store.VaultCredential
	sec Secrets
}

// Refresh exchanges the credential's refresh token for a new access token
// and stores it (with the new expiry and a rotated refresh token). Callers
// of one credential share one exchange. Unless force, a credential another
// caller refreshed meanwhile is returned as it is.
//
// The exchange is not an op in a session's journal: it is made for the
// credential, which every session holding its vault shares (one exchange
// serves them all, and the API's validate makes it too), and its result
// is written to the credential, not to any session. With refresh-token
// rotation it is not idempotent, and a crash between the token endpoint's
// answer and storeTokens loses the rotated token whatever comes next. The
// next use exchanges the stored refresh token again; an endpoint that
// retired it answers invalid_grant, which is RefreshFailed ("update the
// credential's refresh token or authorize again") and, for a session,
// mcp_authentication_failed_error: the loss is reported, never hidden. (An
// endpoint with reuse detection may revoke the token family then; the
// family was already lost to the daemon.)
func (s *Service) Refresh(ctx context.Context, credentialID string, force bool) (*store.VaultCredential, Secrets, error) {
	v, err, _ := s.refreshing.Do(credentialID, func() (any, error) {
		// The shared exchange must not die with the first caller's request.
		ctx := context.WithoutCancel(ctx)
		c, err := s.st.GetVaultCredential(ctx, credentialID)
		if err != nil {
			return nil, err
		}
		doc, err := DecodeDoc(c)
		if err != nil {
			return nil, err
		}
		sec, err := s.Secrets(c)
		if err != nil {
			return nil, err
		}
		if !force && !s.needsRefresh(doc) {
			return refreshed{c, sec}, nil
		}
		if doc.Auth.Type != KindMCPOAuth || doc.Auth.Refresh == nil || sec.RefreshToken == "" {
			return nil, &RefreshError{CredentialID: c.ID, Status: RefreshNoToken, Reason: "it has no refresh token"}
		}
		tok, err := s.exchange(ctx, c.ID, *doc.Auth.Refresh, sec)
		if err != nil {
			s.announceFailure(ctx, c.ID, err)
			return nil, err
		}
		out, outSec, err := s.storeTokens(ctx, c, tok)
		if err != nil {
			return nil, err
		}
		s.log.Info("vault: refreshed an OAuth access token", "credential", c.ID, "expires_at", tok.expiresAt)
		return refreshed{out, outSec}, nil
	})
	if err != nil {
		return nil, Secrets{}, err
	}
	r := v.(refreshed)
	return r.c, r.sec, nil
}

// announceFailure announces a refresh the token endpoint refused or that
// could not reach it (vault_credential.refresh_failed). The refresh's own
// error is what the caller sees; an announcement that could not be written
// is logged.
func (s *Service) announceFailure(ctx context.Context, credentialID string, err error) {
	var re *RefreshError
	if !errors.As(err, &re) || re.Status != RefreshFailed && re.Status != RefreshConnectError {
		return
	}
	if err := s.st.AnnounceCredentialRefreshFailed(ctx, credentialID, s.now()); err != nil {
		s.log.Warn("vault: announce a failed refresh", "credential", credentialID, "err", err)
	}
}

type tokens struct {
	access    string
	refresh   string // "" when the endpoint did not rotate it
	expiresAt *time.Time
}

// exchange runs the refresh_token grant (RFC 6749 §6) with the configured
// client authentication (§2.3.1).
func (s *Service) exchange(ctx context.Context, credentialID string, r Refresh, sec Secrets) (tokens, error) {
	fail := func(status, reason string) *RefreshError {
		return &RefreshError{CredentialID: credentialID, Endpoint: r.TokenEndpoint, Status: status, Reason: reason}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {sec.RefreshToken}}
	if r.Scope != nil && *r.Scope != "" {
		form.Set("scope", *r.Scope)
	}
	if r.Resource != nil && *r.Resource != "" {
		form.Set("resource", *r.Resource)
	}
	switch r.TokenEndpointAuth {
	case AuthBasic:
	case AuthPost:
		form.Set("client_id", r.ClientID)
		form.Set("client_secret", sec.ClientSecret)
	default:
		form.Set("client_id", r.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return tokens{}, fail(RefreshConnectError, "the token endpoint is not a URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if r.TokenEndpointAuth == AuthBasic {
		req.SetBasicAuth(url.QueryEscape(r.ClientID), url.QueryEscape(sec.ClientSecret))
	}
	started := s.now()
	resp, err := s.client.Do(req)
	if err != nil {
		// The transport's error names the URL and the network failure only.
		return tokens{}, fail(RefreshConnectError, fmt.Sprintf("the token endpoint could not be reached: %v", unwrapURLError(err)))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		AccessToken  string          `json:"access_token"`
		RefreshToken string          `json:"refresh_token"`
		ExpiresIn    json.Number     `json:"expires_in"`
		Error        string          `json:"error"`
		TokenType    string          `json:"token_type"`
		Extra        json.RawMessage `json:"-"`
	}
	jsonErr := json.Unmarshal(body, &out)
	if resp.StatusCode/100 != 2 || jsonErr != nil || out.AccessToken == "" {
		e := fail(RefreshFailed, fmt.Sprintf("the token endpoint answered %d", resp.StatusCode))
		if resp.StatusCode/100 == 2 {
			e.Reason += " without an access_token"
		}
		if oauthErrorCode(out.Error) {
			e.OAuthError = out.Error
		}
		e.HTTP = capture(resp, body, sec)
		return tokens{}, e
	}
	if out.TokenType != "" && !strings.EqualFold(out.TokenType, "bearer") {
		return tokens{}, fail(RefreshFailed, fmt.Sprintf("the token endpoint gave a %q token; only bearer tokens are sent to MCP servers", out.TokenType))
	}
	t := tokens{access: out.AccessToken, refresh: out.RefreshToken}
	if n, err := out.ExpiresIn.Int64(); err == nil && n > 0 {
		at := started.Add(time.Duration(n) * time.Second).UTC()
		t.expiresAt = &at
	}
	return t, nil
}

// oauthErrorCode accepts the error codes RFC 6749 §5.2 allows (a short
// token of printable ASCII), so nothing else from the body reaches a
// message.
func oauthErrorCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// capture keeps an error answer for a validation report, with every secret
// of the credential scrubbed from the body.
func capture(resp *http.Response, body []byte, sec Secrets) *HTTPResponse {
	h := &HTTPResponse{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if mt, _, err := mime.ParseMediaType(h.ContentType); err == nil {
		h.ContentType = mt
	}
	b := string(body)
	if len(b) > maxCapturedBody {
		b, h.Truncated = b[:maxCapturedBody], true
	}
	for _, v := range sec.values() {
		b = strings.ReplaceAll(b, v, redacted)
	}
	h.Body = b
	return h
}

// storeTokens writes the new tokens over the credential. A concurrent
// write (an update through the API, a key rotation) makes the versioned
// write fail; the tokens are then applied to the row as it is now, since
// the token endpoint may already have retired the old refresh token.
func (s *Service) storeTokens(ctx context.Context, c *store.VaultCredential, t tokens) (*store.VaultCredential, Secrets, error) {
	for attempt := 0; ; attempt++ {
		doc, err := DecodeDoc(c)
		if err != nil {
			return nil, Secrets{}, err
		}
		sec, err := s.Secrets(c)
		if err != nil {
			return nil, Secrets{}, err
		}
		doc.Auth.ExpiresAt = t.expiresAt
		sec.AccessToken = t.access
		if t.refresh != "" {
			sec.RefreshToken = t.refresh
		}
		out, err := s.Update(ctx, c, doc, sec)
		if err == nil {
			return out, sec, nil
		}
		if !errors.Is(err, store.ErrVersionMismatch) || attempt == 4 {
			return nil, Secrets{}, fmt.Errorf("credential %s: storing the refreshed token: %w", c.ID, err)
		}
		if c, err = s.st.GetVaultCredential(ctx, c.ID); err != nil {
			return nil, Secrets{}, err
		}
	}
}

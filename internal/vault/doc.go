package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Credential kinds (the SDK's auth types).
const (
	KindStaticBearer = "static_bearer"
	KindMCPOAuth     = "mcp_oauth"
	KindEnvVar       = "environment_variable"
)

// Token endpoint client authentication (the SDK's token_endpoint_auth types).
const (
	AuthNone   = "none"
	AuthBasic  = "client_secret_basic"
	AuthPost   = "client_secret_post"
	netUnres   = "unrestricted"
	netLimited = "limited"
)

// Doc is a credential's stored body: everything about it that may be
// shown. The secret fields are never in it (they are in Secrets, sealed).
type Doc struct {
	DisplayName *string           `json:"display_name"`
	Metadata    map[string]string `json:"metadata"`
	Auth        Auth              `json:"auth"`
}

// Auth is the non-secret part of a credential's auth, one struct for the
// three kinds (Type says which fields apply).
type Auth struct {
	Type string `json:"type"`
	// static_bearer, mcp_oauth
	MCPServerURL string `json:"mcp_server_url,omitempty"`
	// mcp_oauth: nil when the expiry is unknown.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Refresh   *Refresh   `json:"refresh,omitempty"`
	// environment_variable
	SecretName        string      `json:"secret_name,omitempty"`
	InjectionLocation *Injection  `json:"injection_location,omitempty"`
	Networking        *Networking `json:"networking,omitempty"`
}

// Refresh is an mcp_oauth credential's refresh configuration (the refresh
// token and client secret are in Secrets).
type Refresh struct {
	TokenEndpoint     string  `json:"token_endpoint"`
	ClientID          string  `json:"client_id"`
	TokenEndpointAuth string  `json:"token_endpoint_auth"` // none, client_secret_basic, client_secret_post
	Scope             *string `json:"scope,omitempty"`
	Resource          *string `json:"resource,omitempty"`
}

// Injection is where an environment_variable credential's value is
// substituted.
type Injection struct {
	Header bool `json:"header"`
	Body   bool `json:"body"`
}

// Networking is where an environment_variable credential's value may go:
// unrestricted, or limited to AllowedHosts.
type Networking struct {
	Type         string   `json:"type"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// Secrets are a credential's secret fields. They are sealed as a whole;
// nothing prints them: String, GoString, LogValue redact, and
// MarshalJSON refuses (sealing marshals sealedSecrets).
type Secrets struct {
	Token        string // static_bearer
	AccessToken  string // mcp_oauth
	RefreshToken string // mcp_oauth refresh
	ClientSecret string // mcp_oauth client_secret_basic / client_secret_post
	Value        string // environment_variable secret_value
}

type sealedSecrets struct {
	Token        string `json:"token,omitempty"`
	AccessToken  string `json:"access_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	Value        string `json:"value,omitempty"`
}

const redacted = "[redacted]"

// String never shows a secret.
func (Secrets) String() string { return "vault.Secrets" + redacted }

// GoString never shows a secret (%#v).
func (s Secrets) GoString() string { return s.String() }

// LogValue never shows a secret.
func (Secrets) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON refuses: a secret goes into a response or a log by no path.
func (Secrets) MarshalJSON() ([]byte, error) {
	return nil, errors.New("vault: secrets are never marshalled")
}

// values are the secret strings that are set, to scrub them from text
// that came from elsewhere (a token endpoint's error body).
func (s Secrets) values() []string {
	var out []string
	for _, v := range []string{s.Token, s.AccessToken, s.RefreshToken, s.ClientSecret, s.Value} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// DecodeDoc reads a stored credential's body.
func DecodeDoc(c *store.VaultCredential) (Doc, error) {
	var d Doc
	if err := json.Unmarshal(c.Doc, &d); err != nil {
		return d, fmt.Errorf("credential %s: stored body: %w", c.ID, err)
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	return d, nil
}

// SameServer reports whether two MCP server URLs name the same server:
// scheme and host compared without case, a default port and a trailing
// slash ignored.
func SameServer(a, b string) bool { return normalURL(a) == normalURL(b) }

func normalURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return strings.TrimSpace(s)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	u.Host = host
	if port != "" {
		u.Host = host + ":" + port
	}
	if strings.Contains(host, ":") {
		u.Host = "[" + host + "]"
		if port != "" {
			u.Host += ":" + port
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String()
}

// hostsOf parses a credential's allowed hosts; nil when unrestricted.
func hostsOf(n *Networking) ([]egress.HostPattern, error) {
	if n == nil || n.Type != netLimited {
		return nil, nil
	}
	return egress.ParseHosts(n.AllowedHosts)
}

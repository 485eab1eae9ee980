package model

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
)

// Provider names.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderScripted  = "scripted"
)

// Route maps a model id, or a prefix ending in "*", to a provider.
type Route struct {
	Pattern   string
	Provider  string
	BaseURL   string
	APIKey    string
	APIKeyEnv string
	File      string
	// Model overrides the model name sent to the provider.
	Model     string
	MaxTokens int64
	// IdempotencyHeader names the header an anthropic or openai upstream
	// (a gateway, a proxy) dedupes requests on; every request then carries
	// its op id there. Empty: no key is sent.
	IdempotencyHeader string
	// ContextWindow is the model's context window in tokens (0: the
	// default, DefaultContextWindow for Claude models, else unknown and
	// never compacted). CompactAt is the share of it a request may fill
	// before the conversation is compacted (0: DefaultCompactAt).
	ContextWindow int64
	CompactAt     float64
}

// Context window defaults. Every current Claude model has a 200k-token
// window (the 1M one of some is a beta the operator opts into with
// context_window); other models' windows vary too much to guess.
const (
	DefaultContextWindow = 200_000
	DefaultCompactAt     = 0.8
)

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	Routes []Route
	// Environ is os.Environ()-shaped; nil reads the process environment.
	// The anthropic provider reads ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL
	// from it, the openai provider OPENAI_API_KEY/OPENAI_BASE_URL.
	Environ []string
	// HTTPClient is used by the HTTP providers (default: the SDKs' own).
	HTTPClient *http.Client
	Log        *slog.Logger
}

// Resolved is a provider with the request defaults of its route.
type Resolved struct {
	Provider Provider
	// Model is the name to send to the provider.
	Model     string
	MaxTokens int64
	// ContextWindow (0: unknown, no compaction) and CompactAt are the
	// route's, defaults applied.
	ContextWindow int64
	CompactAt     float64
	Route         Route
}

// Registry resolves model ids to providers, building each provider once.
type Registry struct {
	cfg    RegistryConfig
	env    map[string]string
	routes []Route

	mu        sync.Mutex
	providers map[string]Provider // by pattern
}

// DefaultRoute is used when no [models] entry matches a claude-* model.
var DefaultRoute = Route{Pattern: "claude-*", Provider: ProviderAnthropic}

// NewRegistry validates the routes. Providers are built on first use.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	env := map[string]string{}
	environ := cfg.Environ
	if environ == nil {
		environ = os.Environ()
	}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	routes := append([]Route(nil), cfg.Routes...)
	hasClaude := false
	for _, r := range routes {
		switch r.Provider {
		case ProviderAnthropic, ProviderOpenAI, ProviderScripted:
		default:
			return nil, fmt.Errorf("%w: models.%q.provider = %q (accepted: %q, %q or %q)", ErrNoProvider, r.Pattern, r.Provider, ProviderAnthropic, ProviderOpenAI, ProviderScripted)
		}
		if err := checkIdempotencyHeader(r); err != nil {
			return nil, err
		}
		if r.Pattern == DefaultRoute.Pattern {
			hasClaude = true
		}
	}
	if !hasClaude {
		routes = append(routes, DefaultRoute)
	}
	// Exact names first, then prefixes longest first: the first match wins.
	sortPatterns(routes, func(r Route) string { return r.Pattern })
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Registry{cfg: cfg, env: env, routes: routes, providers: map[string]Provider{}}, nil
}

// Match returns the route serving modelID.
func (r *Registry) Match(modelID string) (Route, bool) {
	for _, rt := range r.routes {
		if matchPattern(rt.Pattern, modelID) {
			return rt, true
		}
	}
	return Route{}, false
}

// Resolve returns the provider of modelID. An unknown model is
// ErrNoProvider with the configuration key to set.
func (r *Registry) Resolve(modelID string) (*Resolved, error) {
	rt, ok := r.Match(modelID)
	if !ok {
		return nil, fmt.Errorf("%w for model %q: add [models.%q] with provider = \"anthropic\", \"openai\" or \"scripted\" to agentkernel.toml",
			ErrNoProvider, modelID, modelID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.providers[rt.Pattern]
	if !ok {
		var err error
		if p, err = r.build(rt); err != nil {
			return nil, err
		}
		r.providers[rt.Pattern] = p
	}
	res := &Resolved{Provider: p, Model: modelID, MaxTokens: rt.MaxTokens, Route: rt}
	if rt.Model != "" {
		res.Model = rt.Model
	}
	if res.MaxTokens <= 0 {
		res.MaxTokens = DefaultMaxTokens
	}
	res.ContextWindow, res.CompactAt = rt.ContextWindow, rt.CompactAt
	if res.ContextWindow <= 0 && rt.Provider == ProviderAnthropic && strings.HasPrefix(res.Model, "claude-") {
		res.ContextWindow = DefaultContextWindow
	}
	if res.CompactAt <= 0 || res.CompactAt > 1 {
		res.CompactAt = DefaultCompactAt
	}
	return res, nil
}

func (r *Registry) build(rt Route) (Provider, error) {
	key := rt.APIKey
	if key == "" && rt.APIKeyEnv != "" {
		key = r.env[rt.APIKeyEnv]
	}
	switch rt.Provider {
	case ProviderAnthropic:
		key = firstNonEmpty(key, r.env["ANTHROPIC_API_KEY"])
		if key == "" && r.env["ANTHROPIC_AUTH_TOKEN"] == "" {
			return nil, &NoAPIKeyError{Provider: "Anthropic", EnvVar: "ANTHROPIC_API_KEY", Pattern: rt.Pattern, KeyEnv: rt.APIKeyEnv}
		}
		return NewAnthropic(AnthropicConfig{
			APIKey: key, AuthToken: r.env["ANTHROPIC_AUTH_TOKEN"],
			BaseURL: firstNonEmpty(rt.BaseURL, r.env["ANTHROPIC_BASE_URL"]), HTTPClient: r.cfg.HTTPClient,
			IdempotencyHeader: rt.IdempotencyHeader,
		}), nil
	case ProviderOpenAI:
		return NewOpenAI(OpenAIConfig{
			APIKey:  firstNonEmpty(key, r.env["OPENAI_API_KEY"]),
			BaseURL: firstNonEmpty(rt.BaseURL, r.env["OPENAI_BASE_URL"]), HTTPClient: r.cfg.HTTPClient,
			IdempotencyHeader: rt.IdempotencyHeader,
		}), nil
	case ProviderScripted:
		return LoadScript(rt.File)
	}
	return nil, fmt.Errorf("%w: provider %q", ErrNoProvider, rt.Provider)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

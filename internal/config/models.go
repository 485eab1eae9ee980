package config

import (
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/model"
)

// Model providers a [models] entry may name.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderScripted  = "scripted"
)

// ModelConfig is one [models."<pattern>"] entry: the provider serving the
// models whose id equals pattern, or starts with it when pattern ends in
// "*" (e.g. [models."claude-*"]). Exact names win over prefixes, longer
// prefixes over shorter. With no entry, "claude-*" uses the anthropic
// provider with the SDK's environment (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL).
type ModelConfig struct {
	// Provider is "anthropic", "openai" or "scripted".
	Provider string `toml:"provider"`
	// BaseURL overrides the provider's endpoint (ANTHROPIC_BASE_URL for
	// anthropic; e.g. http://localhost:11434/v1 for Ollama).
	BaseURL string `toml:"base_url"`
	// APIKey overrides the provider's key (ANTHROPIC_API_KEY,
	// OPENAI_API_KEY). Prefer APIKeyEnv to keep keys out of the file.
	APIKey string `toml:"api_key"`
	// APIKeyEnv names an environment variable that holds the key.
	APIKeyEnv string `toml:"api_key_env"`
	// File is the script of the scripted provider (JSON or YAML).
	File string `toml:"file"`
	// Model, when set, is the model name sent to the provider instead of
	// the agent's model id.
	Model string `toml:"model"`
	// MaxTokens bounds one model response (default 8192).
	MaxTokens int64 `toml:"max_tokens"`
	// IdempotencyHeader names the request header an upstream in front of
	// the provider (a gateway, a proxy) dedupes requests on; every model
	// request then carries its op id there, the same id when recovery
	// resends a request a crash cut off. Neither the Messages API nor chat
	// completions document such a header, so it is empty (nothing sent)
	// unless the operator names one.
	IdempotencyHeader string `toml:"idempotency_header"`
	// ContextWindow is the model's context window in tokens. Default:
	// 200000 for claude-* models on the anthropic provider; for others
	// none, and a session's conversation is never compacted.
	ContextWindow int64 `toml:"context_window"`
	// CompactAt is the share of the context window a request may fill;
	// a longer conversation is compacted first (default 0.8).
	CompactAt float64 `toml:"compact_at"`
}

// validPattern says whether pattern is a model id or a prefix ending in
// "*" (not "*" alone).
func validPattern(pattern string) bool {
	return pattern != "" && pattern != "*" && strings.Count(pattern, "*") <= 1 &&
		(!strings.Contains(pattern, "*") || strings.HasSuffix(pattern, "*"))
}

// validateModels checks [models].
func (c *Config) validateModels() []error {
	var errs []error
	for pattern, m := range c.Models {
		f := func(k string) string { return fmt.Sprintf("models.%q.%s", pattern, k) }
		if !validPattern(pattern) {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("models.%q", pattern), Accepted: `a model id, or a prefix ending in "*" such as "claude-*"`, Reason: "bad pattern"})
		}
		switch m.Provider {
		case ProviderAnthropic, ProviderOpenAI:
		case ProviderScripted:
			if m.File == "" {
				errs = append(errs, &FieldError{Field: f("file"), Accepted: "the path of a JSON or YAML script", Reason: `required when provider = "scripted"`})
			}
		default:
			errs = append(errs, &FieldError{Field: f("provider"), Value: m.Provider, Accepted: `"anthropic", "openai" or "scripted"`, Reason: "unknown provider"})
		}
		if err := model.ValidIdempotencyHeader(m.IdempotencyHeader); err != nil {
			errs = append(errs, &FieldError{Field: f("idempotency_header"), Value: m.IdempotencyHeader, Accepted: "an HTTP header name, e.g. \"Idempotency-Key\"", Reason: err.Error()})
		} else if m.IdempotencyHeader != "" && m.Provider == ProviderScripted {
			errs = append(errs, &FieldError{Field: f("idempotency_header"), Value: m.IdempotencyHeader, Accepted: `empty for provider = "scripted"`, Reason: "the scripted provider makes no HTTP request"})
		}
		if m.MaxTokens < 0 {
			errs = append(errs, &FieldError{Field: f("max_tokens"), Value: fmt.Sprint(m.MaxTokens), Accepted: "0 (default) or a positive number", Reason: "negative"})
		}
		if m.ContextWindow < 0 {
			errs = append(errs, &FieldError{Field: f("context_window"), Value: fmt.Sprint(m.ContextWindow), Accepted: "0 (default) or a number of tokens", Reason: "negative"})
		} else if m.ContextWindow > 0 && m.MaxTokens >= m.ContextWindow {
			errs = append(errs, &FieldError{Field: f("context_window"), Value: fmt.Sprint(m.ContextWindow), Accepted: "more tokens than max_tokens", Reason: "a response must fit in the window"})
		}
		if m.CompactAt < 0 || m.CompactAt > 1 || (m.CompactAt > 0 && m.CompactAt < 0.1) {
			errs = append(errs, &FieldError{Field: f("compact_at"), Value: fmt.Sprint(m.CompactAt), Accepted: "0 (default 0.8) or a share of the window from 0.1 to 1", Reason: "out of range"})
		}
	}
	return errs
}

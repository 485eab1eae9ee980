package model

import (
	"errors"
	"fmt"
)

// APIError is a provider's HTTP error answer. Status lets callers tell an
// overloaded (529/503) or rate-limited (429) model from other failures.
type APIError struct {
	Provider string
	Status   int
	Message  string
	Err      error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s model request failed (HTTP %d): %s", e.Provider, e.Status, e.Message)
}

func (e *APIError) Unwrap() error { return e.Err }

// ErrorKind classifies err as the Managed Agents API's session.error type:
// model_overloaded_error, model_rate_limited_error or
// model_request_failed_error.
func ErrorKind(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case 429:
			return "model_rate_limited_error"
		case 529, 503:
			return "model_overloaded_error"
		}
	}
	return "model_request_failed_error"
}

// NoAPIKeyError is a hosted model's route with no credential: the daemon
// does not fall back to anything the operator did not set (the SDK's own
// credential chain would end in advice to run `ant auth login`, which is
// no help to a daemon). It is an ErrNoProvider.
type NoAPIKeyError struct {
	Provider string // "Anthropic"
	EnvVar   string // ANTHROPIC_API_KEY
	// Pattern is the [models."…"] entry that serves the model.
	Pattern string
	// KeyEnv is the route's api_key_env, when it names a variable that is
	// not set.
	KeyEnv string
}

func (e *NoAPIKeyError) Error() string {
	if e.KeyEnv != "" {
		return fmt.Sprintf("no %s API key: [models.%q] api_key_env names %s, which is not set in the daemon's environment; set it (or %s, or api_key) and restart the daemon",
			e.Provider, e.Pattern, e.KeyEnv, e.EnvVar)
	}
	return fmt.Sprintf("no %s API key: set %s in the daemon's environment, or api_key (or api_key_env) under [models.%q] in agentkernel.toml, and restart the daemon",
		e.Provider, e.EnvVar, e.Pattern)
}

// Is makes a missing key an ErrNoProvider: the model cannot be served as
// configured.
func (e *NoAPIKeyError) Is(target error) bool { return target == ErrNoProvider }

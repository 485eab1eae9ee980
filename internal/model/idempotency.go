package model

import (
	"fmt"
	"net/http"
	"strings"
)

// reservedHeaders are set by the providers themselves: a key sent in one
// of them would replace the credentials or the body's framing.
var reservedHeaders = []string{"Authorization", "X-Api-Key", "Content-Type", "Content-Length", "Accept",
	"Anthropic-Version", "Anthropic-Beta", "Host", "Transfer-Encoding", "Connection"}

// ValidIdempotencyHeader checks the name of an idempotency header: an
// HTTP field name (RFC 9110 token) that is none of the headers the
// providers set themselves. "" is valid: no key is sent.
func ValidIdempotencyHeader(name string) error {
	if name == "" {
		return nil
	}
	for _, c := range name {
		if !tokenChar(c) {
			return fmt.Errorf("%q is not an HTTP header name", name)
		}
	}
	canon := http.CanonicalHeaderKey(name)
	for _, r := range reservedHeaders {
		if canon == r {
			return fmt.Errorf("%q is a header the provider sets itself", name)
		}
	}
	if strings.HasPrefix(canon, "X-Stainless-") {
		return fmt.Errorf("%q is a header the provider's SDK sets itself", name)
	}
	return nil
}

func tokenChar(c rune) bool {
	return c < 0x7f && c > 0x20 && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
}

func checkIdempotencyHeader(r Route) error {
	if r.IdempotencyHeader == "" {
		return nil
	}
	if r.Provider == ProviderScripted {
		return fmt.Errorf("%w: models.%q.idempotency_header: the scripted provider makes no HTTP request", ErrNoProvider, r.Pattern)
	}
	if err := ValidIdempotencyHeader(r.IdempotencyHeader); err != nil {
		return fmt.Errorf("%w: models.%q.idempotency_header: %v", ErrNoProvider, r.Pattern, err)
	}
	return nil
}

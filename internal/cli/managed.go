package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel"
)

// managedClient is the official Anthropic SDK pointed at the daemon, with
// the same address and key discovery as the agentkernel SDK's client:
// flags > AGENTKERNEL_URL/AGENTKERNEL_API_KEY > $AGENTKERNEL_HOME/admin.key.
// The SDK's own environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, …) is
// ignored on purpose: those belong to the daemon's model provider, and
// sending a real Anthropic key to agentkernel would be wrong.
func (c *clientFlags) managedClient(m *Main) anthropic.Client {
	url := firstSet(c.url, m.getenv("AGENTKERNEL_URL"), agentkernel.DefaultURL)
	key := firstSet(c.apiKey, m.getenv("AGENTKERNEL_API_KEY"))
	if key == "" {
		home := firstSet(c.home, m.getenv("AGENTKERNEL_HOME"))
		if home == "" {
			if h, err := os.UserHomeDir(); err == nil {
				home = filepath.Join(h, ".local", "share", "agentkernel")
			}
		}
		if b, err := os.ReadFile(filepath.Join(home, "admin.key")); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	return anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		// No client timeout: `session tail` holds its stream open. API
		// calls never follow redirects (see agentkernel.Client).
		option.WithHTTPClient(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}),
		option.WithBaseURL(strings.TrimRight(url, "/")),
		option.WithAPIKey(key),
		// A retried create or send could act twice; the user retries.
		option.WithMaxRetries(0),
	)
}

// apiError turns an SDK error into the API's own message ("agent
// \"agent_x\" not found (HTTP 404)") instead of the SDK's request dump.
func apiError(err error) error {
	var e *anthropic.Error
	if !errors.As(err, &e) {
		return err
	}
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(e.RawJSON()), &env) != nil || env.Error.Message == "" {
		return fmt.Errorf("HTTP %d: %s", e.StatusCode, strings.TrimSpace(e.RawJSON()))
	}
	return fmt.Errorf("%s (HTTP %d %s)", env.Error.Message, e.StatusCode, env.Error.Type)
}

// printRaw prints an API object exactly as the daemon sent it, for
// scripts.
func printRaw(m *Main, raw string) error { return printJSON(m.Stdout, json.RawMessage(raw)) }

// printRawList prints API objects as one JSON array.
func printRawList(m *Main, raws []string) error {
	list := make([]json.RawMessage, 0, len(raws))
	for _, r := range raws {
		list = append(list, json.RawMessage(r))
	}
	return printJSON(m.Stdout, list)
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

package model_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestIdempotencyHeaderCarriesTheOpID: a route with idempotency_header
// sends the request's op id in that header, on the provider's real wire
// format, and the same op again (a resend after recovery) with the same
// key; a route without one sends no key at all (the SDKs add none).
func TestIdempotencyHeaderCarriesTheOpID(t *testing.T) {
	const header = "X-Gateway-Idempotency"
	ant := anthropictest.New(t, func(anthropictest.Request) anthropictest.Turn { return anthropictest.Turn{Text: "ok"} })
	oai, oaiGot := fakeChat(t, []string{`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`})
	for _, c := range []struct {
		provider, url string
		sent          func() []http.Header
	}{
		{model.ProviderAnthropic, ant.URL, func() []http.Header {
			var out []http.Header
			for _, r := range ant.Requests() {
				out = append(out, r.Header)
			}
			return out
		}},
		{model.ProviderOpenAI, oai.URL + "/v1", func() []http.Header {
			var out []http.Header
			for _, b := range *oaiGot {
				out = append(out, b["_header"].(http.Header))
			}
			return out
		}},
	} {
		t.Run(c.provider, func(t *testing.T) {
			reg, err := model.NewRegistry(model.RegistryConfig{Environ: []string{}, Routes: []model.Route{
				{Pattern: "keyed", Provider: c.provider, BaseURL: c.url, APIKey: "k", IdempotencyHeader: header},
				{Pattern: "plain", Provider: c.provider, BaseURL: c.url, APIKey: "k"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			call := func(modelID, key string) {
				t.Helper()
				p, err := reg.Resolve(modelID)
				if err != nil {
					t.Fatal(err)
				}
				req := &model.Request{Model: p.Model, Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}}},
					IdempotencyKey: key}
				if _, err := p.Provider.Stream(context.Background(), req, nil); err != nil {
					t.Fatal(err)
				}
			}
			call("keyed", "op_1111")
			call("keyed", "op_1111") // the resend of the same op
			call("keyed", "op_2222")
			call("plain", "op_3333")
			got := c.sent()
			if len(got) != 4 {
				t.Fatalf("%d requests, want 4", len(got))
			}
			for i, want := range []string{"op_1111", "op_1111", "op_2222", ""} {
				if v := got[i].Get(header); v != want {
					t.Errorf("request %d: %s = %q, want %q", i, header, v, want)
				}
			}
			for k := range got[3] {
				if v := got[3].Get(k); v == "op_3333" {
					t.Errorf("a route without idempotency_header sent the op id in %s", k)
				}
			}
		})
	}
}

func TestIdempotencyHeaderRefused(t *testing.T) {
	for _, c := range []struct{ provider, header string }{
		{model.ProviderAnthropic, "Idempotency Key"},
		{model.ProviderOpenAI, "Authorization"},
		{model.ProviderAnthropic, "x-api-key"},
		{model.ProviderScripted, "Idempotency-Key"},
	} {
		_, err := model.NewRegistry(model.RegistryConfig{Environ: []string{}, Routes: []model.Route{
			{Pattern: "m", Provider: c.provider, File: "x.yaml", IdempotencyHeader: c.header}}})
		if !errors.Is(err, model.ErrNoProvider) {
			t.Errorf("%s with idempotency_header %q: %v, want a refusal", c.provider, c.header, err)
		}
	}
	if err := model.ValidIdempotencyHeader("Idempotency-Key"); err != nil {
		t.Fatal(fmt.Errorf("Idempotency-Key refused: %w", err))
	}
}

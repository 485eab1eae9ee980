package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
)

func TestRegistryResolution(t *testing.T) {
	r, err := model.NewRegistry(model.RegistryConfig{Environ: []string{}, Routes: []model.Route{
		{Pattern: "llama*", Provider: model.ProviderOpenAI, BaseURL: "http://localhost:11434/v1"},
		{Pattern: "llama3-special", Provider: model.ProviderAnthropic},
		{Pattern: "llama3*", Provider: model.ProviderOpenAI, Model: "llama3:8b", MaxTokens: 99},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"llama3-special": "llama3-special", // exact beats prefix
		"llama3-x":       "llama3*",        // longer prefix wins
		"llama2":         "llama*",
		"claude-opus-4":  "claude-*", // built-in default
	}
	for id, want := range cases {
		rt, ok := r.Match(id)
		if !ok || rt.Pattern != want {
			t.Errorf("Match(%q) = %q, want %q", id, rt.Pattern, want)
		}
	}
	res, err := r.Resolve("llama3-x")
	if err != nil || res.Model != "llama3:8b" || res.MaxTokens != 99 {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	if _, err := r.Resolve("gpt-unknown"); !errors.Is(err, model.ErrNoProvider) || !strings.Contains(err.Error(), `[models."gpt-unknown"]`) {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := model.NewRegistry(model.RegistryConfig{Routes: []model.Route{{Pattern: "x", Provider: "bogus"}}}); err == nil {
		t.Fatal("bogus provider accepted")
	}
}

package model

import "testing"

func TestPriceLookup(t *testing.T) {
	l := NewPriceList(map[string]Price{
		"claude-*":    {Input: 2, Output: 10},
		"house-*":     {Input: 1, Output: 2},
		"house-large": {Input: 4, Output: 8},
		"house-l*":    {Input: 3, Output: 6},
	})
	cases := []struct {
		model  string
		input  float64
		source string
		ok     bool
	}{
		// An exact id wins over prefixes, a longer prefix over a shorter.
		{"house-large", 4, `[prices."house-large"] in agentkernel.toml`, true},
		{"house-lite", 3, `[prices."house-l*"] in agentkernel.toml`, true},
		{"house-small", 1, `[prices."house-*"] in agentkernel.toml`, true},
		// A configured prefix wins over a longer built-in one.
		{"claude-sonnet-4-5", 2, `[prices."claude-*"] in agentkernel.toml`, true},
		{"gpt-5", 0, "", false},
	}
	for _, c := range cases {
		p, ok := l.Lookup(c.model)
		if ok != c.ok || p.Input != c.input || p.Source != c.source {
			t.Errorf("%s: %+v %v, want input %v from %s", c.model, p, ok, c.input, c.source)
		}
	}

	// With nothing configured, the built-in list prices Claude models.
	b := NewPriceList(nil)
	for model, want := range map[string]Price{
		"claude-opus-4-5-20251101":  {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
		"claude-opus-4-1":           {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
		"claude-opus-4-20250514":    {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
		"claude-sonnet-4-5":         {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
		"claude-haiku-4-5-20251001": {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
		"claude-3-5-haiku-latest":   {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	} {
		p, ok := b.Lookup(model)
		p.Source = ""
		if !ok || p != want {
			t.Errorf("built-in %s: %+v %v, want %+v", model, p, ok, want)
		}
	}
	if p, ok := b.Lookup("claude-opus-9"); ok {
		t.Errorf("an unlisted Claude model has a price: %+v", p)
	}
}

func TestPriceCost(t *testing.T) {
	p := Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	u := Usage{InputTokens: 1000, OutputTokens: 200, CacheReadInputTokens: 10000, CacheCreationInputTokens: 2000}
	// 0.003 + 0.003 + 0.003 + 0.0075
	if got := p.Cost(u); got < 0.0164999 || got > 0.0165001 {
		t.Fatalf("cost %v, want 0.0165", got)
	}
}

package model

// Price is what a model's tokens cost, in USD per million tokens.
type Price struct {
	Input  float64
	Output float64
	// CacheRead is a prompt-cache hit; CacheWrite a 5-minute cache write
	// (agentkernel marks its cache breakpoints ephemeral with the default
	// 5-minute TTL, so it makes no 1-hour writes).
	CacheRead  float64
	CacheWrite float64
	// Source says where the price comes from, for a reader: the [prices]
	// entry or the built-in list, and its pattern.
	Source string
}

// Cost is what usage costs at p, in USD.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadInputTokens)*p.CacheRead + float64(u.CacheCreationInputTokens)*p.CacheWrite) / 1e6
}

// BuiltinPricesAsOf dates BuiltinPrices.
const BuiltinPricesAsOf = "2025-11-24"

// BuiltinPrices are Anthropic's published list prices of Claude models
// (https://docs.claude.com/en/docs/about-claude/pricing) as of
// BuiltinPricesAsOf, the release of Claude Opus 4.5: input, output, cache
// read, 5-minute cache write. [prices."<pattern>"] in agentkernel.toml
// overrides them and prices models that are not here (newer ones, other
// providers). Sonnet 4 and 4.5 are at the rate of prompts up to 200K
// tokens (a longer prompt, possible only with the 1M-context beta, costs
// more). Batch and regional prices do not apply: agentkernel sends
// neither.
var BuiltinPrices = map[string]Price{
	"claude-opus-4-5*":         {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-1*":         {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-0*":         {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-20250514":   {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-sonnet-4-5*":       {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-sonnet-4-0*":       {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-sonnet-4-20250514": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-3-7-sonnet*":       {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-haiku-4-5*":        {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	"claude-3-5-haiku*":        {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	"claude-3-haiku*":          {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.3},
}

// PriceList finds a model's price by its id.
type PriceList struct {
	configured, builtin []pricePattern
}

type pricePattern struct {
	pattern string
	price   Price
}

// NewPriceList is configured (by pattern, as [prices] reads them) over
// BuiltinPrices: a configured pattern that matches wins over every
// built-in one, so an operator's [prices."claude-*"] prices every Claude
// model. Patterns are validated by the config.
func NewPriceList(configured map[string]Price) *PriceList {
	l := &PriceList{}
	for pat, p := range configured {
		p.Source = `[prices."` + pat + `"] in agentkernel.toml`
		l.configured = append(l.configured, pricePattern{pat, p})
	}
	for pat, p := range BuiltinPrices {
		p.Source = "the built-in list (" + pat + ", as of " + BuiltinPricesAsOf + ")"
		l.builtin = append(l.builtin, pricePattern{pat, p})
	}
	key := func(p pricePattern) string { return p.pattern }
	sortPatterns(l.configured, key)
	sortPatterns(l.builtin, key)
	return l
}

// Lookup returns modelID's price; false when nothing prices it (its cost
// is unknown, not zero).
func (l *PriceList) Lookup(modelID string) (Price, bool) {
	for _, list := range [][]pricePattern{l.configured, l.builtin} {
		for _, pp := range list {
			if matchPattern(pp.pattern, modelID) {
				return pp.price, true
			}
		}
	}
	return Price{}, false
}

package config

import (
	"fmt"
	"math"
)

// PriceConfig is one [prices."<pattern>"] entry: what the models whose id
// the pattern matches cost, in USD per million tokens. Patterns match as
// [models] patterns do (an exact id, or a prefix ending in "*"; exact
// wins, then the longest prefix), and any entry here wins over the
// built-in list of Claude prices (model.BuiltinPrices). The web console
// shows sessions' cost with them; a model nothing prices has no cost
// shown. Prices are not a [models] key: pricing a model must not require
// naming its provider, and one route often serves models of several
// prices.
type PriceConfig struct {
	// InputPerMTok and OutputPerMTok are required.
	InputPerMTok  *float64 `toml:"input_per_mtok"`
	OutputPerMTok *float64 `toml:"output_per_mtok"`
	// CacheReadPerMTok is a prompt-cache hit (default 0.1 × input, as
	// Anthropic prices them).
	CacheReadPerMTok *float64 `toml:"cache_read_per_mtok"`
	// CacheWritePerMTok is a 5-minute prompt-cache write (default 1.25 ×
	// input, as Anthropic prices them).
	CacheWritePerMTok *float64 `toml:"cache_write_per_mtok"`
}

// Rates are the entry's four prices with the defaults applied: input,
// output, cache read, cache write.
func (p PriceConfig) Rates() (input, output, cacheRead, cacheWrite float64) {
	val := func(f *float64, def float64) float64 {
		if f == nil {
			return def
		}
		return *f
	}
	input, output = val(p.InputPerMTok, 0), val(p.OutputPerMTok, 0)
	return input, output, val(p.CacheReadPerMTok, 0.1*input), val(p.CacheWritePerMTok, 1.25*input)
}

// validatePrices checks [prices].
func (c *Config) validatePrices() []error {
	var errs []error
	for pattern, p := range c.Prices {
		if !validPattern(pattern) {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("prices.%q", pattern), Accepted: `a model id, or a prefix ending in "*" such as "claude-*"`, Reason: "bad pattern"})
		}
		for _, f := range []struct {
			key      string
			v        *float64
			required bool
		}{{"input_per_mtok", p.InputPerMTok, true}, {"output_per_mtok", p.OutputPerMTok, true},
			{"cache_read_per_mtok", p.CacheReadPerMTok, false}, {"cache_write_per_mtok", p.CacheWritePerMTok, false}} {
			field := fmt.Sprintf("prices.%q.%s", pattern, f.key)
			switch {
			case f.v == nil && f.required:
				errs = append(errs, &FieldError{Field: field, Accepted: "USD per million tokens, e.g. 3", Reason: "required"})
			case f.v == nil:
			case math.IsNaN(*f.v) || math.IsInf(*f.v, 0) || *f.v < 0:
				errs = append(errs, &FieldError{Field: field, Value: fmt.Sprint(*f.v), Accepted: "USD per million tokens: 0 or more", Reason: "not a price"})
			}
		}
	}
	return errs
}

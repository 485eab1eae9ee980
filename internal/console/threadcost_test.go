package console

import "testing"

// TestCostWithThreads: the session's cost with its threads' is their sum
// when every part has a price, a floor ("≥") when one has none or not
// every thread was counted, and nothing when there are no threads.
func TestCostWithThreads(t *testing.T) {
	priced := func(usd float64) costView { return costView{Known: true, USD: usd, Text: usdText(usd)} }
	threads := func(cs ...costView) sessionThreads {
		var s sessionThreads
		for _, c := range cs {
			s.All = append(s.All, threadJSON{Cost: c})
		}
		return s
	}
	partial := threads(priced(0.001))
	partial.Partial = true
	for name, c := range map[string]struct {
		own     costView
		threads sessionThreads
		want    string
		known   bool
	}{
		"no threads":        {priced(0.5), threads(), "", false},
		"all priced":        {priced(0.009), threads(priced(0.0015), priced(0.0005)), "$0.0110", true},
		"a thread unpriced": {priced(0.009), threads(priced(0.0015), costView{}), "≥ $0.0105", true},
		"the session's own": {costView{}, threads(priced(0.0015)), "≥ $0.0015", true},
		"more than counted": {priced(0.009), partial, "≥ $0.0100", true},
	} {
		got := c.threads.total(c.own)
		if got.Text != c.want || got.Known != c.known {
			t.Errorf("%s: %q (known %v), want %q (known %v)", name, got.Text, got.Known, c.want, c.known)
		}
	}
}

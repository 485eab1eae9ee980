package console

import (
	"fmt"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/model"
)

// A session's cost: its usage at its agent's model's price
// (Options.Price, the daemon's [prices] over the built-in Claude list).
//
// The usage priced is the session's own, as the API reports it: every
// model request of its primary thread (its turns, compaction summaries
// and outcome grading, all made with the session agent's model). A
// multi-agent session's threads are sessions of their own whose usage is
// not added to the session's, so their tokens are in neither its usage
// nor its cost, whatever model they run.

// sessionUsageJSON is a session's cumulative usage in the SDK's shape,
// its cache writes by TTL. agentkernel's cache breakpoints use the
// default 5-minute TTL, so it records no 1-hour writes.
type sessionUsageJSON struct {
	InputTokens          int64 `json:"input_tokens"`
	OutputTokens         int64 `json:"output_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
	CacheCreation        struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	} `json:"cache_creation"`
}

// costView is a cost as a page shows it: Text when the model has a price,
// else a dash whose Title says why.
type costView struct {
	Known bool
	Text  string
	Title string
	// USD is the cost, when Known.
	USD float64
}

// cost is what usage costs at model id's price: a session's, or a
// thread's (which runs its own agent's model).
func (c *Console) cost(id string, u sessionUsageJSON) costView {
	var p model.Price
	ok := false
	if c.o.Price != nil {
		p, ok = c.o.Price(id)
	}
	if !ok {
		return costView{Title: fmt.Sprintf("No price is set for model %q; [prices.%q] in agentkernel.toml sets one.", id, id)}
	}
	usd := p.Cost(model.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreation.Ephemeral5m})
	return costView{Known: true, USD: usd, Text: usdText(usd), Title: fmt.Sprintf(
		"%s priced from %s: %s input, %s output, %s cache read, %s cache write per million tokens.",
		id, p.Source, usdRate(p.Input), usdRate(p.Output), usdRate(p.CacheRead), usdRate(p.CacheWrite))}
}

// usdText is an amount of dollars to four decimals, enough to tell small
// sessions apart ($0.0123); cents from a dollar on. Less than a hundredth
// of a cent is not shown as nothing.
func usdText(usd float64) string {
	switch {
	case usd == 0:
		return "$0"
	case usd < 0.00005:
		return "< $0.0001"
	case usd < 1:
		return fmt.Sprintf("$%.4f", usd)
	default:
		return fmt.Sprintf("$%.2f", usd)
	}
}

// usdRate is a price per million tokens as written ($3, $0.3, $18.75).
func usdRate(usd float64) string {
	return "$" + strconv.FormatFloat(usd, 'f', -1, 64)
}

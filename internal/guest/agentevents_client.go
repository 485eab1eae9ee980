package guest

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PullAgentEvents acknowledges every agent event up to after and returns
// the next ones, waiting up to wait for one to arrive (long-poll).
func (c *Client) PullAgentEvents(ctx context.Context, after int64, wait time.Duration) ([]AgentEvent, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	var b AgentEventBatch
	if err := c.call(ctx, http.MethodGet, "/agent-events", q, nil, &b); err != nil {
		return nil, err
	}
	return b.Events, nil
}

// PostAgentEvents posts events as the agent inside the sandbox would
// (tests, and the agent CLI through a client on the in-sandbox socket).
func (c *Client) PostAgentEvents(ctx context.Context, evs []AgentEvent) (int64, error) {
	var out struct {
		Seq int64 `json:"seq"`
	}
	var body any = AgentEventBatch{Events: evs}
	if len(evs) == 1 {
		body = evs[0]
	}
	if err := c.call(ctx, http.MethodPost, "/agent-events", nil, body, &out); err != nil {
		return 0, err
	}
	return out.Seq, nil
}

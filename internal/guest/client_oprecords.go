package guest

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ErrOpExists matches (errors.Is) the guest's answer to an exec whose op
// id was accepted before: the *Error's Op has the op's state.
var ErrOpExists = errors.New("op already accepted")

// Op returns the state of a journalled exec: unknown (never accepted),
// running, finished (with its result) or accepted_gone (ambiguous: it died
// with an earlier guest).
func (c *Client) Op(ctx context.Context, opID string) (*OpStatus, error) {
	return c.WaitOp(ctx, opID, 0)
}

// WaitOp is Op, but waits up to wait (at most 5 minutes) for a running op
// to end before answering: recovery's way to reattach to it.
func (c *Client) WaitOp(ctx context.Context, opID string, wait time.Duration) (*OpStatus, error) {
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait_ms": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	}
	var st OpStatus
	if err := c.call(ctx, http.MethodGet, "/ops/"+url.PathEscape(opID), q, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

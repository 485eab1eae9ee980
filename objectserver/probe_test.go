package objectserver_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/objectserver"
	"github.com/agentkernel/agentkernel/objectserver/objectservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newProbe is the Go implementation of objectservertest.Probe's server.
func newProbe() *objectserver.Server {
	s := objectserver.New()
	s.Method("echo", func(c *objectserver.Call) (any, error) {
		var alarm any
		if a := c.Alarm; a != nil {
			alarm = map[string]any{"id": a.ID, "retry_count": a.RetryCount, "is_retry": a.IsRetry}
		}
		var args any
		if err := c.Args(&args); err != nil {
			return nil, err
		}
		return map[string]any{"method": c.Method, "class": c.Class, "id": c.ID, "mode": c.Mode, "args": args, "alarm": alarm}, nil
	})
	s.Method("apply", func(c *objectserver.Call) (any, error) {
		var args struct {
			Ops []struct {
				Put    *string `json:"put"`
				Value  any     `json:"value"`
				Delete *string `json:"delete"`
			} `json:"ops"`
			Fail *objectserver.Error `json:"fail"`
		}
		if err := c.Args(&args); err != nil {
			return nil, err
		}
		for _, op := range args.Ops {
			var err error
			if op.Put != nil {
				err = c.Storage().Put(*op.Put, op.Value)
			} else if op.Delete != nil {
				err = c.Storage().Delete(*op.Delete)
			}
			if err != nil {
				return nil, err
			}
		}
		if args.Fail != nil {
			// Wrapped, to show the status is found through the chain.
			return nil, fmt.Errorf("apply: %w", *args.Fail)
		}
		return map[string]any{"keys": c.Storage().Keys()}, nil
	})
	s.Method("boom", func(c *objectserver.Call) (any, error) {
		return nil, errors.New("boom")
	})
	return s
}

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(newProbe())
	defer srv.Close()
	objectservertest.Probe(t, srv.URL)
}

package objectserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
)

// Call is one method invocation: who it is for, its args, and the object's
// storage.
type Call struct {
	// Method is the name the call was dispatched by.
	Method string
	// Class and ID identify the object (from the daemon's headers).
	Class string
	ID    string
	// Mode is ModeSnapshot or ModeWriteThrough.
	Mode string
	// Alarm is set when an alarm fired this call, nil otherwise.
	Alarm *Alarm

	ctx     context.Context
	header  http.Header
	args    json.RawMessage
	storage *Storage
}

// Alarm describes the alarm that fired a call.
type Alarm struct {
	ID string
	// RetryCount is 0 on the first attempt, then 1, 2, … on retries.
	RetryCount int
	IsRetry    bool
}

func newCall(r *http.Request, method string, args json.RawMessage, st *Storage) *Call {
	c := &Call{
		Method:  method,
		Class:   r.Header.Get(HeaderObjectClass),
		ID:      r.Header.Get(HeaderObjectID),
		Mode:    ModeSnapshot,
		ctx:     r.Context(),
		header:  r.Header,
		args:    args,
		storage: st,
	}
	if r.Header.Get(HeaderStorageMode) == ModeWriteThrough {
		c.Mode = ModeWriteThrough
	}
	if id := r.Header.Get(HeaderAlarmID); id != "" {
		n, _ := strconv.Atoi(r.Header.Get(HeaderAlarmRetryCount))
		c.Alarm = &Alarm{ID: id, RetryCount: n, IsRetry: r.Header.Get(HeaderAlarmIsRetry) == "true"}
	}
	return c
}

// Args decodes the call's args into v. Absent args are JSON null, which
// leaves v untouched. A decoding failure is a 400 *Error, so a handler can
// return it as is.
func (c *Call) Args(v any) error {
	if err := json.Unmarshal(c.args, v); err != nil {
		return Errorf(http.StatusBadRequest, "args: %v", err)
	}
	return nil
}

// RawArgs returns the call's args as sent (null when absent).
func (c *Call) RawArgs() json.RawMessage { return c.args }

// Storage returns the object's storage.
func (c *Call) Storage() *Storage { return c.storage }

// Context is cancelled when the daemon gives up on the call.
func (c *Call) Context() context.Context { return c.ctx }

// Header returns the request's headers, for anything not surfaced above.
func (c *Call) Header() http.Header { return c.header }

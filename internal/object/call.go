package object

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

var (
	methodRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)
	idRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$`)
)

// ValidateMethod checks a method name: it becomes the path of the request
// to the object's server, and names starting with "__" are the protocol's.
func ValidateMethod(m string) error {
	if !methodRE.MatchString(m) || len(m) >= 2 && m[:2] == "__" {
		return &FieldError{"method", fmt.Sprintf("%q is not a method name: 1-128 of A-Z, a-z, 0-9, '_', '.', '-', starting with a letter or '_', and not starting with \"__\"", m)}
	}
	return nil
}

// ValidateID checks an object id (it is part of the sandbox's name).
func ValidateID(id string) error {
	if !idRE.MatchString(id) {
		return &FieldError{"id", fmt.Sprintf("%q is not an object id: 1-200 of A-Z, a-z, 0-9, '_', '.', ':', '@', '-', starting with a letter or digit", id)}
	}
	return nil
}

// CallParams is one method call.
type CallParams struct {
	TenantID string
	Class    string
	ID       string
	Method   string
	Args     json.RawMessage
	// Alarm is set for calls made by the alarm poller.
	Alarm *AlarmCall
}

// Call delivers a method call to an object, creating and waking it on
// demand, one call at a time in arrival order (max_concurrency allows more).
// A non-2xx answer of the object is an *ObjectError.
func (r *Runtime) Call(ctx context.Context, p CallParams) (json.RawMessage, error) {
	if err := ValidateMethod(p.Method); err != nil {
		return nil, err
	}
	if err := ValidateID(p.ID); err != nil {
		return nil, err
	}
	if len(p.Args) > MaxArgsBytes {
		return nil, &LimitError{Limit: "args (1 MB)", Max: MaxArgsBytes, Got: int64(len(p.Args)), What: "size of args in bytes", TooLarge: true}
	}
	if len(p.Args) > 0 && !json.Valid(p.Args) {
		return nil, &FieldError{"args", "is not valid JSON"}
	}
	cls, err := r.Class(ctx, p.TenantID, p.Class)
	if err != nil {
		return nil, err
	}
	key := store.ObjectKey{TenantID: p.TenantID, Class: p.Class, ID: p.ID}
	for {
		a := r.actor(key, cls)
		if err := a.gate.acquire(ctx, 1); err != nil {
			return nil, err
		}
		res, err := r.callHeld(ctx, a, cls, p)
		a.gate.release(1)
		if errors.Is(err, errActorGone) {
			continue
		}
		return res, err
	}
}

func (r *Runtime) callHeld(ctx context.Context, a *actor, cls *Class, p CallParams) (json.RawMessage, error) {
	sbID, err := r.activate(ctx, a, cls)
	if err != nil {
		return nil, err
	}
	a.lastCall.Store(r.clock.Now().UnixNano())
	r.metrics.calls.WithLabelValues(cls.Name, p.Method).Inc()
	cctx, cancel := context.WithTimeoutCause(ctx, r.lim.CallTimeout.D(), ErrCallTimeout)
	defer cancel()
	var ans *answer
	if sh := a.shared.Load(); sh != nil {
		// A shared server: the object's storage is injected first if the
		// server does not hold it (serveShared).
		a.life.Lock()
		force := a.resync && cls.StorageMode == ModeWriteThrough
		a.life.Unlock()
		err = r.serveShared(cctx, a, sh, cls, force, func(hc *http.Client) error {
			var err error
			ans, err = invoke(cctx, hc, cls, a.key, p.Method, p.Args, p.Alarm)
			return err
		})
		if err == nil && force {
			a.life.Lock()
			a.resync, a.sizes = false, nil
			a.life.Unlock()
		}
	} else {
		err = r.sbx.Client(cctx, p.TenantID, sbID, func(c *guest.Client) error {
			hc := c.ObjectClient()
			var err error
			ans, err = invoke(cctx, hc, cls, a.key, p.Method, p.Args, p.Alarm)
			if errors.Is(err, errNotListening) {
				// The server died but the sandbox lives: the method never ran,
				// so start the server again (from the persisted storage) and
				// deliver the call once more.
				r.log.WarnContext(ctx, "object server not listening; restarting it", "object", subject(a.key))
				app, serr := r.hasApp(cctx, cls, a.key, sbID)
				if serr == nil {
					serr = r.startServer(cctx, c, cls, a.key, p.TenantID, app, false)
				}
				if serr != nil {
					return unavailableErr(serr, "restart the server of %s", subject(a.key))
				}
				// Not ":=": the answer of this delivery is the call's.
				ans, err = invoke(cctx, hc, cls, a.key, p.Method, p.Args, p.Alarm)
			}
			return err
		})
	}
	a.lastCall.Store(r.clock.Now().UnixNano())
	if err != nil {
		if cctx.Err() != nil && errors.Is(context.Cause(cctx), ErrCallTimeout) && ctx.Err() == nil {
			r.markResync(a)
			return nil, fmt.Errorf("%w: %s.%s ran past call_timeout (%s, durable_objects.call_timeout)", ErrCallTimeout, subject(a.key), p.Method, r.lim.CallTimeout.D())
		}
		if ctx.Err() != nil {
			r.markResync(a)
			return nil, ctx.Err()
		}
		if errors.Is(err, sandbox.ErrDestroyed) || errors.Is(err, store.ErrNotFound) {
			// Someone destroyed the sandbox under the object: the next call
			// wakes it in a new one, from the persisted storage.
			a.life.Lock()
			r.setState(a, stateHibernating)
			sh := a.shared.Swap(nil)
			a.life.Unlock()
			if sh != nil {
				r.dropShared(sh)
				r.leave(ctx, a, sh)
			}
		}
		// The connection may have broken after the server ran the method
		// (it is never delivered again: the caller gets the error): its
		// memory may hold writes the store never saw.
		r.markResync(a)
		return nil, r.sandboxErr(a, err)
	}
	if cls.StorageMode == ModeWriteThrough && len(ans.writes) > 0 {
		if err := r.writeThrough(ctx, a, ans.writes); err != nil {
			r.markResync(a)
			return nil, err
		}
	}
	if ans.status/100 != 2 {
		return nil, &ObjectError{Status: ans.status, Body: ans.body, ContentType: ans.contentType}
	}
	return ans.body, nil
}

// markResync: the server may hold writes the store refused or never saw.
func (r *Runtime) markResync(a *actor) {
	a.life.Lock()
	a.resync = true
	a.life.Unlock()
}

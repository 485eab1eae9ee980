package object

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// AlarmRetryDelays are the waits before each retry of a failed alarm
// (seed 002: "exponential backoff (1s, 2s, 4s)"). Our reading of "up to 3
// attempts ... After 3 failures": the first delivery plus three retries,
// one after each listed delay; when the third retry fails the alarm is
// marked fired and an AlarmFailed record is written.
var AlarmRetryDelays = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// SetAlarmParams schedules a method call.
type SetAlarmParams struct {
	Key    store.ObjectKey
	Method string
	Args   json.RawMessage
	FireAt time.Time
}

// SetAlarm schedules a call, replacing the pending alarm for the same
// (object, method). The object is created if it does not exist yet.
func (r *Runtime) SetAlarm(ctx context.Context, p SetAlarmParams) (*store.Alarm, error) {
	if err := ValidateMethod(p.Method); err != nil {
		return nil, err
	}
	if err := ValidateID(p.Key.ID); err != nil {
		return nil, err
	}
	if len(p.Args) > MaxArgsBytes {
		return nil, &LimitError{Limit: "args (1 MB)", Max: MaxArgsBytes, Got: int64(len(p.Args)), What: "size of args in bytes", TooLarge: true}
	}
	if len(p.Args) > 0 && !json.Valid(p.Args) {
		return nil, &FieldError{"args", "is not valid JSON"}
	}
	cls, err := r.Class(ctx, p.Key.TenantID, p.Key.Class)
	if err != nil {
		return nil, err
	}
	if _, err := r.st.GetObject(ctx, p.Key); errors.Is(err, store.ErrNotFound) {
		if err := r.ensureExists(ctx, p.Key, cls); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	pending, err := r.st.ListAlarms(ctx, p.Key)
	if err != nil {
		return nil, err
	}
	var n int64
	replaces := false
	for _, a := range pending {
		if !a.Fired {
			n++
			replaces = replaces || a.Method == p.Method
		}
	}
	if !replaces && n >= r.lim.MaxAlarms {
		return nil, &LimitError{Limit: "durable_objects.max_alarms", Max: r.lim.MaxAlarms, Got: n + 1, What: "pending alarms of " + subject(p.Key)}
	}
	return r.st.SetAlarm(ctx, &store.Alarm{ID: ids.New("alm"), ObjectKey: p.Key, Method: p.Method, Args: p.Args, FireAt: p.FireAt.UTC()})
}

// ensureExists creates an object by activating it (alarms belong to an
// object row).
func (r *Runtime) ensureExists(ctx context.Context, key store.ObjectKey, cls *Class) error {
	for {
		a := r.actor(key, cls)
		if err := a.gate.acquire(ctx, 1); err != nil {
			return err
		}
		_, err := r.activate(ctx, a, cls)
		if err == nil {
			a.lastCall.Store(r.clock.Now().UnixNano())
		}
		a.gate.release(1)
		if !errors.Is(err, errActorGone) {
			return err
		}
	}
}

// Alarms lists an object's alarms (pending and fired).
func (r *Runtime) Alarms(ctx context.Context, key store.ObjectKey) ([]*store.Alarm, error) {
	if _, err := r.st.GetObject(ctx, key); err != nil {
		return nil, err
	}
	return r.st.ListAlarms(ctx, key)
}

// DeleteAlarm removes one of an object's alarms.
func (r *Runtime) DeleteAlarm(ctx context.Context, key store.ObjectKey, id string) error {
	a, err := r.st.GetAlarm(ctx, id)
	if err != nil {
		return err
	}
	if a.ObjectKey != key {
		return fmt.Errorf("alarm %s: %w", id, store.ErrNotFound)
	}
	return r.st.DeleteAlarm(ctx, id)
}

// AlarmReport says how one alarm attempt went (a test signal).
type AlarmReport struct {
	Alarm   *store.Alarm
	Attempt int64 // 0 = first delivery
	Err     error
	// Final: the alarm is now fired (delivered, or failed for good).
	Final bool
}

const alarmBatch = 100

// alarmPass fires every due alarm that is not already being fired.
func (r *Runtime) alarmPass(ctx context.Context) {
	due, err := r.st.DueAlarms(ctx, r.clock.Now(), alarmBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "object: due alarms", "err", err)
		}
		return
	}
	for _, al := range due {
		if !r.owns(ctx, al.ObjectKey) {
			continue // its owner fires it
		}
		if _, busy := r.firing.LoadOrStore(al.ID, true); busy {
			continue
		}
		r.alarmsWG.Add(1)
		go func(al *store.Alarm) {
			defer r.alarmsWG.Done()
			defer r.firing.Delete(al.ID)
			r.fire(r.ctx, al)
		}(al)
	}
}

// fire delivers an alarm through the normal call path, at least once: it
// is marked fired only after a success, or after the last retry failed.
// Attempts are persisted, so a restart continues the retry count.
func (r *Runtime) fire(ctx context.Context, al *store.Alarm) {
	attempt := al.Attempts
	for {
		_, err := r.Call(ctx, CallParams{TenantID: al.TenantID, Class: al.Class, ID: al.ObjectKey.ID, Method: al.Method, Args: al.Args,
			Alarm: &AlarmCall{ID: al.ID, RetryCount: attempt}})
		if ctx.Err() != nil {
			return // shutting down: the alarm stays due and fires after restart
		}
		if err == nil {
			r.failpoint(FailAfterAlarmDelivery)
			if merr := r.st.MarkAlarmFired(ctx, al.ID, ""); merr != nil && !errors.Is(merr, store.ErrNotFound) {
				r.log.WarnContext(ctx, "object: mark alarm fired", "alarm", al.ID, "err", merr)
			}
			r.alarmDone(ctx, AlarmReport{Alarm: al, Attempt: attempt, Final: true})
			return
		}
		up, rerr := r.st.RecordAlarmAttempt(ctx, al.ID, err.Error())
		if errors.Is(rerr, store.ErrNotFound) {
			return // deleted or replaced meanwhile
		}
		if rerr != nil {
			r.log.WarnContext(ctx, "object: record alarm attempt", "alarm", al.ID, "err", rerr)
			return // still due: the next pass tries again
		}
		attempt = up.Attempts
		if attempt > int64(len(AlarmRetryDelays)) {
			if merr := r.st.MarkAlarmFired(ctx, al.ID, err.Error()); merr != nil && !errors.Is(merr, store.ErrNotFound) {
				r.log.WarnContext(ctx, "object: mark failed alarm fired", "alarm", al.ID, "err", merr)
				return
			}
			r.audit(ctx, al.ObjectKey, "AlarmFailed", map[string]any{"alarm_id": al.ID, "method": al.Method, "attempts": attempt, "error": err.Error()})
			r.log.WarnContext(ctx, "alarm failed for good", "alarm", al.ID, "object", subject(al.ObjectKey), "attempts", attempt, "err", err)
			r.alarmDone(ctx, AlarmReport{Alarm: al, Attempt: attempt - 1, Err: err, Final: true})
			return
		}
		r.alarmDone(ctx, AlarmReport{Alarm: al, Attempt: attempt - 1, Err: err})
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(AlarmRetryDelays[attempt-1]):
		}
	}
}

// FailAfterAlarmDelivery is the failpoint between an alarm's delivery (the
// object answered the call) and its fired mark: a daemon killed there must
// deliver the alarm again after restart (at least once).
const FailAfterAlarmDelivery = "after-alarm-delivery"

func (r *Runtime) failpoint(name string) {
	if r.cfg.Failpoint != nil {
		r.cfg.Failpoint(name)
	}
}

func (r *Runtime) alarmDone(ctx context.Context, rep AlarmReport) {
	if r.cfg.AlarmDone == nil {
		return
	}
	select {
	case r.cfg.AlarmDone <- rep:
	case <-ctx.Done():
	}
}

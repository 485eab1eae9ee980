package object_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

type delivery struct {
	ID      string `json:"id"`
	Retry   int    `json:"retry"`
	IsRetry string `json:"is_retry"`
	Tag     string `json:"tag"`
}

func (e *env) deliveries(t *testing.T, k store.ObjectKey) []delivery {
	t.Helper()
	st, err := e.st.GetObjectStorage(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	var out []delivery
	if b, ok := st["alarm_deliveries"]; ok {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (e *env) setAlarm(t *testing.T, k store.ObjectKey, args any, at time.Time) *store.Alarm {
	t.Helper()
	b, _ := json.Marshal(args)
	a, err := e.rt.SetAlarm(context.Background(), object.SetAlarmParams{Key: k, Method: "alarm", Args: b, FireAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitAlarm waits for the next attempt report of alarm id.
func (e *env) waitAlarm(t *testing.T, id string) object.AlarmReport {
	t.Helper()
	for {
		select {
		case rep := <-e.alarms:
			if rep.Alarm.ID == id {
				return rep
			}
		case <-time.After(time.Minute):
			t.Fatalf("alarm %s: no attempt", id)
		}
	}
}

// advance moves the fake clock once n goroutines wait on it: the idle
// loop, the alarm poller, and any alarm waiting to retry.
func (e *env) advance(n int, d time.Duration) {
	e.clock.BlockUntilWaiting(n)
	e.clock.Advance(d)
}

func TestAlarmFiresAndReplacementKeepsTheLast(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := key("wcounter", "al")
	now := e.clock.Now()
	first := e.setAlarm(t, k, map[string]any{"tag": "first"}, now.Add(time.Minute))
	second := e.setAlarm(t, k, map[string]any{"tag": "second"}, now.Add(time.Minute))
	alarms, err := e.rt.Alarms(ctx, k)
	if err != nil || len(alarms) != 1 || alarms[0].ID != second.ID {
		t.Fatalf("after replacing %s: %+v %v", first.ID, alarms, err)
	}
	// Not due yet: one poll passes without firing.
	e.advance(2, 30*time.Second)
	e.advance(2, 30*time.Second)
	rep := e.waitAlarm(t, second.ID)
	if rep.Err != nil || !rep.Final || rep.Attempt != 0 {
		t.Fatalf("report: %+v", rep)
	}
	got := e.deliveries(t, k)
	if len(got) != 1 || got[0].Tag != "second" || got[0].ID != second.ID || got[0].Retry != 0 || got[0].IsRetry != "false" {
		t.Fatalf("deliveries: %+v", got)
	}
	if e.storedCount(t, k) != 1 {
		t.Fatalf("count %d", e.storedCount(t, k))
	}
	a, err := e.st.GetAlarm(ctx, second.ID)
	if err != nil || !a.Fired {
		t.Fatalf("alarm after success: %+v %v", a, err)
	}
}

// A failing alarm is retried after 1 s, 2 s and 4 s; then it is marked
// fired with an AlarmFailed record. The handler sees the retry count.
func TestAlarmRetriesThenFails(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := key("wcounter", "retry")
	al := e.setAlarm(t, k, map[string]any{"fail_until_retry": 99}, e.clock.Now())
	e.advance(2, 30*time.Second)
	for i, d := range object.AlarmRetryDelays {
		rep := e.waitAlarm(t, al.ID)
		if rep.Err == nil || rep.Final || rep.Attempt != int64(i) {
			t.Fatalf("attempt %d: %+v", i, rep)
		}
		e.advance(3, d)
	}
	rep := e.waitAlarm(t, al.ID)
	if rep.Err == nil || !rep.Final || rep.Attempt != 3 {
		t.Fatalf("last attempt: %+v", rep)
	}
	var retries []int
	var isRetry []string
	for _, d := range e.deliveries(t, k) {
		retries, isRetry = append(retries, d.Retry), append(isRetry, d.IsRetry)
	}
	if !slices.Equal(retries, []int{0, 1, 2, 3}) || !slices.Equal(isRetry, []string{"false", "true", "true", "true"}) {
		t.Fatalf("deliveries: retries %v, is_retry %v", retries, isRetry)
	}
	a, err := e.st.GetAlarm(ctx, al.ID)
	if err != nil || !a.Fired || a.Attempts != 4 || a.LastError == "" {
		t.Fatalf("alarm after failing: %+v %v", a, err)
	}
	if kinds := e.auditKinds(t, k); !slices.Contains(kinds, "AlarmFailed") {
		t.Fatalf("audit: %v", kinds)
	}
	if e.storedCount(t, k) != 0 {
		t.Fatal("a failed alarm incremented")
	}
}

func TestAlarmRetrySucceeds(t *testing.T) {
	e := newEnv(t)
	k := key("wcounter", "late")
	al := e.setAlarm(t, k, map[string]any{"fail_until_retry": 2}, e.clock.Now())
	e.advance(2, 30*time.Second)
	for _, d := range object.AlarmRetryDelays[:2] {
		if rep := e.waitAlarm(t, al.ID); rep.Err == nil {
			t.Fatalf("expected a failure: %+v", rep)
		}
		e.advance(3, d)
	}
	if rep := e.waitAlarm(t, al.ID); rep.Err != nil || !rep.Final || rep.Attempt != 2 {
		t.Fatalf("third delivery: %+v", rep)
	}
	if e.storedCount(t, k) != 1 || slices.Contains(e.auditKinds(t, k), "AlarmFailed") {
		t.Fatalf("count %d, audit %v", e.storedCount(t, k), e.auditKinds(t, k))
	}
}

package monitor

import (
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// act builds an activity summary relative to now; negative offsets are "ago".
type act struct {
	firstHB, lastHB *time.Duration
	status          store.HeartbeatStatus
	lastWork        *time.Duration
	lastWorkSeq     int64
	completed       *time.Duration
	completedSeq    int64
	terminated      bool
}

func ago(d time.Duration) *time.Duration { return &d }

func (a act) build(now time.Time) *store.AgentActivity {
	t := func(d *time.Duration) *time.Time {
		if d == nil {
			return nil
		}
		v := now.Add(-*d)
		return &v
	}
	out := &store.AgentActivity{
		SandboxID: "sbx_test", FirstHeartbeatAt: t(a.firstHB), LastHeartbeatAt: t(a.lastHB),
		LastHeartbeatStatus: a.status, LastWorkEventAt: t(a.lastWork), LastWorkEventSeq: a.lastWorkSeq,
		LatestCompletedAt: t(a.completed), LatestCompletedSeq: a.completedSeq,
	}
	if out.FirstHeartbeatAt == nil && out.LastHeartbeatAt != nil {
		out.FirstHeartbeatAt = out.LastHeartbeatAt
	}
	if a.terminated {
		out.TerminatedAt = &now
	}
	return out
}

// TestDecideSeedTable is the seed's decision logic row by row: each row
// names the rule of seed 001 it proves.
func TestDecideSeedTable(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	th := DefaultThresholds()
	m := time.Minute
	s := time.Second
	rows := []struct {
		name         string
		a            *act // nil = no activity at all
		created      time.Duration
		state        State
		alive, idle  bool
		stuck        bool
		completed    bool
		terminate    bool
		reason       store.TerminationReason
		duration     time.Duration
		wantDuration bool
	}{
		// is_alive: last heartbeat < 90 s.
		{name: "alive: heartbeat 89s ago, recent work", a: &act{lastHB: ago(89 * s), status: "idle", lastWork: ago(10 * s)},
			state: StateRunning, alive: true},
		{name: "dead: heartbeat exactly 90s ago is not alive", a: &act{lastHB: ago(90 * s), status: "running", lastWork: ago(10 * s)},
			state: StateDead, terminate: true, reason: store.TerminationHeartbeat, duration: 90 * s, wantDuration: true},
		{name: "dead sandboxes are not idle (no work for an hour)", a: &act{lastHB: ago(5 * m), status: "idle", lastWork: ago(60 * m)},
			state: StateDead, idle: false, terminate: true, reason: store.TerminationHeartbeat, duration: 5 * m, wantDuration: true},
		{name: "dead after completion: reaped, completion kept for the task", a: &act{lastHB: ago(2 * m), status: "idle", lastWork: ago(3 * m), lastWorkSeq: 9, completed: ago(3 * m), completedSeq: 9},
			state: StateDead, completed: true, terminate: true, reason: store.TerminationHeartbeat},

		// Completion: the LATEST agent.completed with no work after it.
		{name: "completed: no work after, not idle though no work for 4m", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(4 * m), lastWorkSeq: 7, completed: ago(4 * m), completedSeq: 7},
			state: StateCompleted, alive: true, completed: true, duration: 4 * m, wantDuration: true},
		{name: "completed: post-completion timer 5m expired → cleanup", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(5 * m), lastWorkSeq: 7, completed: ago(5 * m), completedSeq: 7},
			state: StateCompleted, alive: true, completed: true, terminate: true, reason: store.TerminationPostCompletion, duration: 5 * m, wantDuration: true},
		{name: "completed: status running does not matter after completion", a: &act{lastHB: ago(5 * s), status: "running", lastWork: ago(2 * m), lastWorkSeq: 3, completed: ago(2 * m), completedSeq: 3},
			state: StateCompleted, alive: true, completed: true},
		{name: "completed: seed time comparison when no seqs (work at the same instant is the completion)", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(m), completed: ago(m)},
			state: StateCompleted, alive: true, completed: true},

		// Problem 1: resume after completion resets has_completed.
		{name: "problem 1: resumed, then only heartbeats for 4m → idle", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(4 * m), lastWorkSeq: 12, completed: ago(10 * m), completedSeq: 8},
			state: StateIdle, alive: true, idle: true, terminate: true, reason: store.TerminationIdle, duration: 4 * m, wantDuration: true},
		{name: "problem 1: resumed and working → RESUMED", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(30 * s), lastWorkSeq: 12, completed: ago(10 * m), completedSeq: 8},
			state: StateResumed, alive: true},
		{name: "problem 1: resume detected by seq even at an equal timestamp", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(m), lastWorkSeq: 9, completed: ago(m), completedSeq: 8},
			state: StateResumed, alive: true},
		{name: "problem 1: seed time comparison without seqs", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(4 * m), completed: ago(6 * m)},
			state: StateIdle, alive: true, idle: true, terminate: true, reason: store.TerminationIdle},

		// Problem 2: "running" is not trusted forever.
		{name: "problem 2: running, no work for 10m01s → stuck", a: &act{lastHB: ago(5 * s), status: "running", lastWork: ago(10*m + s)},
			state: StateIdle, alive: true, idle: true, stuck: true, terminate: true, reason: store.TerminationStuckRunning, duration: 10*m + s, wantDuration: true},
		{name: "problem 2: running, no work for exactly 10m → still running (strict >)", a: &act{lastHB: ago(5 * s), status: "running", lastWork: ago(10 * m)},
			state: StateRunning, alive: true},
		{name: "running with no work for 9m is not idle (idle threshold ignored while running)", a: &act{lastHB: ago(5 * s), status: "running", lastWork: ago(9 * m)},
			state: StateRunning, alive: true},
		{name: "running after resume, stuck → stuck (resume reset the completion)", a: &act{lastHB: ago(5 * s), status: "running", lastWork: ago(11 * m), lastWorkSeq: 5, completed: ago(20 * m), completedSeq: 2},
			state: StateIdle, alive: true, idle: true, stuck: true, terminate: true, reason: store.TerminationStuckRunning},
		{name: "extension: running with no work ever, 10m01s since first heartbeat → stuck", a: &act{firstHB: ago(10*m + s), lastHB: ago(5 * s), status: "running"},
			state: StateIdle, alive: true, idle: true, stuck: true, terminate: true, reason: store.TerminationStuckRunning, duration: 10*m + s, wantDuration: true},
		{name: "extension: running with no work ever, 9m → running", a: &act{firstHB: ago(9 * m), lastHB: ago(5 * s), status: "running"},
			state: StateRunning, alive: true},

		// No work events ever: idle since the first heartbeat.
		{name: "no work ever: idle 3m01s since first heartbeat → idle", a: &act{firstHB: ago(3*m + s), lastHB: ago(5 * s), status: "idle"},
			state: StateIdle, alive: true, idle: true, terminate: true, reason: store.TerminationIdle, duration: 3*m + s, wantDuration: true},
		{name: "no work ever: 1m since first heartbeat → is_idle but under threshold", a: &act{firstHB: ago(m), lastHB: ago(5 * s), status: "idle"},
			state: StateRunning, alive: true, idle: true, duration: m, wantDuration: true},

		// Idle threshold on the last work event.
		{name: "idle: no work for 3m01s, status idle", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(3*m + s)},
			state: StateIdle, alive: true, idle: true, terminate: true, reason: store.TerminationIdle, duration: 3*m + s, wantDuration: true},
		{name: "idle: exactly 3m is not idle (strict >)", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(3 * m)},
			state: StateRunning, alive: true},
		{name: "idle: degraded counts as not running", a: &act{lastHB: ago(5 * s), status: "degraded", lastWork: ago(4 * m)},
			state: StateIdle, alive: true, idle: true, terminate: true, reason: store.TerminationIdle},
		{name: "idle: failed counts as not running", a: &act{lastHB: ago(5 * s), status: "failed", lastWork: ago(4 * m)},
			state: StateIdle, alive: true, idle: true, terminate: true, reason: store.TerminationIdle},
		{name: "working: last work 2m59s ago", a: &act{lastHB: ago(5 * s), status: "idle", lastWork: ago(2*m + 59*s)},
			state: StateRunning, alive: true},

		// CREATED and TERMINATED.
		{name: "created: no heartbeat yet, 10s after creation", a: nil, created: 10 * s, state: StateCreated},
		{name: "created → dead: no heartbeat in 90s since creation", a: nil, created: 90 * s,
			state: StateDead, terminate: true, reason: store.TerminationHeartbeat, duration: 90 * s, wantDuration: true},
		{name: "terminated is terminal", a: &act{lastHB: ago(5 * m), status: "idle", terminated: true}, state: StateTerminated},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var a *store.AgentActivity
			if r.a != nil {
				a = r.a.build(now)
			}
			d := Decide(a, now.Add(-r.created), now, th)
			if d.State != r.state || d.IsAlive != r.alive || d.IsIdle != r.idle || d.IsStuckRunning != r.stuck ||
				d.HasCompleted != r.completed || d.Terminate != r.terminate || d.Reason != r.reason {
				t.Fatalf("got state=%s alive=%v idle=%v stuck=%v completed=%v terminate=%v reason=%q (%s)\nwant state=%s alive=%v idle=%v stuck=%v completed=%v terminate=%v reason=%q",
					d.State, d.IsAlive, d.IsIdle, d.IsStuckRunning, d.HasCompleted, d.Terminate, d.Reason, d.Why,
					r.state, r.alive, r.idle, r.stuck, r.completed, r.terminate, r.reason)
			}
			if r.wantDuration && d.Duration != r.duration {
				t.Fatalf("duration %s, want %s", d.Duration, r.duration)
			}
			if d.Why == "" {
				t.Fatal("a decision must say why")
			}
		})
	}
}

// TestDecideThresholdsAreConfigurable: the constants come from the caller.
func TestDecideThresholdsAreConfigurable(t *testing.T) {
	now := time.Now()
	lw := now.Add(-30 * time.Second)
	a := &store.AgentActivity{FirstHeartbeatAt: &now, LastHeartbeatAt: &now, LastHeartbeatStatus: "idle", LastWorkEventAt: &lw}
	if d := Decide(a, now, now, DefaultThresholds()); d.Terminate {
		t.Fatalf("30s without work reaped with the default 3m threshold: %s", d.Why)
	}
	th := DefaultThresholds()
	th.Idle = 20 * time.Second
	if d := Decide(a, now, now, th); !d.Terminate || d.Reason != store.TerminationIdle {
		t.Fatalf("30s without work not reaped with a 20s threshold: %+v", d)
	}
}

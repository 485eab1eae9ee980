package monitor

import (
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// State is a monitored sandbox's state (seed 001 "Proposed State Machine").
type State string

const (
	StateCreated    State = "CREATED"
	StateRunning    State = "RUNNING"
	StateCompleted  State = "COMPLETED"
	StateResumed    State = "RESUMED"
	StateIdle       State = "IDLE"
	StateDead       State = "DEAD"
	StateTerminated State = "TERMINATED"
)

// Thresholds are the seed's constants ([monitor] in the config).
type Thresholds struct {
	Idle           time.Duration // IDLE_THRESHOLD, 3 min
	Heartbeat      time.Duration // HEARTBEAT_TIMEOUT, 90 s
	StuckRunning   time.Duration // STUCK_RUNNING_THRESHOLD, 10 min
	PostCompletion time.Duration // post-completion timer, 5 min
}

// DefaultThresholds are the seed's values.
func DefaultThresholds() Thresholds {
	return Thresholds{Idle: 3 * time.Minute, Heartbeat: 90 * time.Second,
		StuckRunning: 10 * time.Minute, PostCompletion: 5 * time.Minute}
}

// Decision is what Decide concluded and why. Terminate says the sandbox must
// go through the termination sequence with Reason.
type Decision struct {
	State          State
	IsAlive        bool
	IsIdle         bool
	IsStuckRunning bool
	// HasCompleted: the latest agent.completed has no work after it. A
	// termination never marks such a task failed.
	HasCompleted bool
	// Resumed: there was an agent.completed but work came after it.
	Resumed   bool
	Terminate bool
	Reason    store.TerminationReason
	// Duration is the idle, dead, stuck or post-completion duration.
	Duration time.Duration
	Why      string
}

// Decide is the seed's decision logic, written down once, as one pure
// function of the activity summary, the time and the thresholds. created is
// when monitoring began (the task's or sandbox's creation), used only while
// no heartbeat has arrived.
//
// Order, as in the seed: is_alive first (dead sandboxes are not idle), then
// completion with resume detection, then "running" with stuck detection,
// then "no work ever" (idle since the first heartbeat), then the idle
// threshold.
func Decide(a *store.AgentActivity, created, now time.Time, th Thresholds) Decision {
	var d Decision
	if a != nil && a.TerminatedAt != nil {
		d.State = StateTerminated
		d.Why = fmt.Sprintf("terminated at %s", a.TerminatedAt.UTC().Format(time.RFC3339))
		return d
	}
	if a == nil || a.LastHeartbeatAt == nil {
		// Not in the seed's table: a sandbox whose agent never sent a
		// heartbeat. It is CREATED for one heartbeat timeout, then DEAD
		// (measured from creation), so an agent that never starts is reaped.
		since := now.Sub(created)
		if since < th.Heartbeat {
			d.State = StateCreated
			d.Why = fmt.Sprintf("no heartbeat yet (%s since creation; dead after %s)", since.Round(time.Second), th.Heartbeat)
			return d
		}
		d.State, d.Terminate, d.Reason, d.Duration = StateDead, true, store.TerminationHeartbeat, since
		d.Why = fmt.Sprintf("no heartbeat at all in %s since creation (heartbeat timeout %s)", since.Round(time.Second), th.Heartbeat)
		d.HasCompleted = hasCompleted(a)
		return d
	}

	// is_alive: last heartbeat < HEARTBEAT_TIMEOUT ago.
	hbAge := now.Sub(*a.LastHeartbeatAt)
	d.IsAlive = hbAge < th.Heartbeat
	d.HasCompleted = hasCompleted(a)
	d.Resumed = a.LatestCompletedAt != nil && !d.HasCompleted

	if !d.IsAlive {
		// Dead sandboxes are not idle. A completed agent that stopped
		// heart-beating is reaped too, but its task stays completed.
		d.State, d.Terminate, d.Reason, d.Duration = StateDead, true, store.TerminationHeartbeat, hbAge
		d.Why = fmt.Sprintf("last heartbeat %s ago (timeout %s)", hbAge.Round(time.Second), th.Heartbeat)
		return d
	}
	if d.HasCompleted {
		since := now.Sub(*a.LatestCompletedAt)
		d.State, d.Duration = StateCompleted, since
		if since >= th.PostCompletion {
			d.Terminate, d.Reason = true, store.TerminationPostCompletion
			d.Why = fmt.Sprintf("completed %s ago, no work since; post-completion timeout %s expired", since.Round(time.Second), th.PostCompletion)
			return d
		}
		d.Why = fmt.Sprintf("completed %s ago, no work since; cleanup after %s", since.Round(time.Second), th.PostCompletion)
		return d
	}
	running := StateRunning
	if d.Resumed {
		running = StateResumed
	}
	if a.LastHeartbeatStatus == store.HeartbeatRunning {
		if a.LastWorkEventAt != nil {
			noWork := now.Sub(*a.LastWorkEventAt)
			if noWork > th.StuckRunning {
				d.State, d.IsIdle, d.IsStuckRunning = StateIdle, true, true
				d.Terminate, d.Reason, d.Duration = true, store.TerminationStuckRunning, noWork
				d.Why = fmt.Sprintf("heartbeat says running but no work for %s (stuck threshold %s)", noWork.Round(time.Second), th.StuckRunning)
				return d
			}
			d.State, d.Duration = running, noWork
			d.Why = fmt.Sprintf("heartbeat says running; last work %s ago", noWork.Round(time.Second))
			return d
		}
		// The seed trusts "running" with no work event ever without bound
		// (its stuck rule needs a last work event). Extension: measure from
		// the first heartbeat, as the seed's no-work-ever idle rule does, so
		// an agent that hangs before its first work is still reaped.
		noWork := now.Sub(*a.FirstHeartbeatAt)
		if noWork > th.StuckRunning {
			d.State, d.IsIdle, d.IsStuckRunning = StateIdle, true, true
			d.Terminate, d.Reason, d.Duration = true, store.TerminationStuckRunning, noWork
			d.Why = fmt.Sprintf("heartbeat says running but no work ever in %s since the first heartbeat (stuck threshold %s)", noWork.Round(time.Second), th.StuckRunning)
			return d
		}
		d.State, d.Duration = running, noWork
		d.Why = fmt.Sprintf("heartbeat says running; no work yet (%s since the first heartbeat)", noWork.Round(time.Second))
		return d
	}
	status := string(a.LastHeartbeatStatus)
	if a.LastWorkEventAt == nil {
		// No work events ever: idle since the first heartbeat.
		idle := now.Sub(*a.FirstHeartbeatAt)
		d.IsIdle, d.Duration = true, idle
		if idle > th.Idle {
			d.State, d.Terminate, d.Reason = StateIdle, true, store.TerminationIdle
			d.Why = fmt.Sprintf("no work event ever; idle %s since the first heartbeat (threshold %s, status %q)", idle.Round(time.Second), th.Idle, status)
			return d
		}
		d.State = running
		d.Why = fmt.Sprintf("no work event yet; idle %s of %s since the first heartbeat (status %q)", idle.Round(time.Second), th.Idle, status)
		return d
	}
	noWork := now.Sub(*a.LastWorkEventAt)
	d.Duration = noWork
	if noWork > th.Idle {
		d.State, d.IsIdle, d.Terminate, d.Reason = StateIdle, true, true, store.TerminationIdle
		d.Why = fmt.Sprintf("no work for %s (idle threshold %s, status %q)", noWork.Round(time.Second), th.Idle, status)
		return d
	}
	d.State = running
	d.Why = fmt.Sprintf("last work %s ago (idle after %s, status %q)", noWork.Round(time.Second), th.Idle, status)
	return d
}

// hasCompleted: the latest agent.completed exists and no work came after
// it. agent.completed is itself a work event, so "after" compares sequence
// numbers when the store has them (robust to equal timestamps), else the
// seed's timestamps.
func hasCompleted(a *store.AgentActivity) bool {
	if a == nil || a.LatestCompletedAt == nil {
		return false
	}
	if a.LastWorkEventAt == nil {
		return true
	}
	if a.LastWorkEventSeq != 0 && a.LatestCompletedSeq != 0 {
		return a.LastWorkEventSeq <= a.LatestCompletedSeq
	}
	return !a.LastWorkEventAt.After(*a.LatestCompletedAt)
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// A thread's progress reaches its parent's log (the primary thread) as a
// condensed view: session.thread_status_* for each of the thread's status
// events, and agent.thread_message_received with the thread's answer when
// a turn of it ends. Only the parent's worker writes them, each with an id
// derived from the thread's event it stands for, so a sync repeated after
// a crash, or by a second process, adds nothing twice. The parent's turn
// that opened threads does not end while one of them works: it waits,
// then gives the coordinator every answer at once.

// threadSyncEvery bounds how long a waiting coordinator goes without
// looking at its threads when no wake-up reaches it (a thread run by
// another process after a recovery).
const threadSyncEvery = 2 * time.Second

// threadSyncTypes are the events of a thread's log its parent's view is
// made of.
var threadSyncTypes = []string{EventUserMessage, EventUserInterrupt, EventStatusRunning, EventStatusIdle,
	EventStatusRescheduled, EventStatusTerminated, EventAgentMessage}

// threadMessagePrefix introduces a thread's answer to the coordinator.
const threadMessagePrefix = "[message from thread %s (agent %s)]\n\n"

// threadMessageText is the coordinator's view of an
// agent.thread_message_received event.
func threadMessageText(data json.RawMessage) string {
	var b struct {
		From    string         `json:"from_session_thread_id"`
		Name    string         `json:"from_agent_name"`
		Content []contentBlock `json:"content"`
	}
	_ = json.Unmarshal(data, &b)
	var text strings.Builder
	for _, c := range b.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	return fmt.Sprintf(threadMessagePrefix, b.From, b.Name) + text.String()
}

// threadProgress tells a thread's parent that the thread's status moved:
// a waiting turn looks at its threads, an idle parent drains.
func (r *Runtime) threadProgress(parentID string) {
	r.mu.Lock()
	w := r.workers[parentID]
	r.mu.Unlock()
	if w != nil {
		select {
		case w.threads <- struct{}{}:
		default:
		}
	}
	r.Wake(parentID)
}

// threadName is the name of a thread's agent (its id when it has none).
func (w *worker) threadName(ctx context.Context, th *store.ManagedSession) string {
	key := fmt.Sprintf("%s@%d", th.AgentID, th.AgentVersion)
	if n, ok := w.threadNames[key]; ok {
		return n
	}
	name := th.AgentID
	if a, err := w.r.cfg.Store.GetAgent(ctx, th.AgentID, th.AgentVersion); err == nil {
		name = agentName(a)
		w.threadNames[key] = name
	}
	return name
}

// syncThreads posts what the session's threads did that its log does not
// show yet, and returns how many of them still work (a message waits for
// a turn of it, or a turn of it runs).
func (w *worker) syncThreads(ctx context.Context) (running int, err error) {
	threads, err := w.r.cfg.Store.ListSessionThreads(ctx, w.id)
	if err != nil {
		return 0, fmt.Errorf("list the session's threads: %w", err)
	}
	for _, th := range threads {
		busy, err := w.syncThread(ctx, th)
		if err != nil {
			return 0, err
		}
		if busy {
			running++
		}
	}
	return running, nil
}

func (w *worker) syncThread(ctx context.Context, th *store.ManagedSession) (busy bool, err error) {
	name := w.threadName(ctx, th)
	var (
		after, lastBusy, lastIdle int64
		text                      string
		interrupted               bool
	)
	post := func(from store.SessionEvent, evs ...store.NewEvent) error {
		for i := range evs {
			evs[i].ID = derivedID("sevt_", th.ID, from.ID, evs[i].Type)
		}
		if w.conv.threadPosted[evs[0].ID] {
			return nil
		}
		return w.appendOnce(ctx, evs...)
	}
	status := func(typ string) store.NewEvent {
		return newEvent(typ, map[string]any{"session_thread_id": th.ID, "agent_name": name})
	}
	for {
		evs, err := w.r.cfg.Store.ListEvents(ctx, store.ListEventsParams{SessionID: th.ID, AfterSeq: after, Types: threadSyncTypes, Limit: 1000})
		if err != nil {
			return false, fmt.Errorf("events of thread %s: %w", th.ID, err)
		}
		for _, ev := range evs {
			after = ev.Seq
			var b eventBody
			_ = json.Unmarshal(ev.Data, &b)
			switch ev.Type {
			case EventUserMessage:
				lastBusy = ev.Seq
			case EventUserInterrupt:
				interrupted = true
			case EventStatusRunning:
				lastBusy, interrupted, text = ev.Seq, false, ""
				err = post(ev, status(EventThreadStatusRunning))
			case EventStatusRescheduled:
				err = post(ev, status(EventThreadStatusRescheduled))
			case EventStatusTerminated:
				err = post(ev, status(EventThreadStatusTerminated))
			case EventAgentMessage:
				var s strings.Builder
				for _, c := range b.Content {
					if c.Type == "text" {
						s.WriteString(c.Text)
					}
				}
				text = s.String()
			case EventStatusIdle:
				lastIdle = ev.Seq
				var sb struct {
					StopReason json.RawMessage `json:"stop_reason"`
				}
				_ = json.Unmarshal(ev.Data, &sb)
				idle := newEvent(EventThreadStatusIdle, map[string]any{"session_thread_id": th.ID, "agent_name": name,
					"stop_reason": sb.StopReason, "stop_details": nil})
				out := []store.NewEvent{idle}
				// The turn's answer goes to the coordinator — unless the
				// turn was interrupted (cut off) or waits for the user (the
				// thread goes on once the user answers). A turn that ended
				// without a word says so, so the coordinator is not left
				// waiting on it.
				stop := ""
				if b.StopReason != nil {
					stop = b.StopReason.Type
				}
				if !interrupted && stop != StopRequiresAction {
					if text == "" {
						text = fmt.Sprintf("[thread %s ended its turn without a message (stop reason: %s)]", th.ID, stop)
					}
					out = append(out, newEvent(EventThreadMessageReceived, map[string]any{"from_session_thread_id": th.ID,
						"from_agent_name": name, "content": textContent(text)}))
				}
				err = post(ev, out...)
				text = ""
			}
			if err != nil {
				return false, err
			}
		}
		if len(evs) < 1000 {
			break
		}
	}
	return th.TerminatedAt == nil && th.ArchivedAt == nil && lastBusy > lastIdle, nil
}

// awaitThreads is where a coordinator's answer that ends its turn waits
// for the threads it opened: until none works. It returns true when their
// answers arrived meanwhile (the coordinator goes on with them).
func (w *worker) awaitThreads(ctx context.Context) (bool, error) {
	if !w.conv.threads {
		return false, nil
	}
	tick := time.NewTicker(threadSyncEvery)
	defer tick.Stop()
	for {
		running, err := w.syncThreads(ctx)
		if err != nil {
			return false, err
		}
		if running == 0 {
			return len(w.conv.userText) > 0, nil
		}
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-w.threads:
		case <-tick.C:
		}
	}
}

// interruptThreads passes an interrupt of the session on to its threads
// that work: each gets a user.interrupt (its id derived from the thread
// and the interrupted turn, so it is sent once).
func (w *worker) interruptThreads(ctx context.Context, ts *turnState) {
	if !w.conv.threads {
		return
	}
	threads, err := w.r.cfg.Store.ListSessionThreads(ctx, w.id)
	if err != nil {
		w.r.log.WarnContext(ctx, "interrupt threads: list", "session", w.id, "err", err)
		return
	}
	for _, th := range threads {
		if th.TerminatedAt != nil || th.ArchivedAt != nil {
			continue
		}
		ev := newEvent(EventUserInterrupt, nil)
		ev.ID = derivedID("sevt_", th.ID, "interrupt", fmt.Sprint(ts.runningSeq))
		if _, err := w.r.cfg.Events.Append(ctx, th.ID, []store.NewEvent{ev}); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
			w.r.log.WarnContext(ctx, "interrupt a thread", "session", w.id, "thread", th.ID, "err", err)
			continue
		}
		w.r.Wake(th.ID)
	}
}

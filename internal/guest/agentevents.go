package guest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Limits of the agent event relay.
const (
	// MaxAgentEventData bounds one event's data (the daemon's default
	// limit too; the daemon may be configured lower).
	MaxAgentEventData = 64 << 10
	// maxAgentEventBuffer is how many unpulled events the guest keeps. A
	// full buffer answers 503: the daemon is not pulling.
	maxAgentEventBuffer = 100_000
	// maxAgentEventBatch bounds one POST and one pull.
	maxAgentEventBatch = 1000
	agentEventsDir     = "agent-events" // in the runtime dir
)

// AgentEvent is one event an agent posts to its guest (POST /agent-events)
// and the daemon pulls (GET /agent-events). Seq and At are the guest's.
type AgentEvent struct {
	Seq    int64           `json:"seq,omitempty"`
	Type   string          `json:"type"`
	Status string          `json:"status,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	At     time.Time       `json:"at"`
}

// AgentEventBatch is the body of a pull answer and of a batched POST.
type AgentEventBatch struct {
	Events []AgentEvent `json:"events"`
}

// agentEventLog is the guest's relay buffer. Events are appended to a file
// in the runtime dir (backed up with the workspace) before they are
// acknowledged to the agent, so a guest restart (the sandbox woke up again)
// loses nothing unpulled; a pull with after=N acknowledges everything up to
// N, which is then dropped.
type agentEventLog struct {
	now func() time.Time

	mu      sync.Mutex
	dir     string
	f       *os.File
	w       *bufio.Writer
	events  []AgentEvent // unacknowledged, in Seq order
	lastSeq int64
	acked   int64
	notify  chan struct{} // closed and replaced on every append
	loadErr error
}

func newAgentEventLog(runtimeDir string, now func() time.Time) *agentEventLog {
	l := &agentEventLog{now: now, dir: filepath.Join(runtimeDir, agentEventsDir), notify: make(chan struct{})}
	l.loadErr = l.load()
	return l
}

// load restores unacknowledged events from an earlier guest.
func (l *agentEventLog) load() error {
	if b, err := os.ReadFile(filepath.Join(l.dir, "acked")); err == nil {
		l.acked, _ = strconv.ParseInt(string(b), 10, 64)
		l.lastSeq = l.acked
	}
	f, err := os.Open(filepath.Join(l.dir, "events.ndjson"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4*MaxAgentEventData)
	for sc.Scan() {
		var ev AgentEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a torn last line from a crash
		}
		if ev.Seq > l.lastSeq {
			l.lastSeq = ev.Seq
		}
		if ev.Seq > l.acked {
			l.events = append(l.events, ev)
		}
	}
	return nil
}

// validate is the guest's first check, so an agent learns at once that an
// event is wrong; the daemon checks again.
func (ev *AgentEvent) validate() error {
	if !store.IsAgentEventType(ev.Type) {
		return fmt.Errorf("%w: type %q is not an agent event type (work: %v; non-work: %v)",
			errBadRequest, ev.Type, store.WorkEventTypes(), store.NonWorkEventTypes())
	}
	if ev.Type == store.EventHeartbeat {
		if !store.HeartbeatStatus(ev.Status).Valid() {
			return fmt.Errorf("%w: status %q: an agent.heartbeat needs status idle, running, degraded or failed", errBadRequest, ev.Status)
		}
	} else if ev.Status != "" {
		return fmt.Errorf("%w: status is only for agent.heartbeat, not %s", errBadRequest, ev.Type)
	}
	if len(ev.Data) > MaxAgentEventData {
		return fmt.Errorf("%w: data is %d bytes; the limit is %d", errBadRequest, len(ev.Data), MaxAgentEventData)
	}
	if len(ev.Data) > 0 && !json.Valid(ev.Data) {
		return fmt.Errorf("%w: data is not valid JSON", errBadRequest)
	}
	return nil
}

var errAgentBufferFull = errors.New("agent event buffer full")

// append validates, numbers, persists and buffers events, all or none.
func (l *agentEventLog) append(evs []AgentEvent) (int64, error) {
	for i := range evs {
		if err := evs[i].validate(); err != nil {
			if len(evs) > 1 {
				return 0, fmt.Errorf("events[%d]: %w", i, err)
			}
			return 0, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events)+len(evs) > maxAgentEventBuffer {
		return 0, fmt.Errorf("%w: %d events are waiting for the daemon (limit %d)", errAgentBufferFull, len(l.events), maxAgentEventBuffer)
	}
	if l.f == nil {
		if err := os.MkdirAll(l.dir, 0o755); err != nil {
			return 0, err
		}
		f, err := os.OpenFile(filepath.Join(l.dir, "events.ndjson"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, err
		}
		l.f, l.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	now := l.now()
	for i := range evs {
		l.lastSeq++
		evs[i].Seq = l.lastSeq
		if evs[i].At.IsZero() {
			evs[i].At = now
		}
		b, _ := json.Marshal(&evs[i])
		l.w.Write(b)
		l.w.WriteByte('\n')
	}
	// Written through to the file (the page cache) before the agent hears
	// "accepted": a guest restart keeps it; a host crash is out of scope.
	if err := l.w.Flush(); err != nil {
		return 0, err
	}
	l.events = append(l.events, evs...)
	close(l.notify)
	l.notify = make(chan struct{})
	return l.lastSeq, nil
}

// pull acknowledges everything up to after and returns up to limit events
// after it, plus a channel that closes on the next append.
func (l *agentEventLog) pull(after int64, limit int) ([]AgentEvent, <-chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after > l.acked {
		if after > l.lastSeq {
			after = l.lastSeq
		}
		l.acked = after
		i := 0
		for i < len(l.events) && l.events[i].Seq <= after {
			i++
		}
		l.events = append(l.events[:0:0], l.events[i:]...)
		if err := l.persistAck(); err != nil {
			return nil, nil, err
		}
	}
	n := min(limit, len(l.events))
	out := append([]AgentEvent(nil), l.events[:n]...)
	return out, l.notify, nil
}

// persistAck records the acknowledged seq; once nothing is waiting the
// event file is truncated so it never grows without bound.
func (l *agentEventLog) persistAck() error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, "acked.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(l.acked, 10)), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, "acked")); err != nil {
		return err
	}
	if len(l.events) == 0 && l.f != nil {
		if err := l.w.Flush(); err != nil {
			return err
		}
		return l.f.Truncate(0)
	}
	return nil
}

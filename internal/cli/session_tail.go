package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// tailRecent is how many past events `tail` reads without --from-start,
// to know whether a turn is under way (for --until-idle).
const tailRecent = 100

// sessionTail shows a session's trajectory as it happens. History is
// listed first and the stream resumes right after the last listed event
// (Last-Event-ID), so nothing is missed or shown twice between the two.
func sessionTail(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session tail", "session tail SESSION_ID [--from-start] [--until-idle] [--json]")
	var cf clientFlags
	cf.register(fs)
	fromStart := fs.Bool("from-start", false, "show the whole trajectory so far, then follow")
	untilIdle := fs.Bool("until-idle", false, "exit once the session is idle with nothing queued (or terminated)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: session tail takes one session id", errUsage)
	}
	c := cf.managedClient(m)
	t := &tailer{m: m, c: c, id: fs.Arg(0), json: cf.json, untilIdle: *untilIdle, r: newRenderer(m.Stdout)}
	hist, err := t.history(ctx, *fromStart)
	if err != nil {
		return err
	}
	var marks map[int64][]string
	if *fromStart && !cf.json {
		marks = branchMarks(ctx, cf.client(m), t.id)
	}
	for i, raw := range hist {
		if *fromStart {
			t.show(raw)
			// Events are numbered from 1: the i-th listed is event i+1.
			for _, b := range marks[int64(i+1)] {
				fmt.Fprintf(m.Stdout, "── rewound here: what followed is branch %s ──\n", b)
			}
		} else {
			t.observe(raw)
		}
	}
	if len(hist) == 0 {
		return t.follow(ctx, "")
	}
	var last struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(hist[len(hist)-1]), &last)
	return t.follow(ctx, last.ID)
}

// tailer shows events and tracks whether the session has settled.
type tailer struct {
	m         *Main
	c         anthropic.Client
	id        string
	json      bool
	untilIdle bool
	r         *renderer
	st        settleState
	lastID    string
	// failure is the last terminal session.error seen ("" if none), so
	// `send --wait` can fail when the turn did.
	failure string
}

// history lists the session's events oldest first: all of them, or the
// most recent tailRecent.
func (t *tailer) history(ctx context.Context, all bool) ([]string, error) {
	var raws []string
	if all {
		pager := t.c.Beta.Sessions.Events.ListAutoPaging(ctx, t.id, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
		for pager.Next() {
			raws = append(raws, pager.Current().RawJSON())
		}
		if err := pager.Err(); err != nil {
			return nil, apiError(err)
		}
		return raws, nil
	}
	page, err := t.c.Beta.Sessions.Events.List(ctx, t.id, anthropic.BetaSessionEventListParams{
		Limit: anthropic.Int(tailRecent), Order: anthropic.BetaSessionEventListParamsOrderDesc,
	})
	if err != nil {
		return nil, apiError(err)
	}
	for _, e := range page.Data {
		raws = append(raws, e.RawJSON())
	}
	slices.Reverse(raws)
	return raws, nil
}

// follow streams events after afterID ("" for: from now, after catching
// up on what the session already has) until the session settles (with
// untilIdle), is deleted, or ctx ends. A stream the server closes is
// resumed from the last event shown.
func (t *tailer) follow(ctx context.Context, afterID string) error {
	t.lastID = afterID
	for {
		var opts []option.RequestOption
		if t.lastID != "" {
			opts = append(opts, option.WithHeader("Last-Event-ID", t.lastID))
		}
		stream := t.c.Beta.Sessions.Events.StreamEvents(ctx, t.id, anthropic.BetaSessionEventStreamParams{}, opts...)
		if err := stream.Err(); err != nil {
			stream.Close()
			return apiError(err)
		}
		var skip map[string]bool
		if t.lastID == "" {
			// The stream starts at whatever is newest now; listing after
			// it opened covers everything before, and the ids seen here
			// are skipped when the stream repeats them.
			hist, err := t.history(ctx, true)
			if err != nil {
				stream.Close()
				return err
			}
			skip = map[string]bool{}
			for _, raw := range hist {
				t.show(raw)
				var e struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal([]byte(raw), &e)
				skip[e.ID] = true
			}
		}
		if t.done() {
			stream.Close()
			return nil
		}
		for stream.Next() {
			ev := stream.Current()
			if skip[ev.ID] {
				continue
			}
			t.show(ev.RawJSON())
			if t.done() {
				stream.Close()
				return nil
			}
		}
		err := stream.Err()
		stream.Close()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return apiError(err)
		}
		if t.st.terminal {
			return nil
		}
		// The server ended the stream (restart, shutdown): resume.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (t *tailer) done() bool { return t.st.terminal || (t.untilIdle && t.st.settled()) }

// show prints one event and notes it.
func (t *tailer) show(raw string) {
	if t.json {
		var buf json.RawMessage = []byte(raw)
		if b, err := json.Marshal(buf); err == nil { // compact: one event per line
			fmt.Fprintln(t.m.Stdout, string(b))
		}
	} else {
		t.r.event(raw)
	}
	t.observe(raw)
}

// observe notes an event without printing it.
func (t *tailer) observe(raw string) {
	var e struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		Error struct {
			Type        string `json:"type"`
			Message     string `json:"message"`
			RetryStatus struct {
				Type string `json:"type"`
			} `json:"retry_status"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &e) != nil {
		return
	}
	t.lastID = e.ID
	t.st.apply(e.Type)
	if e.Type == "session.error" && e.Error.RetryStatus.Type != "retrying" {
		t.failure = fmt.Sprintf("%s: %s", e.Error.Type, e.Error.Message)
	}
}

// settleState tells from the event log alone whether a session has work
// under way: a turn runs from status_running to status_idle, and a user
// event after the last status_running starts another turn.
type settleState struct {
	running  bool
	pending  int
	terminal bool
}

func (s *settleState) apply(typ string) {
	switch typ {
	case "user.message", "user.custom_tool_result", "user.tool_confirmation", "user.define_outcome":
		s.pending++
	case "session.status_running":
		s.running, s.pending = true, 0
	case "session.status_idle":
		s.running = false
	case "session.status_terminated", "session.deleted":
		s.running, s.terminal = false, true
	}
}

func (s *settleState) settled() bool { return s.terminal || (!s.running && s.pending == 0) }

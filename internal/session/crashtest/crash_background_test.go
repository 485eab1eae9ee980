package crashtest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// The background commands of TestBackgroundTasksAcrossACrash: one that
// outlives the (configured) cap, one that exits on its own.
const (
	bgLong  = "sleep 31337"
	bgShort = "sleep 1; exit 3"
	bgCap   = "20s"
)

var (
	shortReport = regexp.MustCompile(`^\[background task bgtask_[0-9a-f]+ \(command: sleep 1; exit 3\) exited with code 3 after [0-9]+s\]$`)
	longReport  = regexp.MustCompile(`^\[background task bgtask_[0-9a-f]+ \(command: sleep 31337\) was killed at the 20s cap\]$`)
)

func backgroundModel(r anthropictest.Request) anthropictest.Turn {
	switch last := lastUserText(r); {
	case strings.HasPrefix(last, "[background task"):
		return anthropictest.Turn{Text: "noted"}
	case last == "go":
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{
			{Name: "bash", Input: map[string]any{"command": bgLong, "run_in_background": true}},
			{Name: "bash", Input: map[string]any{"command": bgShort, "run_in_background": true}},
		}}
	}
	return anthropictest.Turn{Text: "started"}
}

// TestBackgroundTasksAcrossACrash: a session starts two background
// commands, one that runs past the cap and one that exits with code 3.
// The daemon is SIGKILLed right after the first end was reported to the
// model and before its task was marked finished; after the restart the
// poller sees that task again. Each task is reported exactly once (the
// long one killed at the cap, the short one with its exit code), each
// report reached the model, and the long command no longer runs.
func TestBackgroundTasksAcrossACrash(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, backgroundModel)
		n := newNode(t, engine, fake.URL)
		n.appendConf("\n[sandbox]\nbackground_cap = \"" + bgCap + "\"\n")
		n.arm(session.FailAfterBackgroundReport)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		send(t, c, sid, "go")
		n.waitReached(session.FailAfterBackgroundReport)
		if !processRuns(bgLong) {
			t.Fatalf("%q does not run before the kill", bgLong)
		}
		n.kill()
		n.disarm(session.FailAfterBackgroundReport)
		n.start()
		c = n.client()

		evs := waitReported(t, n, c, sid)
		checkTrajectory(t, evs)
		var reports []string
		for _, e := range ofType(evs, "user.message") {
			if e.text() != "go" {
				reports = append(reports, e.text())
			}
		}
		shorts, longs := 0, 0
		for _, r := range reports {
			switch {
			case shortReport.MatchString(r):
				shorts++
			case longReport.MatchString(r):
				longs++
			default:
				t.Errorf("unexpected user.message %q", r)
			}
		}
		if shorts != 1 || longs != 1 {
			t.Fatalf("reports %q: want each task reported once", reports)
		}
		for _, r := range reports {
			seen := false
			for _, req := range fake.Requests() {
				seen = seen || lastUserText(req) == r
			}
			if !seen {
				t.Errorf("the model never got the report %q", r)
			}
		}
		if processRuns(bgLong) {
			t.Fatalf("%q still runs after its task was killed at the cap", bgLong)
		}
	})
}

// appendConf adds TOML to the node's configuration file.
func (n *node) appendConf(toml string) {
	n.t.Helper()
	f, err := os.OpenFile(filepath.Join(n.home, "agentkernel.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(toml)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		n.t.Fatal(err)
	}
}

// waitReported waits until the long task's report is in the log and the
// session is idle after it, and returns the session's events.
func waitReported(t *testing.T, n *node, c anthropic.Client, sid string) []event {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		evs := events(t, c, sid)
		reported := false
		for _, e := range ofType(evs, "user.message") {
			reported = reported || longReport.MatchString(e.text())
		}
		if reported && evs[len(evs)-1].Type == "session.status_idle" {
			s, err := c.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Status == "idle" {
				return evs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the long task was never reported; events: %v\n%s", types(evs), n.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// processRuns: some process on the host has command in its command line.
func processRuns(command string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), command) {
			return true
		}
	}
	return false
}

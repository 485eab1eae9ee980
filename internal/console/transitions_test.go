package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
)

// TestTransitionsOfEachState: what the page's rows say for the histories
// the API can give — the stopping state among them, which an end-to-end
// test cannot hold still to look at — and for the gaps: a window that
// dropped old entries, a sandbox older than the history.
func TestTransitionsOfEachState(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	now := t0.Add(time.Hour)
	h := func(seq int64, state string, d time.Duration, gen int64) transitionJSON {
		return transitionJSON{Seq: seq, State: state, At: at(d), Generation: gen}
	}
	show := func(ts []transition) string {
		var b strings.Builder
		for _, x := range ts {
			if x.Gap {
				fmt.Fprintf(&b, "[%s]\n", x.Note)
				continue
			}
			fmt.Fprintf(&b, "%s>%s %s took=%q for=%q %s\n", x.From, x.To, x.At.Sub(t0), x.Took, x.For, x.Note)
		}
		return b.String()
	}
	for _, c := range []struct {
		name    string
		sb      sandboxJSON
		history []transitionJSON
		want    string
	}{
		{"made cold", sandboxJSON{agentkernel.Sandbox{State: "cold", CreatedAt: t0}}, []transitionJSON{h(1, "cold", 0, 0)},
			`>cold 0s took="" for="1h 0m" created` + "\n"},
		{"stopping its first instance", sandboxJSON{agentkernel.Sandbox{State: "stopping", CreatedAt: t0}},
			[]transitionJSON{h(1, "cold", 0, 0), h(2, "warming", 2*time.Second, 1), h(3, "active", 2340*time.Millisecond, 1), h(4, "stopping", 10*time.Minute, 1)},
			`>cold 0s took="" for="" created` + "\n" +
				`cold>warming 2s took="2.0 s" for="" instance started (workspace generation 1)` + "\n" +
				`warming>active 2.34s took="340 ms" for="" warm-up done` + "\n" +
				`active>stopping 10m0s took="9m 57s" for="50m 0s" stop began: snapshot, verify, then stop` + "\n"},
		{"woken warm, then destroyed", sandboxJSON{agentkernel.Sandbox{State: "destroyed", CreatedAt: t0}},
			[]transitionJSON{h(1, "cold", 0, 0), h(2, "active", time.Minute, 2), h(3, "cold", 2*time.Minute, 2), h(4, "destroyed", 3*time.Minute, 2)},
			`>cold 0s took="" for="" created` + "\n" +
				`cold>active 1m0s took="1m 0s" for="" instance started warm (workspace generation 2)` + "\n" +
				`active>cold 2m0s took="1m 0s" for="" stopped` + "\n" +
				`cold>destroyed 3m0s took="1m 0s" for="" destroyed` + "\n"},
		{"older entries out of the window", sandboxJSON{agentkernel.Sandbox{State: "active", CreatedAt: t0}},
			[]transitionJSON{h(301, "warming", 50*time.Minute, 150), h(302, "active", 50*time.Minute+1500*time.Millisecond, 150)},
			"[300 earlier transition(s) not kept: the daemon keeps a sandbox's newest 200]\n" +
				`>warming 50m0s took="" for="" instance started (workspace generation 150)` + "\n" +
				`warming>active 50m1.5s took="1.5 s" for="9m 58s" warm-up done` + "\n"},
		{"older than the history, changed since", sandboxJSON{agentkernel.Sandbox{State: "cold", CreatedAt: t0}},
			[]transitionJSON{h(1, "cold", 30*time.Minute, 3)},
			`>cold 30m0s took="" for="30m 0s" history recorded from here: the sandbox predates it` + "\n"},
		{"older than the history, unchanged", sandboxJSON{agentkernel.Sandbox{State: "cold", CreatedAt: t0, UpdatedAt: at(20 * time.Minute)}}, nil,
			`>cold 20m0s took="" for="40m 0s" no history yet: the sandbox predates it (this is its last change)` + "\n"},
	} {
		if got := show(transitions(c.sb, c.history, now)); got != c.want {
			t.Errorf("%s:\n got: %s\nwant: %s", c.name, got, c.want)
		}
	}
}

package console

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTransitionsOfEachState: what the page's transitions say for each
// set of facts the API can give — the stopping state among them, which an
// end-to-end test cannot hold still to look at.
func TestTransitionsOfEachState(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	now := t0.Add(time.Hour)
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
		name string
		sb   sandboxJSON
		want string
	}{
		{"made cold", sandboxJSON{State: "cold", CreatedAt: t0},
			`>cold 0s took="" for="1h 0m" created` + "\n"},
		{"warming the first time", sandboxJSON{State: "warming", CreatedAt: t0, StartedAt: at(2 * time.Second)},
			`>cold 0s took="" for="" created` + "\n" +
				`cold>warming 2s took="2.0 s" for="59m 58s" instance started` + "\n"},
		{"stopping its first instance", sandboxJSON{State: "stopping", Generation: 1, CreatedAt: t0, StartedAt: at(0), WarmedAt: at(340 * time.Millisecond), StoppingAt: at(10 * time.Minute)},
			`>cold 0s took="" for="" created` + "\n" +
				`cold>warming 0s took="0 ms" for="" instance started` + "\n" +
				`warming>active 340ms took="340 ms" for="" warm-up done` + "\n" +
				`active>stopping 10m0s took="9m 59s" for="50m 0s" stop began: snapshot, verify, then stop` + "\n"},
		{"cold after two instances", sandboxJSON{State: "cold", Generation: 2, CreatedAt: t0, UpdatedAt: *at(30 * time.Minute)},
			`>cold 0s took="" for="" created` + "\n" +
				"[2 earlier instance(s), counted by the workspace generation: their times are not kept]\n" +
				`>cold 30m0s took="" for="30m 0s" stopped (the record's last change)` + "\n"},
		{"active, its third instance", sandboxJSON{State: "active", Generation: 3, CreatedAt: t0, StartedAt: at(50 * time.Minute), WarmedAt: at(50*time.Minute + 1500*time.Millisecond)},
			`>cold 0s took="" for="" created` + "\n" +
				"[2 earlier instance(s), counted by the workspace generation: their times are not kept]\n" +
				`>warming 50m0s took="" for="" instance started` + "\n" +
				`warming>active 50m1.5s took="1.5 s" for="9m 58s" warm-up done` + "\n"},
		{"destroyed cold, never started", sandboxJSON{State: "destroyed", CreatedAt: t0, DestroyedAt: at(5 * time.Second)},
			`>cold 0s took="" for="" created` + "\n" +
				`cold>destroyed 5s took="5.0 s" for="" destroyed` + "\n"},
		{"destroyed after an instance", sandboxJSON{State: "destroyed", Generation: 1, CreatedAt: t0, DestroyedAt: at(5 * time.Minute)},
			`>cold 0s took="" for="" created` + "\n" +
				"[1 earlier instance(s), counted by the workspace generation: their times are not kept]\n" +
				`>destroyed 5m0s took="" for="" destroyed` + "\n"},
	} {
		if got := show(transitions(c.sb, now)); got != c.want {
			t.Errorf("%s:\n got: %s\nwant: %s", c.name, got, c.want)
		}
	}
}

package session

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestRecoveredModelRequestKeepsItsKey: a model request is cut off after
// it delivered a text block, the runtime stops (the op stays started) and
// another runtime — a later boot of the node — recovers the turn. With
// idempotency_header set on the route, both requests carry the op id in
// it, and the recovered one is a resend of the same request (no prefill,
// the same key) whose repeat of the delivered block is not delivered
// twice. Without it, no key is sent and the recovered request goes on
// from the partial output as the assistant prefill.
func TestRecoveredModelRequestKeepsItsKey(t *testing.T) {
	const header = "Idempotency-Key"
	for _, keyed := range []bool{true, false} {
		name := map[bool]string{true: "keyed", false: "unkeyed"}[keyed]
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			answer := "Part two."
			if keyed {
				answer = "Part one." // the gateway's answer to the same request: the whole of it
			}
			var cfg RuntimeConfig
			e := newRTEnv(t, func(r anthropictest.Request) anthropictest.Turn {
				if calls.Add(1) == 1 {
					return turn{Text: "Part one.", HangAfter: true}
				}
				return turn{Text: answer}
			}, false, func(c *RuntimeConfig) { cfg = *c })
			// The registry with the route under test (newRTEnv's has none).
			rt := model.Route{Pattern: "claude-*", Provider: model.ProviderAnthropic, APIKey: "sk-fake", BaseURL: e.fake.URL}
			if keyed {
				rt.IdempotencyHeader = header
			}
			reg, err := model.NewRegistry(model.RegistryConfig{Routes: []model.Route{rt}, Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			e.rt.Stop()
			cfg.Models = reg
			first := e.restart(t, cfg, "node-test/boot-2")

			s := e.session(t, "claude-test", `[]`)
			st := e.follow(t, s.ID)
			e.say(t, s.ID, "go")
			st.untilType(EventAgentMessage)
			<-e.fake.Hanging
			first.Stop() // the op stays started: a shutdown leaves it to recovery

			e.restart(t, cfg, "node-test/boot-3") // same node, later boot: its start sweep recovers the turn
			st.untilType(EventStatusIdle)

			ops, err := e.st.ListOps(context.Background(), s.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			var opID string
			for _, op := range ops {
				if op.Kind == journal.KindModelRequest {
					if opID != "" {
						t.Fatalf("two model request ops: %s and %s", opID, op.ID)
					}
					opID = op.ID
				}
			}
			reqs := e.fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want the cut-off one and its recovery", len(reqs))
			}
			var texts []string
			for _, ev := range st.all {
				if ev.Type == EventAgentMessage {
					for _, c := range body(t, ev).Content {
						texts = append(texts, c.Text)
					}
				}
			}
			last := reqs[1].Messages[len(reqs[1].Messages)-1]
			if keyed {
				for i, r := range reqs {
					if got := r.Header.Get(header); got != opID {
						t.Errorf("request %d: %s = %q, want the op id %s", i, header, got, opID)
					}
				}
				if last.Role != "user" || len(reqs[1].Messages) != len(reqs[0].Messages) {
					t.Errorf("the resend is not the request that was cut off: %d messages (was %d), last by %s",
						len(reqs[1].Messages), len(reqs[0].Messages), last.Role)
				}
				if !slices.Equal(texts, []string{"Part one."}) {
					t.Errorf("agent messages %q, want the delivered block once", texts)
				}
				return
			}
			for i, r := range reqs {
				if got := r.Header.Get(header); got != "" {
					t.Errorf("request %d: %s = %q with no idempotency_header configured", i, header, got)
				}
			}
			if last.Role != "assistant" {
				t.Errorf("the recovered request does not continue from the partial output (last message by %s)", last.Role)
			}
			if !slices.Equal(texts, []string{"Part one.", "Part two."}) {
				t.Errorf("agent messages %q, want [Part one. Part two.]", texts)
			}
		})
	}
}

// restart starts another runtime on e's store and event log, as a later
// boot of the node would, and makes it e's; it stops with the test.
func (e *rtEnv) restart(t *testing.T, cfg RuntimeConfig, owner string) *Runtime {
	t.Helper()
	cfg.Owner = owner
	rt, err := NewRuntime(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	e.rt = rt
	return rt
}

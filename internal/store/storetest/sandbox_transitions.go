package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The history of a sandbox's states, written with its facts.
var sandboxTransitionCases = []sandboxCase{
	{"TransitionsFollowTheFacts", testTransitionsFollowFacts},
	{"TransitionsNotWrittenByALosingUpdate", testTransitionsStale},
	{"TransitionsKeepTheNewest", testTransitionsWindow},
	{"TransitionsGoWithTheSandbox", testTransitionsDelete},
}

func (e *sbEnv) transitions(id string) []store.SandboxTransition {
	e.t.Helper()
	trs, err := e.s.ListSandboxTransitions(e.ctx, id)
	mustOK(e.t, err, "ListSandboxTransitions")
	return trs
}

func (e *sbEnv) update(sb *store.Sandbox, change func(*store.Sandbox)) *store.Sandbox {
	e.t.Helper()
	next := *sb
	change(&next)
	out, err := e.s.UpdateSandbox(e.ctx, &next)
	mustOK(e.t, err, "UpdateSandbox")
	return out
}

// states renders a history as "seq:state@offset/generation" from sbEpoch,
// or "seq:state@store" for a time the store's clock chose.
func states(trs []store.SandboxTransition, storeTimes map[int64]bool) string {
	var b []string
	for _, tr := range trs {
		at := "store"
		if !storeTimes[tr.Seq] {
			at = tr.At.Sub(sbEpoch).String()
		}
		b = append(b, fmt.Sprintf("%d:%s@%s/%d", tr.Seq, tr.State, at, tr.Generation))
	}
	return strings.Join(b, " ")
}

func testTransitionsFollowFacts(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_h", TenantID: "tnt_a", CreatedAt: sbAt(0)})
	// Warm-up: a handle and its start; then warmed.
	sb = e.update(sb, func(s *store.Sandbox) {
		s.Handle, s.StartedAt, s.Generation = json.RawMessage(`{"pid":1}`), sbAtPtr(time.Second), 1
	})
	sb = e.update(sb, func(s *store.Sandbox) { s.WarmedAt = sbAtPtr(2 * time.Second) })
	// Writes that change no state add nothing.
	sb = e.update(sb, func(s *store.Sandbox) { s.Metadata = map[string]string{"k": "v"} })
	sb = e.update(sb, func(s *store.Sandbox) { s.LastActivityAt = sbAt(time.Minute) })
	mustOK(e.t, e.s.TouchSandbox(e.ctx, sb.ID, sbAt(2*time.Minute)), "TouchSandbox")
	// A stop, its end (the facts cleared), a second start that is warm at
	// once, and the end.
	sb = e.update(sb, func(s *store.Sandbox) { s.StoppingAt = sbAtPtr(3 * time.Second) })
	sb = e.update(sb, func(s *store.Sandbox) {
		s.Handle, s.StartedAt, s.WarmedAt, s.StoppingAt = nil, nil, nil, nil
	})
	stopped := sb.UpdatedAt
	sb = e.update(sb, func(s *store.Sandbox) {
		s.Handle, s.StartedAt, s.WarmedAt, s.Generation = json.RawMessage(`{"pid":2}`), sbAtPtr(4*time.Second), sbAtPtr(5*time.Second), 2
	})
	e.update(sb, func(s *store.Sandbox) { s.DestroyedAt = sbAtPtr(6 * time.Second) })

	trs := e.transitions("sbx_h")
	got := states(trs, map[int64]bool{5: true})
	want := "1:cold@0s/0 2:warming@1s/1 3:active@2s/1 4:stopping@3s/1 5:cold@store/1 6:active@5s/2 7:destroyed@6s/2"
	if got != want {
		e.t.Fatalf("history:\n got %s\nwant %s", got, want)
	}
	// The cold after a stop has no fact of its own: it is the time of the
	// write that cleared the facts.
	if !trs[4].At.Equal(stopped) {
		e.t.Fatalf("cold at %v: want the time of its write, %v", trs[4].At, stopped)
	}
	_, err := e.s.ListSandboxTransitions(e.ctx, "sbx_unknown")
	mustErrIs(e.t, err, store.ErrNotFound, "ListSandboxTransitions(unknown)")
}

func testTransitionsStale(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_hs", TenantID: "tnt_a", CreatedAt: sbAt(0)})
	cur := e.update(sb, func(s *store.Sandbox) { s.Image = "v2" })
	stale := *sb // at version 1, now stale
	stale.Handle, stale.StartedAt = json.RawMessage(`{"pid":1}`), sbAtPtr(time.Second)
	_, err := e.s.UpdateSandbox(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "stale UpdateSandbox")
	if got := states(e.transitions("sbx_hs"), nil); got != "1:cold@0s/0" {
		e.t.Fatalf("history after a losing update: %s, want only the creation's cold", got)
	}
	e.update(cur, func(s *store.Sandbox) { s.Handle, s.StartedAt = json.RawMessage(`{"pid":1}`), sbAtPtr(time.Second) })
	if got := states(e.transitions("sbx_hs"), nil); got != "1:cold@0s/0 2:warming@1s/0" {
		e.t.Fatalf("history: %s", got)
	}
}

func testTransitionsWindow(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_hw", TenantID: "tnt_a", CreatedAt: sbAt(0)})
	n := store.MaxSandboxTransitions + 15
	for i := 1; i < n; i++ { // cold, then warming and cold in turn
		sb = e.update(sb, func(s *store.Sandbox) {
			if i%2 == 1 {
				s.Handle, s.StartedAt = json.RawMessage(`{"pid":1}`), sbAtPtr(time.Duration(i)*time.Second)
			} else {
				s.Handle, s.StartedAt = nil, nil
			}
		})
	}
	trs := e.transitions("sbx_hw")
	if len(trs) != store.MaxSandboxTransitions {
		e.t.Fatalf("%d transitions kept, want the newest %d", len(trs), store.MaxSandboxTransitions)
	}
	if first, last := trs[0].Seq, trs[len(trs)-1].Seq; first != int64(n-store.MaxSandboxTransitions+1) || last != int64(n) {
		e.t.Fatalf("kept seq %d..%d, want %d..%d", first, last, n-store.MaxSandboxTransitions+1, n)
	}
	for i := 1; i < len(trs); i++ {
		if trs[i].Seq != trs[i-1].Seq+1 || trs[i].State == trs[i-1].State {
			e.t.Fatalf("transitions %d and %d: %+v then %+v", i-1, i, trs[i-1], trs[i])
		}
	}
}

func testTransitionsDelete(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_hd", TenantID: "tnt_a", CreatedAt: sbAt(0)})
	e.update(sb, func(s *store.Sandbox) { s.Handle, s.StartedAt = json.RawMessage(`{"pid":1}`), sbAtPtr(time.Second) })
	mustOK(e.t, e.s.DeleteSandbox(e.ctx, "sbx_hd"), "DeleteSandbox")
	_, err := e.s.ListSandboxTransitions(e.ctx, "sbx_hd")
	mustErrIs(e.t, err, store.ErrNotFound, "ListSandboxTransitions after delete")
	// A sandbox made again under the id starts a history of its own.
	e.create(store.Sandbox{ID: "sbx_hd", TenantID: "tnt_a", CreatedAt: sbAt(time.Hour), Handle: json.RawMessage(`{"pid":9}`), StartedAt: sbAtPtr(time.Hour)})
	if got := states(e.transitions("sbx_hd"), nil); got != "1:warming@1h0m0s/0" {
		e.t.Fatalf("history of the new sandbox: %s", got)
	}
}

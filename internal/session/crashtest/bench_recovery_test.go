package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// TestBenchOrphanResume measures the time from a restart until every one
// of N orphaned sessions (run rows an earlier boot of this node left, with
// leases far from expired) has been claimed by the new boot, resumed (its
// turn running again: claimed and no longer rescheduling) and finished.
// It is a measurement, not a check: it runs only when
// AGENTKERNEL_BENCH_RECOVERY is set (to N, default 1000).
//
//	AGENTKERNEL_BENCH_RECOVERY=1000 go test -run TestBenchOrphanResume -v ./internal/session/crashtest/
func TestBenchOrphanResume(t *testing.T) {
	v := os.Getenv("AGENTKERNEL_BENCH_RECOVERY")
	if v == "" {
		t.Skip("AGENTKERNEL_BENCH_RECOVERY is not set")
	}
	count, err := strconv.Atoi(v)
	if err != nil || count <= 0 {
		count = 1000
	}
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn { return anthropictest.Turn{Text: "ok"} })
	n := newNode(t, "sqlite", fake.URL)
	n.start()
	tmpl := newSession(t, n.client())
	n.stop()

	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(n.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	s0, err := st.GetManagedSession(ctx, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	oldOwner := host + "/boot_earlier"
	for i := 0; i < count; i++ {
		s, err := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: s0.TenantID, AgentID: s0.AgentID,
			AgentVersion: s0.AgentVersion, EnvironmentID: s0.EnvironmentID, Doc: s0.Doc})
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := json.Marshal(map[string]any{"type": "user.message", "content": []map[string]any{{"type": "text", "text": fmt.Sprintf("q%d", i)}}})
		evs, err := st.AppendEvents(ctx, s.ID, []store.NewEvent{{Type: "user.message", Data: msg}, {Type: "session.status_running", Data: json.RawMessage(`{"type":"session.status_running"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.InsertRunRow(ctx, &store.RunRow{SessionID: s.ID, TurnSeq: evs[0].Seq, Owner: oldOwner,
			LeaseExpiresAt: time.Now().Add(time.Hour), LastProgressSeq: evs[1].Seq}); err != nil {
			t.Fatal(err)
		}
	}
	// unclaimed: rows still the earlier boot's; unresumed: those and the
	// claimed ones whose turn has not resumed yet (status rescheduling).
	orphans := func() (unclaimed, unresumed, rows int) {
		rs, err := st.ListRunRows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Owner == oldOwner {
				unclaimed++
			}
			if r.Owner == oldOwner || r.Recovering {
				unresumed++
			}
		}
		return unclaimed, unresumed, len(rs)
	}
	if left, _, _ := orphans(); left != count {
		t.Fatalf("%d orphans set up, want %d", left, count)
	}
	begin := time.Now()
	n.start()
	healthy := time.Since(begin)
	var claimed, resumed, idle time.Duration
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		unclaimed, unresumed, rows := orphans()
		if unclaimed == 0 && claimed == 0 {
			claimed = time.Since(begin)
		}
		if unresumed == 0 && resumed == 0 {
			resumed = time.Since(begin)
		}
		if rows == 0 {
			idle = time.Since(begin)
			break
		}
	}
	n.stop()
	st.Close()
	if resumed == 0 || idle == 0 {
		t.Fatalf("not all orphans were resumed/finished in 5 minutes\n%s", n.logs())
	}
	t.Logf("%d orphaned sessions: daemon healthy after %s; all claimed by the new boot %s, all resumed (claimed, status running again) %s, all turns finished (idle) %s after the restart",
		count, healthy.Round(time.Millisecond), claimed.Round(time.Millisecond), resumed.Round(time.Millisecond), idle.Round(time.Millisecond))
}

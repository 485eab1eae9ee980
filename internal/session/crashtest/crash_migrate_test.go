package crashtest

import (
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	_ "modernc.org/sqlite"
)

// oldModelDB is a database an agentkernel of the two-model days left
// (before migration 0016): five Managed Agents sessions in managed_sessions,
// session_events and run_rows — three with two finished turns each, one
// never run, one killed mid-turn with its run row still there.
const oldModelDB = "../../store/sqlite/testdata/oldmodel.db.gz"

type oldEvent struct {
	Seq            int64
	ID, Type, Data string
}

// readOld reads the sessions of the old tables, by id, and their events.
func readOld(t *testing.T, path string) (ids []string, evs map[string][]oldEvent) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT m.id, e.seq, e.id, e.type, e.data FROM managed_sessions m
		LEFT JOIN session_events e ON e.session_id = m.id ORDER BY m.id, e.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	evs = map[string][]oldEvent{}
	for rows.Next() {
		var (
			sid           string
			seq           sql.NullInt64
			id, typ, data sql.NullString
		)
		if err := rows.Scan(&sid, &seq, &id, &typ, &data); err != nil {
			t.Fatal(err)
		}
		if _, seen := evs[sid]; !seen {
			ids = append(ids, sid)
			evs[sid] = []oldEvent{}
		}
		if seq.Valid {
			evs[sid] = append(evs[sid], oldEvent{Seq: seq.Int64, ID: id.String, Type: typ.String, Data: data.String})
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids, evs
}

// count runs a COUNT(*) query on the database at path.
func count(t *testing.T, path, q string, args ...any) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func gunzipTo(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationKilledMidway: a daemon moving an old database's sessions
// to the one session model is killed inside the third session's
// transaction. The two before it are moved whole, it and the rest not at
// all; the restarted daemon finishes the move, and every session answers
// the SDK with exactly the events it had — the mid-turn one is recovered,
// and a new turn runs on a migrated session.
func TestMigrationKilledMidway(t *testing.T) {
	n := newNode(t, "sqlite", "http://127.0.0.1:1")
	turns := filepath.Join(n.home, "turns.yaml")
	if err := os.WriteFile(turns, []byte(`loop: true
turns:
  - text: "Writing a file."
    tool_calls:
      - name: bash
        input: {command: "echo hello > a.txt && cat a.txt"}
  - text: "Done."
`), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err := os.OpenFile(filepath.Join(n.home, "agentkernel.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's agents name these models.
	fmt.Fprintf(conf, "\n[models.\"scripted-demo\"]\nprovider = \"scripted\"\nfile = %q\n"+
		"[models.\"scripted-slow\"]\nprovider = \"scripted\"\nfile = %q\n", turns, turns)
	conf.Close()
	db := filepath.Join(n.home, "state.db")
	gunzipTo(t, oldModelDB, db)
	key, err := os.ReadFile("../../store/sqlite/testdata/oldmodel.admin.key")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.home, "admin.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	ids, want := readOld(t, db)
	if len(ids) != 5 {
		t.Fatalf("fixture has %d sessions, want 5", len(ids))
	}

	if err := os.WriteFile(n.flag("session-migrate-hang"), []byte(ids[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	n.spawn()
	n.waitReached("session-migrate-hang")
	n.kill()
	n.disarm("session-migrate-hang")
	for i, sid := range ids {
		moved := count(t, db, `SELECT COUNT(*) FROM sessions WHERE id = ? AND kind = 'managed'`, sid)
		old := count(t, db, `SELECT COUNT(*) FROM managed_sessions WHERE id = ?`, sid)
		msgs := count(t, db, `SELECT COUNT(*) FROM messages WHERE session_id = ?`, sid)
		if i < 2 && (moved != 1 || old != 0 || msgs != len(want[sid])) {
			t.Fatalf("session %d (%s) before the kill point: moved=%d old=%d events=%d, want moved whole", i, sid, moved, old, msgs)
		}
		if i >= 2 && (moved != 0 || old != 1 || msgs != 0) {
			t.Fatalf("session %d (%s) at or after the kill point: moved=%d old=%d events=%d, want not moved at all", i, sid, moved, old, msgs)
		}
	}

	n.start()
	if got := count(t, db, `SELECT COUNT(*) FROM sqlite_master WHERE name IN ('managed_sessions', 'session_events', 'run_rows')`); got != 0 {
		t.Fatalf("%d old session tables left after the migration finished", got)
	}
	c := n.client()
	ctx := context.Background()
	listed := map[string]bool{}
	it := c.Beta.Sessions.ListAutoPaging(ctx, anthropic.BetaSessionListParams{})
	for it.Next() {
		listed[it.Current().ID] = true
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	for _, sid := range ids {
		if !listed[sid] {
			t.Fatalf("session %s is not listed after the migration", sid)
		}
		s, err := c.Beta.Sessions.Get(ctx, sid, anthropic.BetaSessionGetParams{})
		if err != nil {
			t.Fatalf("get %s: %v", sid, err)
		}
		got := waitIdle(t, n, c, sid, 0)
		if len(got) < len(want[sid]) {
			t.Fatalf("session %s (%s) has %d events after the migration, had %d", sid, s.Title, len(got), len(want[sid]))
		}
		for i, w := range want[sid] {
			if got[i].ID != w.ID || got[i].Type != w.Type || !sameJSONFields(t, got[i].Raw, w.Data) {
				t.Fatalf("session %s event %d: got %s %s %s, had %s %s %s", sid, i+1, got[i].ID, got[i].Type, got[i].Raw, w.ID, w.Type, w.Data)
			}
		}
	}
	// A migrated session runs a new turn (its first: no sandbox yet).
	var fresh string
	for _, sid := range ids {
		if len(want[sid]) == 0 {
			fresh = sid
		}
	}
	if fresh == "" {
		t.Fatal("fixture has no never-run session")
	}
	send(t, c, fresh, "hello")
	evs := waitIdle(t, n, c, fresh, 1)
	checkTrajectory(t, evs)
	results := ofType(evs, "agent.tool_result")
	if len(results) != 1 || strings.TrimSpace(results[0].text()) != "hello" {
		t.Fatalf("new turn on a migrated session: results %v", results)
	}
	idles := ofType(evs, "session.status_idle")
	if !strings.Contains(idles[len(idles)-1].Raw, `"stop_details":null`) {
		t.Fatalf("session.status_idle without stop_details: %s", idles[len(idles)-1].Raw)
	}
	s, err := c.Beta.Sessions.Get(ctx, fresh, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats.ActiveSeconds <= 0 || s.Stats.ActiveSeconds > s.Stats.DurationSeconds {
		t.Fatalf("stats after a turn: active %v s of %v s", s.Stats.ActiveSeconds, s.Stats.DurationSeconds)
	}
}

// sameJSONFields: every field of the stored event body is in the listed
// event with the same value (the API adds id and processed_at).
func sameJSONFields(t *testing.T, listed, stored string) bool {
	t.Helper()
	var l, s map[string]any
	if err := json.Unmarshal([]byte(listed), &l); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(stored), &s); err != nil {
		t.Fatal(err)
	}
	for k, v := range s {
		if !reflect.DeepEqual(l[k], v) {
			return false
		}
	}
	return true
}

package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

var (
	guestOnce sync.Once
	guestBin  string
)

// rtEnv is a runtime on a real SQLite store, the real event log, a real
// sandbox manager with the process driver (bubblewrap), and the anthropic
// provider pointed at an in-process fake Messages API.
type rtEnv struct {
	st   store.Store
	log  *EventLog
	rt   *Runtime
	mgr  *sandbox.Manager
	fake *anthropictest.Server
}

func newRTEnv(t *testing.T, play func(anthropictest.Request) anthropictest.Turn, withSandbox bool, opts ...func(*RuntimeConfig)) *rtEnv {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	e := &rtEnv{st: st, log: NewEventLog(st, EventLogConfig{})}
	if play != nil {
		e.fake = anthropictest.New(t, play)
	}
	routes := []model.Route{{Pattern: "claude-*", Provider: model.ProviderAnthropic, APIKey: "sk-fake"}}
	if e.fake != nil {
		routes[0].BaseURL = e.fake.URL
	}
	reg, err := model.NewRegistry(model.RegistryConfig{Routes: routes, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := RuntimeConfig{Store: st, Events: e.log, Models: reg, Owner: "node-test/boot-1"}
	if withSandbox {
		e.mgr = newManager(t, st, home)
		cfg.Sandboxes = e.mgr
	}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := NewRuntime(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	t.Cleanup(func() {
		rt.Stop()
		e.log.Close()
		if e.mgr != nil {
			list, _ := e.mgr.List(ctx, "", "")
			for _, in := range list {
				_, _ = e.mgr.Destroy(ctx, "", in.ID)
			}
			e.mgr.Close()
		}
		st.Close()
	})
	return e
}

func newManager(t *testing.T, st store.Store, home string) *sandbox.Manager {
	t.Helper()
	guestOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("akguest")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(sandboxtest.BuildGuest(t))
		if err != nil {
			t.Fatal(err)
		}
		guestBin = filepath.Join(dir, "guest")
		if err := os.WriteFile(guestBin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	blobs, err := fsblob.Open(context.Background(), filepath.Join(home, "blobs"), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	drv, err := process.New(process.Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akrt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	m, err := sandbox.NewManager(sandbox.ManagerConfig{
		Store: st, Blobs: blobs, Drivers: map[string]sandbox.Driver{"process": drv},
		GuestBinary: guestBin, DataDir: filepath.Join(home, "sandboxes"), RunDir: run,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// session creates an agent (with tools) and a session for tenant t1.
func (e *rtEnv) session(t *testing.T, modelID string, tools string) *store.ManagedSession {
	t.Helper()
	ctx := context.Background()
	if tools == "" {
		tools = `[{"type":"agent_toolset_20260401"}]`
	}
	doc := `{"name":"tester","model":{"id":"` + modelID + `"},"system":"You are a test.","tools":` + tools + `}`
	a, err := e.st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(doc)})
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.st.CreateEnvironment(ctx, &store.Environment{TenantID: "t1", Doc: json.RawMessage(`{"name":"env","metadata":{"agentkernel.driver":"process"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, EnvironmentID: env.ID, Doc: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// send appends a user event and wakes the runtime, as the API does.
func (e *rtEnv) send(t *testing.T, sessionID, typ string, body map[string]any) store.SessionEvent {
	t.Helper()
	evs, err := e.log.Append(context.Background(), sessionID, []store.NewEvent{newEvent(typ, body)})
	if err != nil {
		t.Fatal(err)
	}
	e.rt.Wake(sessionID)
	return evs[0]
}

func (e *rtEnv) say(t *testing.T, sessionID, text string) store.SessionEvent {
	return e.send(t, sessionID, EventUserMessage, map[string]any{"content": textContent(text)})
}

// stream follows a session's events from the start.
type stream struct {
	t   *testing.T
	ch  <-chan store.SessionEvent
	all []store.SessionEvent
}

func (e *rtEnv) follow(t *testing.T, sessionID string) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := e.log.Subscribe(ctx, sessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &stream{t: t, ch: ch}
}

// until reads events until one satisfies pred and returns it. The
// deadline only keeps a broken runtime from hanging the test.
func (s *stream) until(pred func(ev store.SessionEvent) bool) store.SessionEvent {
	s.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				s.t.Fatal("event stream closed")
			}
			s.all = append(s.all, ev)
			if pred(ev) {
				return ev
			}
		case <-deadline:
			s.t.Fatalf("event not seen; got %s", s.types())
		}
	}
}

func (s *stream) untilType(typ string) store.SessionEvent {
	s.t.Helper()
	return s.until(func(ev store.SessionEvent) bool { return ev.Type == typ })
}

func (s *stream) types() []string {
	out := make([]string, len(s.all))
	for i, ev := range s.all {
		out[i] = ev.Type
	}
	return out
}

func (s *stream) count(typ string) int {
	n := 0
	for _, ev := range s.all {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func body(t *testing.T, ev store.SessionEvent) eventBody {
	t.Helper()
	var b eventBody
	if err := json.Unmarshal(ev.Data, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func stopType(t *testing.T, ev store.SessionEvent) string {
	t.Helper()
	var b struct {
		StopReason struct {
			Type     string   `json:"type"`
			EventIDs []string `json:"event_ids"`
		} `json:"stop_reason"`
	}
	if err := json.Unmarshal(ev.Data, &b); err != nil {
		t.Fatal(err)
	}
	return b.StopReason.Type
}

func sandboxExec(shell string) guest.ExecRequest { return guest.ExecRequest{Shell: shell} }

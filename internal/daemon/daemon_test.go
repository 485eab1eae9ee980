package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recordingService struct {
	started, stopped chan struct{}
}

func (s *recordingService) Start(context.Context) error { close(s.started); return nil }
func (s *recordingService) Stop()                       { close(s.stopped) }

// TestGracefulShutdown: cancelling Run's context lets an in-flight request
// finish with its full answer, stops every service and returns nil, and no
// goroutine outlives it (goleak in TestMain).
func TestGracefulShutdown(t *testing.T) {
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	// Not the default under $TMPDIR, which would outlive the test.
	cfg.Sandbox.RunDir = filepath.Join(cfg.Home, "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := daemon.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	svc := &recordingService{started: make(chan struct{}), stopped: make(chan struct{})}
	d.AddService(svc)

	inHandler := make(chan struct{})
	release := make(chan struct{})
	d.Server().Handle("GET /test/slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		_, _ = io.WriteString(w, "finished")
	}))
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-svc.started

	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + d.Addr() + "/test/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	<-inHandler
	cancel() // SIGTERM arrives while the request is in flight

	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before the in-flight request finished", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	r := <-got
	if r.err != nil || r.body != "finished" {
		t.Fatalf("in-flight request: %q %v", r.body, r.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-svc.stopped:
	default:
		t.Fatal("service was not stopped")
	}
}

package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

const tenant = "tnt_wh"

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// received is one request the receiver saw.
type received struct {
	body    []byte
	headers http.Header
}

// receiver is an in-process endpoint that fails the first `fail`
// requests with 503 and records the rest.
type receiver struct {
	mu   sync.Mutex
	fail int
	got  []received
	seen chan struct{}
}

func newReceiver(t *testing.T, fail int) (*receiver, *httptest.Server) {
	r := &receiver{fail: fail, seen: make(chan struct{}, 1024)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		if r.fail > 0 {
			r.fail--
			r.mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.got = append(r.got, received{body: body, headers: req.Header.Clone()})
		r.mu.Unlock()
		r.seen <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	for {
		r.mu.Lock()
		got := len(r.got)
		r.mu.Unlock()
		if got >= n {
			break
		}
		select {
		case <-r.seen:
		case <-time.After(30 * time.Second):
			t.Fatalf("receiver got %d deliveries, want %d", got, n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func start(t *testing.T, cfg Config) *Service {
	t.Helper()
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	cfg.PollInterval = 5 * time.Millisecond
	s := New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func newSession(t *testing.T, st store.Store, id string) {
	t.Helper()
	if _, err := st.CreateManagedSession(context.Background(), &store.ManagedSession{ID: id, TenantID: tenant}); err != nil {
		t.Fatal(err)
	}
}

func appendTypes(t *testing.T, st store.Store, id string, types ...string) {
	t.Helper()
	evs := make([]store.NewEvent, len(types))
	for i, typ := range types {
		evs[i] = store.NewEvent{Type: typ}
	}
	if _, err := st.AppendEvents(context.Background(), id, evs); err != nil {
		t.Fatal(err)
	}
}

// Every event reaches a receiver that fails its first deliveries, in
// order per session, each verified by the official SDK's Unwrap; a
// tampered body fails it.
func TestDeliveryRetriesInOrderVerifiedByUnwrap(t *testing.T) {
	st := openStore(t)
	rcv, srv := newReceiver(t, 5)
	svc := start(t, Config{Store: st, AllowLoopback: true})
	ep, err := svc.Create(context.Background(), tenant, CreateParams{URL: srv.URL + "/hook", EventTypes: []string{
		store.WebhookSessionCreated, store.WebhookSessionStatusRunStarted, store.WebhookSessionStatusIdled,
		store.WebhookSessionStatusTerminated}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("secret %q is not whsec_…", ep.Secret)
	}
	sessions := []string{"sesn_1", "sesn_2", "sesn_3"}
	for _, id := range sessions {
		newSession(t, st, id)
		appendTypes(t, st, id, "user.message", "session.status_running", "agent.message", "session.status_idle")
		appendTypes(t, st, id, "session.status_running", "session.status_idle", "session.status_terminated")
	}
	want := []string{"session.created", "session.status_run_started", "session.status_idled",
		"session.status_run_started", "session.status_idled", "session.status_terminated"}
	got := rcv.wait(t, len(want)*len(sessions))

	client := anthropic.NewClient(option.WithWebhookKey(ep.Secret), option.WithAPIKey("unused"))
	perSession := map[string][]string{}
	for i, r := range got {
		ev, err := client.Beta.Webhooks.Unwrap(r.body, r.headers)
		if err != nil {
			t.Fatalf("delivery %d: Unwrap: %v", i, err)
		}
		if ev.ID != r.headers.Get("webhook-id") || !strings.HasPrefix(ev.ID, "whe_") {
			t.Fatalf("delivery %d: event id %q, webhook-id %q", i, ev.ID, r.headers.Get("webhook-id"))
		}
		if ev.Data.OrganizationID != tenant {
			t.Fatalf("delivery %d: organization_id %q", i, ev.Data.OrganizationID)
		}
		perSession[ev.Data.ID] = append(perSession[ev.Data.ID], ev.Data.Type)
	}
	for _, id := range sessions {
		if strings.Join(perSession[id], " ") != strings.Join(want, " ") {
			t.Fatalf("session %s received %v, want %v", id, perSession[id], want)
		}
	}
	tampered := []byte(strings.Replace(string(got[0].body), "session.", "sessiox.", 1))
	if _, err := client.Beta.Webhooks.Unwrap(tampered, got[0].headers); err == nil {
		t.Fatal("Unwrap accepted a tampered body")
	}
	other := anthropic.NewClient(option.WithWebhookKey(newSecret()), option.WithAPIKey("unused"))
	if _, err := other.Beta.Webhooks.Unwrap(got[0].body, got[0].headers); err == nil {
		t.Fatal("Unwrap accepted a body signed with another endpoint's secret")
	}
}

// A delivery that keeps failing is dead after max_attempts, does not hold
// back the session's later deliveries, and is sent again on request.
func TestDeadLetterAndRedeliver(t *testing.T) {
	st := openStore(t)
	rcv, srv := newReceiver(t, 3)
	attempted := make(chan *store.WebhookDelivery, 64)
	svc := start(t, Config{Store: st, AllowLoopback: true, MaxAttempts: 3, Attempted: attempted})
	ep, err := svc.Create(context.Background(), tenant, CreateParams{URL: srv.URL, EventTypes: []string{store.WebhookSessionStatusIdled}})
	if err != nil {
		t.Fatal(err)
	}
	newSession(t, st, "sesn_d")
	appendTypes(t, st, "sesn_d", "session.status_idle")
	var dead *store.WebhookDelivery
	for dead == nil {
		d := <-attempted
		switch {
		case d.Status == store.DeliveryDead:
			dead = d
		case d.Status != store.DeliveryPending:
			t.Fatalf("delivery %s is %s after %d attempts, want dead after 3", d.ID, d.Status, d.Attempts)
		}
	}
	if dead.Attempts != 3 || dead.LastStatus != 503 || !strings.Contains(dead.LastError, "503") {
		t.Fatalf("dead delivery: attempts %d, last status %d, last error %q", dead.Attempts, dead.LastStatus, dead.LastError)
	}
	appendTypes(t, st, "sesn_d", "session.status_idle")
	rcv.wait(t, 1)
	d, err := svc.Redeliver(context.Background(), tenant, ep.ID, dead.ID)
	if err != nil || d.Status != store.DeliveryPending {
		t.Fatalf("Redeliver: %v, %+v", err, d)
	}
	got := rcv.wait(t, 2)
	if got[1].headers.Get("webhook-id") != dead.EventID {
		t.Fatalf("redelivered webhook-id %q, want %q", got[1].headers.Get("webhook-id"), dead.EventID)
	}
	if _, err := svc.Redeliver(context.Background(), "tnt_other", ep.ID, dead.ID); !isStatus(err, 404) {
		t.Fatalf("another tenant's redeliver: %v, want 404", err)
	}
}

func isStatus(err error, status int) bool {
	var ie *InputError
	return errors.As(err, &ie) && ie.Status == status
}

func TestRegistrationValidation(t *testing.T) {
	st := openStore(t)
	svc := New(Config{Store: st})
	ctx := context.Background()
	for _, c := range []struct {
		p    CreateParams
		want string
	}{
		{CreateParams{URL: "https://h.example.com", EventTypes: []string{"agent.deleted", "session.status_idled", "session.pending"}},
			"agent.deleted, session.pending not supported yet"},
		{CreateParams{URL: "https://h.example.com", EventTypes: []string{"session.nope"}}, `"event_types[0]": "session.nope" is not a webhook event type`},
		{CreateParams{URL: "https://h.example.com"}, `"event_types": at least one`},
		{CreateParams{URL: "ftp://h.example.com", EventTypes: []string{"session.created"}}, `"url"`},
		{CreateParams{URL: "https://u:p@h.example.com", EventTypes: []string{"session.created"}}, "credentials"},
		{CreateParams{URL: "http://127.0.0.1:9/x", EventTypes: []string{"session.created"}}, "allow_loopback"},
		{CreateParams{URL: "http://localhost:9/x", EventTypes: []string{"session.created"}}, "allow_loopback"},
		{CreateParams{URL: "http://169.254.169.254/latest", EventTypes: []string{"session.created"}}, "internal address"},
		{CreateParams{URL: "http://10.1.2.3/x", EventTypes: []string{"session.created"}}, "internal address"},
	} {
		_, err := svc.Create(ctx, tenant, c.p)
		if !isStatus(err, 400) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Create(%+v): %v, want a 400 naming %q", c.p, err, c.want)
		}
	}
	ep, err := svc.Create(ctx, tenant, CreateParams{URL: "https://h.example.com", EventTypes: []string{"session.created"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, "tnt_other", ep.ID); !isStatus(err, 404) {
		t.Fatalf("another tenant's Get: %v", err)
	}
	if err := svc.Delete(ctx, "tnt_other", ep.ID); !isStatus(err, 404) {
		t.Fatalf("another tenant's Delete: %v", err)
	}
	if _, err := svc.Deliveries(ctx, "tnt_other", ep.ID, 0, 10, ""); !isStatus(err, 404) {
		t.Fatalf("another tenant's Deliveries: %v", err)
	}
	if err := svc.Delete(ctx, tenant, ep.ID); err != nil {
		t.Fatal(err)
	}
}

// The dialer checks the address a name resolves to, not the name: a
// public-looking name that resolves to loopback is refused unless the
// operator allows it, and allowed_hosts lets it through.
func TestDeliveryChecksResolvedAddress(t *testing.T) {
	_, srv := newReceiver(t, 0)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	resolve := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	url := "http://hooks.example.com:" + port + "/x"
	for _, c := range []struct {
		name    string
		allowed []string
		ok      bool
	}{
		{"refused", nil, false},
		{"allowed_hosts", []string{"hooks.example.com:" + port}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openStore(t)
			hosts, err := egress.ParseHosts(c.allowed)
			if err != nil {
				t.Fatal(err)
			}
			attempted := make(chan *store.WebhookDelivery, 8)
			svc := start(t, Config{Store: st, Resolve: resolve, AllowedHosts: hosts, MaxAttempts: 1, Attempted: attempted})
			if _, err := svc.Create(context.Background(), tenant, CreateParams{URL: url, EventTypes: []string{store.WebhookSessionCreated}}); err != nil {
				t.Fatal(err)
			}
			newSession(t, st, "sesn_g")
			d := <-attempted
			if got := d.Status == store.DeliveryDelivered; got != c.ok {
				t.Fatalf("delivery %s (%s), want delivered=%v", d.Status, d.LastError, c.ok)
			}
			if !c.ok && !strings.Contains(d.LastError, "resolves to 127.0.0.1") {
				t.Fatalf("refusal %q does not name the address", d.LastError)
			}
		})
	}
}

func TestBackoffGrowsWithJitterAndCaps(t *testing.T) {
	for _, c := range []struct {
		jitter float64
		n      int64
		want   time.Duration
	}{
		{0, 1, 500 * time.Millisecond}, {0.999999, 1, time.Second}, {0, 3, 2 * time.Second},
		{0.5, 4, 6 * time.Second}, {0, 30, 30 * time.Second},
	} {
		s := New(Config{BackoffBase: time.Second, BackoffMax: time.Minute, Jitter: func() float64 { return c.jitter }})
		if got := s.backoff(c.n); got.Round(time.Millisecond) != c.want {
			t.Errorf("backoff(%d) with jitter %v = %v, want %v", c.n, c.jitter, got, c.want)
		}
	}
}

var _ = strconv.Itoa

// The SDK's types agentkernel does not produce are exactly these, each
// refused at registration; every type it produces is one of the SDK's.
// agent.deleted, deployment.deleted: there is no delete of an agent or a
// deployment. session.pending/running/idled/requires_action: their
// meaning beside the session.status_* types is not the SDK's to tell.
// session.budget_reached: no budget is accepted. user_profile.*: there
// are no user profiles.
func TestRefusedEventTypes(t *testing.T) {
	want := []string{"session.pending", "session.running", "session.idled", "session.requires_action",
		"agent.deleted", "deployment.deleted", "session.budget_reached",
		"user_profile.enforcement_action_opened", "user_profile.enforcement_action_resolved"}
	var refused []string
	for _, typ := range sdkEventTypes {
		if !slices.Contains(store.WebhookEventTypes, typ) {
			refused = append(refused, typ)
		}
	}
	slices.Sort(refused)
	slices.Sort(want)
	if !slices.Equal(refused, want) {
		t.Fatalf("refused types: %v, want %v", refused, want)
	}
	for _, typ := range store.WebhookEventTypes {
		if !slices.Contains(sdkEventTypes, typ) {
			t.Errorf("%q is produced but is not an SDK webhook type", typ)
		}
	}
	svc := New(Config{Store: openStore(t)})
	for _, typ := range want {
		_, err := svc.Create(context.Background(), tenant, CreateParams{URL: "https://h.example.com", EventTypes: []string{typ}})
		if !isStatus(err, 400) || !strings.Contains(err.Error(), typ+" not supported yet") {
			t.Errorf("Create(%q): %v, want a 400 not supported yet", typ, err)
		}
	}
}

// The delivery loop prunes final deliveries older than the retention
// (at start and every PruneInterval); newer ones stay.
func TestLoopPrunesPastRetention(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	ep, err := st.CreateWebhookEndpoint(ctx, &store.WebhookEndpoint{TenantID: tenant, URL: "https://h.example.com",
		EventTypes: []string{store.WebhookSessionStatusIdled}, Secret: newSecret()})
	if err != nil {
		t.Fatal(err)
	}
	newSession(t, st, "sesn_prune")
	appendTypes(t, st, "sesn_prune", "session.status_idle", "session.status_idle")
	ds, err := st.ListWebhookDeliveries(ctx, store.ListWebhookDeliveriesParams{EndpointID: ep.ID})
	if err != nil || len(ds) != 2 {
		t.Fatalf("deliveries: %d %v", len(ds), err)
	}
	now := time.Now()
	for i, at := range []time.Time{now.Add(-2 * time.Hour), now} {
		if _, err := st.FinishWebhookAttempt(ctx, store.WebhookAttempt{ID: ds[i].ID, Delivered: true, At: at, NextAttemptAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	start(t, Config{Store: st, Retention: time.Hour, PruneInterval: 10 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := st.GetWebhookDelivery(ctx, ds[0].ID)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery past the retention is still there: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := st.GetWebhookDelivery(ctx, ds[1].ID); err != nil {
		t.Fatalf("the delivery within the retention: %v", err)
	}
}

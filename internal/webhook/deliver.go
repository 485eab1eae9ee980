package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Start runs the delivery loop; it returns at once.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop, s.done = cancel, make(chan struct{})
	s.st.SetWebhookNotify(s.Notify)
	go s.loop(ctx)
	return nil
}

// Stop ends the loop and waits for attempts in flight (they end with
// the context; an unfinished one is retried after its lease).
func (s *Service) Stop() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
	s.st.SetWebhookNotify(nil)
	s.client.CloseIdleConnections()
}

// Notify wakes the loop (new outbox rows, a redelivery).
func (s *Service) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// lease is how long a claimed delivery is hidden from other claimers: an
// attempt ends well before it, and after a crash it is retried then.
func (s *Service) lease() time.Duration { return s.cfg.Timeout + 5*time.Second }

func (s *Service) loop(ctx context.Context) {
	defer close(s.done)
	finished := make(chan struct{}, s.cfg.Concurrency)
	inflight := 0
	defer func() {
		for ; inflight > 0; inflight-- {
			<-finished
		}
	}()
	var nextPrune time.Time
	for {
		if now := s.cfg.Clock.Now(); !now.Before(nextPrune) {
			s.prune(ctx, now)
			nextPrune = now.Add(s.cfg.PruneInterval)
		}
		if free := s.cfg.Concurrency - inflight; free > 0 {
			ds, err := s.st.ClaimWebhookDeliveries(ctx, store.ClaimWebhookParams{Now: s.cfg.Clock.Now(),
				Lease: s.lease(), Limit: free})
			if err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "claim webhook deliveries", "err", err)
			}
			for _, d := range ds {
				inflight++
				go func() {
					s.attempt(ctx, d)
					finished <- struct{}{}
				}()
			}
			if len(ds) == free {
				// More may be due: claim again once a slot frees.
				select {
				case <-finished:
					inflight--
					continue
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-finished:
			inflight--
		case <-s.cfg.Clock.After(s.cfg.PollInterval):
		}
	}
}

// pruneBatch bounds one prune statement (a sweep runs them until one
// deletes fewer).
const pruneBatch = 1000

// prune deletes the final deliveries older than the retention.
func (s *Service) prune(ctx context.Context, now time.Time) {
	var total int64
	for {
		n, err := s.st.PruneWebhookDeliveries(ctx, now.Add(-s.cfg.Retention), pruneBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "prune webhook deliveries", "err", err)
			}
			break
		}
		if n < pruneBatch || ctx.Err() != nil {
			break
		}
	}
	if total > 0 {
		s.log.InfoContext(ctx, "pruned webhook deliveries", "deleted", total, "retention", s.cfg.Retention)
	}
}

// attempt sends one delivery and records the outcome.
func (s *Service) attempt(ctx context.Context, d *store.WebhookDelivery) {
	status, err := s.send(ctx, d)
	if ctx.Err() != nil {
		return // shutting down: the lease brings it back
	}
	now := s.cfg.Clock.Now()
	a := store.WebhookAttempt{ID: d.ID, At: now, NextAttemptAt: now, Status: int64(status), Claimed: d.NextAttemptAt}
	switch {
	case err == nil:
		a.Delivered = true
	case d.Attempts+1 >= int64(s.cfg.MaxAttempts):
		a.Dead, a.Error = true, err.Error()
	default:
		a.Error = err.Error()
		a.NextAttemptAt = now.Add(s.backoff(d.Attempts + 1))
	}
	out, ferr := s.st.FinishWebhookAttempt(context.WithoutCancel(ctx), a)
	if errors.Is(ferr, store.ErrConflict) {
		// Redelivered while this attempt ran: the redelivery stands, and
		// is sent again.
		s.Notify()
		return
	}
	if ferr != nil {
		s.log.WarnContext(ctx, "record webhook attempt", "delivery", d.ID, "err", ferr)
		return
	}
	if a.Dead {
		s.log.WarnContext(ctx, "webhook delivery dead", "delivery", d.ID, "endpoint", d.EndpointID,
			"attempts", out.Attempts, "err", a.Error)
	}
	// The session's next delivery may be claimable now.
	s.Notify()
	if s.cfg.Attempted != nil {
		select {
		case s.cfg.Attempted <- out:
		case <-ctx.Done():
		}
	}
}

// backoff is the wait after the n-th failed attempt: base·2^(n-1) capped
// at max, jittered uniformly into [d/2, d] so endpoints that failed
// together do not retry together.
func (s *Service) backoff(n int64) time.Duration {
	d := s.cfg.BackoffBase
	for i := int64(1); i < n && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.BackoffMax)
	return d/2 + time.Duration(s.cfg.Jitter()*float64(d/2))
}

// send POSTs the payload signed for the endpoint; a 2xx is delivered.
func (s *Service) send(ctx context.Context, d *store.WebhookDelivery) (int, error) {
	ep, err := s.st.GetWebhookEndpoint(ctx, d.EndpointID)
	if err != nil {
		return 0, fmt.Errorf("endpoint: %w", err)
	}
	h, err := Sign(ep.Secret, d.EventID, s.cfg.Clock.Now(), d.Payload)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, err
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentkernel-webhooks")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// Sign returns the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature) of payload, signed with secret by
// the library the SDK's Unwrap verifies with.
func Sign(secret, msgID string, at time.Time, payload []byte) (http.Header, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	sig, err := wh.Sign(msgID, at, payload)
	if err != nil {
		return nil, fmt.Errorf("sign webhook: %w", err)
	}
	h := http.Header{}
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h, nil
}

package lease_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

// The lease atom's conformance checks, on every backend, in real time.

func TestConformanceConcurrentTakesOneExpiresAt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		const takers = 16
		managers := make([]*lease.Manager, takers)
		for i := range managers {
			managers[i] = newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
		}
		for round := 0; round < 10; round++ {
			subject := fmt.Sprintf("service:web-%d:api.service", round)
			var wg sync.WaitGroup
			errs := make([]error, takers)
			grants := make([]*lease.Grant, takers)
			start := make(chan struct{})
			for i := range managers {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					grants[i], errs[i] = managers[i].TryTake(bg(t), subject, time.Minute, "d")
				}(i)
			}
			close(start)
			wg.Wait()
			var expires []time.Time
			for i, err := range errs {
				if err == nil {
					expires = append(expires, grants[i].ExpiresAt)
				} else if !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("round %d taker %d: %v (want held)", round, i, err)
				}
			}
			if len(expires) != 1 {
				t.Fatalf("round %d: %d expires_at answers, want exactly one", round, len(expires))
			}
		}
	})
}

// attempt is one try-take, timed on the host's clock (the store's clock for
// fs, and for the S3 server on this host).
type attempt struct {
	start, end time.Time
	g          *lease.Grant
	err        error
}

// pollUntilTaken try-takes subject every interval until it succeeds.
func pollUntilTaken(t *testing.T, m *lease.Manager, subject string, interval, limit time.Duration) []attempt {
	t.Helper()
	var out []attempt
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		a := attempt{start: time.Now()}
		a.g, a.err = m.TryTake(bg(t), subject, time.Minute, "d")
		a.end = time.Now()
		out = append(out, a)
		if a.err == nil {
			return out
		}
		if !errors.Is(a.err, lease.ErrHeld) {
			t.Fatalf("try-take: %v", a.err)
		}
		time.Sleep(interval)
	}
	t.Fatalf("not taken within %v", limit)
	return nil
}

// checkTakenAtInstantNotBefore: no attempt took the key before the instant;
// one took it no later than the instant plus the clock's uncertainty and the
// backend's slack.
func checkTakenAtInstantNotBefore(t *testing.T, b backend, s objstore.Store, attempts []attempt, instant time.Time) {
	t.Helper()
	last := attempts[len(attempts)-1]
	for _, a := range attempts[:len(attempts)-1] {
		if a.err == nil {
			t.Fatal("an earlier attempt succeeded")
		}
	}
	if !last.end.After(instant) || !last.g.AcquiredAt.After(instant) {
		t.Fatalf("taken before the instant %v: attempt ended %v, acquired_at %v", instant, last.end, last.g.AcquiredAt)
	}
	now, err := s.Now(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	late := instant.Add(now.Uncertainty() + b.slack)
	if last.start.After(late) {
		t.Fatalf("taken by an attempt that started at %v, more than %v after the instant %v", last.start, late.Sub(instant), instant)
	}
}

// Checks 2.1, 2.2, 3.1: a key whose holder never releases (here: a holder
// that simply stops) is takeable at its instant and not before.
func TestConformanceNeverReleasedTakeableAtInstant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		holder := newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
		g := mustTake(t, holder, "s", 2*time.Second)
		s := b.open(t, loc, clock.Real{})
		attempts := pollUntilTaken(t, newManager(t, s, clock.Real{}), "s", 25*time.Millisecond, 15*time.Second)
		checkTakenAtInstantNotBefore(t, b, s, attempts, g.ExpiresAt)
		if len(attempts) < 10 {
			t.Fatalf("only %d attempts: the key was not contested while held", len(attempts))
		}
	})
}

// Checks 4.1 and 4.2 in real time: the first waiter takes the key at the
// instant; the second, whose arrival term is the same holder's, answers
// unavailable at its own bound instead of waiting out the first waiter's term.
func TestConformanceTakeWithinArrivalTerm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		a := newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
		g := mustTake(t, a, "s", 2*time.Second)
		type res struct {
			at  time.Time
			g   *lease.Grant
			err error
		}
		out := make(chan res, 2)
		for i := 0; i < 2; i++ {
			w := newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
			go func() {
				g, err := w.Take(bg(t), "s", time.Minute, "d")
				out <- res{time.Now(), g, err}
			}()
			time.Sleep(300 * time.Millisecond)
		}
		s := b.open(t, loc, clock.Real{})
		now, _ := s.Now(bg(t))
		limit := g.ExpiresAt.Add(now.Uncertainty() + b.slack + 2*lease.DefaultPollInterval)
		winners := 0
		for i := 0; i < 2; i++ {
			r := <-out
			if r.at.After(limit) {
				t.Errorf("a waiter answered at %v, %v after the arrival term ended", r.at, r.at.Sub(g.ExpiresAt))
			}
			if r.err == nil {
				winners++
				if !r.g.AcquiredAt.After(g.ExpiresAt) {
					t.Errorf("taken at %v, before the instant %v", r.g.AcquiredAt, g.ExpiresAt)
				}
			} else if !errors.Is(r.err, lease.ErrUnavailable) {
				t.Errorf("waiter: %v, want unavailable", r.err)
			}
		}
		if winners != 1 {
			t.Fatalf("%d waiters took the key, want 1", winners)
		}
	})
}

// Checks 5.1 and 5.2 on every backend.
func TestConformanceNonHoldersAnsweredWithoutWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		c := objstore.NewCounting(b.open(t, loc, clock.Real{}))
		a := newManager(t, c, clock.Real{})
		other := newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
		released := mustTake(t, a, "r", time.Minute)
		if res, err := a.Release(bg(t), released); err != nil || res != lease.Released {
			t.Fatalf("release: %v %v", res, err)
		}
		expired := mustTake(t, a, "s", time.Second)
		now, _ := c.Now(bg(t))
		time.Sleep(time.Second + now.Uncertainty() + 100*time.Millisecond)
		successor := pollUntilTaken(t, other, "s", 50*time.Millisecond, 10*time.Second)
		current := successor[len(successor)-1].g
		c.Reset()
		for name, g := range map[string]*lease.Grant{"released": released, "expired and taken over": expired} {
			if _, ok, err := a.Remaining(bg(t), g); err != nil || ok {
				t.Errorf("%s: Remaining = %v, %v; want none", name, ok, err)
			}
			if res, err := a.Release(bg(t), g); err != nil || res != lease.NotHeld {
				t.Errorf("%s: Release = %v, %v; want not-held", name, res, err)
			}
		}
		if n := writes(c); n != 0 {
			t.Fatalf("answers to non-holders wrote: %v", c.Counts())
		}
		if left, ok, err := other.Remaining(bg(t), current); err != nil || !ok || left <= 0 {
			t.Fatalf("the current holder's Remaining = %v %v %v", left, ok, err)
		}
	})
}

// Check 6.1 on every backend: the fence's instant is expires_at minus the
// allowance, and its local deadline comes no later than the store's clock can
// reach that instant.
func TestConformanceFence(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, b.newLocation(t), clock.Real{})
		m := newManager(t, s, clock.Real{})
		g := mustTake(t, m, "s", time.Minute)
		for _, allowance := range []time.Duration{0, 5 * time.Second, 30 * time.Second} {
			fe, err := m.Fence(bg(t), g, allowance)
			if err != nil {
				t.Fatal(err)
			}
			if !fe.Instant.Equal(g.ExpiresAt.Add(-allowance)) {
				t.Fatalf("fence %v, want expires_at - %v = %v", fe.Instant, allowance, g.ExpiresAt.Add(-allowance))
			}
			// This host's clock is the store's: the deadline must not be
			// later than the moment the host reaches the instant.
			now := time.Now()
			if slack := fe.Deadline.Sub(now) - fe.Instant.Sub(now); slack > 0 {
				t.Fatalf("allowance %v: local deadline is %v later than the store instant", allowance, slack)
			}
		}
	})
}

func TestConformanceReleaseAfterOwnershipChanged(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, b.newLocation(t), clock.Real{})
		m := newManager(t, s, clock.Real{})
		g := mustTake(t, m, "s", time.Minute)
		now, _ := s.Now(bg(t))
		body := mustJSON(t, lease.Record{SchemaVersion: 1, SubjectID: "s", DecisionID: "x", Token: "someone-else", Holder: "service-reconciler",
			Owner: "elsewhere/1/x", AcquiredAt: now.Earliest, ExpiresAt: now.Earliest.Add(time.Hour)})
		if _, err := s.Put(bg(t), g.Key(), body); err != nil {
			t.Fatal(err)
		}
		res, err := m.Release(bg(t), g)
		if err != nil || res != lease.OwnershipChanged {
			t.Fatalf("Release = %v, %v; want ownership-changed", res, err)
		}
		o, err := s.Get(bg(t), g.Key())
		if err != nil || string(o.Body) != string(body) {
			t.Fatalf("the new holder's lease was touched: %v %q", err, o.Body)
		}
	})
}

// Round trips, counted by a store wrapper: uncontended take = 1 request,
// release = 1, expired takeover = 2 (for a manager that has listed the
// leases once with Prime, as a tick does; 3 for one that has not).
func TestConformanceRoundTrips(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		c := objstore.NewCounting(b.open(t, loc, clock.Real{}))
		m := newManager(t, c, clock.Real{})
		// Warm the store clock, as a tick's first reads do.
		if _, err := c.Now(bg(t)); err != nil {
			t.Fatal(err)
		}
		var httpBefore int64
		s3, isS3 := s3Of(c.Store)
		if isS3 {
			httpBefore = sum(s3.Requests())
		}
		c.Reset()
		g := mustTake(t, m, "s", time.Minute)
		if got := c.Total(); got != 1 {
			t.Errorf("uncontended take: %d requests %v, want 1", got, c.Counts())
		}
		c.Reset()
		if res, err := m.Release(bg(t), g); err != nil || res != lease.Released {
			t.Fatalf("release: %v %v", res, err)
		}
		if got := c.Total(); got != 1 {
			t.Errorf("release: %d requests %v, want 1", got, c.Counts())
		}
		if isS3 {
			if got := sum(s3.Requests()) - httpBefore; got != 2 {
				t.Errorf("take+release sent %d HTTP requests, want 2: %v", got, s3.Requests())
			}
		}

		// A holder that never releases, then a takeover after its instant.
		other := newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
		dead := mustTake(t, other, "t", time.Second)
		now, _ := c.Now(bg(t))
		time.Sleep(time.Until(dead.ExpiresAt) + now.Uncertainty() + 50*time.Millisecond)
		if err := m.Prime(bg(t)); err != nil {
			t.Fatal(err)
		}
		c.Reset()
		mustTake(t, m, "t", time.Minute)
		if got := c.Counts(); c.Total() != 2 || got["get"] != 1 || got["put-if-match"] != 1 {
			t.Errorf("expired takeover (primed): %v, want one get and one put-if-match", got)
		}
		dead2 := mustTake(t, other, "u", time.Second)
		time.Sleep(time.Until(dead2.ExpiresAt) + now.Uncertainty() + 50*time.Millisecond)
		fresh := newManager(t, c, clock.Real{})
		c.Reset()
		mustTake(t, fresh, "u", time.Minute)
		if got := c.Counts(); c.Total() != 3 || got["create"] != 1 {
			t.Errorf("expired takeover (unprimed): %v, want a failed create, a get and a put-if-match", got)
		}
	})
}

func s3Of(s objstore.Store) (*objstore.S3, bool) {
	type unwrapper interface{ Unwrap() objstore.Store }
	for {
		switch v := s.(type) {
		case *objstore.S3:
			return v, true
		case unwrapper:
			s = v.Unwrap()
		default:
			return nil, false
		}
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

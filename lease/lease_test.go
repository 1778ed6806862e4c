package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

func TestKeyIsSHA256OfSubjectBytes(t *testing.T) {
	k := lease.Key("service:web-1:api.service")
	if !strings.HasPrefix(k, "state/autonomy/leases/") || !strings.HasSuffix(k, ".json") || len(k) != len("state/autonomy/leases/")+64+5 {
		t.Fatalf("Key = %q", k)
	}
	if lease.Key("service:web-1:api.service ") == k || lease.Key("Service:web-1:api.service") == k {
		t.Fatal("keys must differ for subjects that differ by a byte (no normalisation)")
	}
	if err := objstore.ValidKey(k); err != nil {
		t.Fatal(err)
	}
}

func TestTryTakeWritesTheDesignRecord(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	m := newManager(t, s, f)
	g := mustTake(t, m, "service:web-1:api.service", 360*time.Second)
	o, err := s.Get(bg(t), g.Key())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := lease.ParseRecord(o.Body)
	if err != nil {
		t.Fatal(err)
	}
	if rec != g.Record {
		t.Fatalf("stored %+v, grant %+v", rec, g.Record)
	}
	if !rec.AcquiredAt.Equal(t0) || !rec.ExpiresAt.Equal(t0.Add(360*time.Second)) || rec.Holder != "service-reconciler" || rec.SchemaVersion != 1 {
		t.Fatalf("record %+v", rec)
	}
	for _, field := range []string{`"schema_version":1`, `"subject_id":"service:web-1:api.service"`, `"decision_id":`, `"token":`, `"holder":"service-reconciler"`, `"owner":`, `"acquired_at":"2026-11-30T12:00:00Z"`, `"expires_at":"2026-11-30T12:06:00Z"`} {
		if !strings.Contains(string(o.Body), field) {
			t.Errorf("stored lease %s lacks %s", o.Body, field)
		}
	}
}

// Check 1.1 and 1.2: concurrent takes with no release and no expiry between
// them yield exactly one expires_at; every other answers held.
func TestConcurrentTakesYieldExactlyOneExpiresAt(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	const n = 32
	for round := 0; round < 50; round++ {
		subject := "service:h:u" + string(rune('a'+round%26)) + strings.Repeat("x", round)
		var wg sync.WaitGroup
		grants := make([]*lease.Grant, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			m := newManager(t, s, f)
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				grants[i], errs[i] = m.TryTake(bg(t), subject, time.Minute, "d")
			}(i)
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range grants {
			if errs[i] == nil {
				won++
				continue
			}
			wantHeld(t, errs[i])
		}
		if won != 1 {
			t.Fatalf("round %d: %d takes succeeded", round, won)
		}
	}
}

// Checks 2.1 and 2.2: a key whose holder never releases becomes takeable at
// its instant and not before.
func TestNeverReleasedKeyTakeableAtInstantNotBefore(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	holder := newManager(t, s, f)
	g := mustTake(t, holder, "s", 30*time.Second)
	other := newManager(t, s, f)
	for _, at := range []time.Duration{0, time.Second, 29 * time.Second, 30*time.Second - time.Nanosecond, 30 * time.Second} {
		f.Set(t0.Add(at))
		_, err := other.TryTake(bg(t), "s", time.Minute, "d")
		h := wantHeld(t, err)
		if !h.ExpiresAt.Equal(g.ExpiresAt) || h.Owner != holder.Holder() && h.Owner == "" {
			t.Fatalf("held answer %+v", h)
		}
	}
	f.Set(g.ExpiresAt.Add(time.Nanosecond))
	g2, err := other.TryTake(bg(t), "s", time.Minute, "d")
	if err != nil {
		t.Fatalf("one nanosecond after the instant: %v", err)
	}
	if !g2.AcquiredAt.After(g.ExpiresAt) {
		t.Fatalf("takeover acquired at %v, not after the previous instant %v", g2.AcquiredAt, g.ExpiresAt)
	}
}

// Check 3.1 in one process: a holder that vanishes (its manager and grant
// dropped, nothing released) leaves the key held through its instant. The
// multi-process test kills a real holder with SIGKILL.
func TestVanishedHolderStaysHeldThroughInstant(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	func() {
		m := newManager(t, s, f)
		mustTake(t, m, "s", 10*time.Second)
	}()
	other := newManager(t, s, f)
	for at := time.Duration(0); at <= 10*time.Second; at += time.Second {
		f.Set(t0.Add(at))
		wantHeld(t, func() error { _, err := other.TryTake(bg(t), "s", time.Minute, "d"); return err }())
	}
	f.Set(t0.Add(10*time.Second + 1))
	mustTake(t, other, "s", time.Minute)
}

// Checks 4.1 and 4.2: take answers a waiter within its arrival term, and a
// second waiter, admitted while the first still waits, within its own.
func TestTakeAnswersWithinArrivalTerm(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	a := newManager(t, s, f)
	mustTake(t, a, "s", 10*time.Second) // A holds until t0+10s

	type answer struct {
		at  time.Time
		g   *lease.Grant
		err error
	}
	var pending atomic.Int32
	w1res, w2res := make(chan answer, 1), make(chan answer, 1)
	start := func(m *lease.Manager, ttl time.Duration, out chan answer) {
		pending.Add(1)
		go func() {
			defer pending.Add(-1)
			g, err := m.Take(bg(t), "s", ttl, "d")
			out <- answer{f.Now(), g, err}
		}()
	}
	waitAsleep := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for f.Sleepers() < int(pending.Load()) {
			if time.Now().After(deadline) {
				t.Fatalf("waiters did not go to sleep: %d sleeping, %d pending", f.Sleepers(), pending.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// W1 arrives at t0 (bound t0+10s); W2 arrives at t0+5s (bound t0+10s).
	start(newManager(t, s, f), time.Hour, w1res)
	waitAsleep()
	for f.Now().Before(t0.Add(5 * time.Second)) {
		next, _ := f.NextWake()
		f.Set(next)
		waitAsleep()
	}
	start(newManager(t, s, f), time.Hour, w2res)
	var got []answer
	for len(got) < 2 {
		waitAsleep()
		select {
		case r := <-w1res:
			got = append(got, r)
			continue
		case r := <-w2res:
			got = append(got, r)
			continue
		default:
		}
		if next, ok := f.NextWake(); ok {
			f.Set(next)
		}
	}
	bound := t0.Add(10 * time.Second)
	winners := 0
	for _, r := range got {
		if r.at.After(bound.Add(time.Nanosecond)) {
			t.Errorf("a waiter was answered at %v, after its arrival term ended at %v", r.at, bound)
		}
		if r.err == nil {
			winners++
			if !r.g.AcquiredAt.After(bound) {
				t.Errorf("the waiter took the key at %v, before the holder's instant", r.g.AcquiredAt)
			}
			continue
		}
		if !errors.Is(r.err, lease.ErrUnavailable) {
			t.Errorf("a waiter answered %v, want unavailable", r.err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d waiters took the key, want exactly 1 (the other answers unavailable at its own bound)", winners)
	}
}

func TestTakeFreeKeyAndEarlyRelease(t *testing.T) {
	s := objstore.NewMem(clock.Real{})
	a := newManager(t, s, clock.Real{})
	b := newManager(t, s, clock.Real{})
	ga := mustTake(t, a, "s", time.Minute)
	got := make(chan error, 1)
	go func() { _, err := b.Take(bg(t), "s", time.Minute, "d"); got <- err }()
	time.Sleep(120 * time.Millisecond)
	if res, err := a.Release(bg(t), ga); err != nil || res != lease.Released {
		t.Fatalf("release: %v %v", res, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a waiter after an early release: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not take a released key")
	}
}

func TestTakeHonoursContext(t *testing.T) {
	s := objstore.NewMem(clock.Real{})
	mustTake(t, newManager(t, s, clock.Real{}), "s", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := newManager(t, s, clock.Real{}).Take(ctx, "s", time.Minute, "d")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take with an expiring context: %v", err)
	}
}

// Checks 5.1 and 5.2: remaining answers none and release not-held to every
// party that is not the current holder, a former holder whose term passed
// included; neither writes anything.
func TestRemainingAndReleaseAnswerNonHolders(t *testing.T) {
	f := clock.NewFake(t0)
	c := objstore.NewCounting(objstore.NewMem(f))
	a, b := newManager(t, c, f), newManager(t, c, f)

	// A former holder that released.
	g1 := mustTake(t, a, "s", time.Minute)
	if res, _ := a.Release(bg(t), g1); res != lease.Released {
		t.Fatalf("release: %v", res)
	}
	// A former holder whose term passed and was taken over.
	g2 := mustTake(t, a, "s", time.Minute)
	f.Advance(time.Minute + time.Nanosecond)
	g3 := mustTake(t, b, "s", time.Minute)
	// A former holder whose term passed and nobody took the key since.
	g4 := mustTake(t, a, "t", time.Second)
	f.Advance(2 * time.Second)

	c.Reset()
	for name, g := range map[string]*lease.Grant{"released": g1, "expired, taken over": g2, "expired, untouched": g4} {
		if left, ok, err := a.Remaining(bg(t), g); err != nil || ok {
			t.Errorf("%s: Remaining = %v, %v, %v; want none", name, left, ok, err)
		}
		if res, err := a.Release(bg(t), g); err != nil || res != lease.NotHeld {
			t.Errorf("%s: Release = %v, %v; want not-held", name, res, err)
		}
	}
	if n := writes(c); n != 0 {
		t.Fatalf("answers to non-holders wrote %d times: %v", n, c.Counts())
	}
	// The current holder is unaffected and still answered.
	if left, ok, err := b.Remaining(bg(t), g3); err != nil || !ok || left <= 0 || left > time.Minute-2*time.Second {
		t.Fatalf("holder's Remaining = %v, %v, %v", left, ok, err)
	}
	if _, _, err := a.Remaining(bg(t), g3); err != nil {
		t.Fatal(err)
	}
}

// Check 6.1 and 6.2: a fence never exceeds expires_at minus the allowance,
// and each fence is minted with its own allowance.
func TestFenceNeverExceedsExpiresMinusAllowance(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	m := newManager(t, s, f)
	g := mustTake(t, m, "s", 360*time.Second)
	f.Advance(17 * time.Second)
	for _, allowance := range []time.Duration{0, time.Second, 5 * time.Second, 359 * time.Second} {
		fe, err := m.Fence(bg(t), g, allowance)
		if err != nil {
			t.Fatal(err)
		}
		ceiling := g.ExpiresAt.Add(-allowance)
		if fe.Instant.After(ceiling) {
			t.Errorf("allowance %v: fence %v exceeds the ceiling %v", allowance, fe.Instant, ceiling)
		}
		if !fe.Instant.Equal(ceiling) {
			t.Errorf("allowance %v: fence %v, want exactly the ceiling %v (minted, not derived)", allowance, fe.Instant, ceiling)
		}
		// The local deadline maps to the store instant: both clocks are f.
		if !fe.Deadline.Equal(fe.Instant) {
			t.Errorf("allowance %v: local deadline %v for instant %v on one clock", allowance, fe.Deadline, fe.Instant)
		}
	}
	if _, err := m.Fence(bg(t), g, -time.Second); err == nil {
		t.Error("a negative allowance must be refused")
	}
}

// An unreliable store clock (an interval, as from S3's Date) must make the
// local deadline earlier, never later.
func TestFenceDeadlineUsesLatestStoreTime(t *testing.T) {
	f := clock.NewFake(t0)
	s := &uncertainStore{Store: objstore.NewMem(f), width: 2 * time.Second}
	m := newManager(t, s, f)
	g := mustTake(t, m, "s", time.Minute)
	fe, err := m.Fence(bg(t), g, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Store time may be up to 2s ahead of f: the deadline must come 2s
	// before f reaches the instant.
	if want := fe.Instant.Add(-2 * time.Second); fe.Deadline.After(want) {
		t.Fatalf("deadline %v is later than %v", fe.Deadline, want)
	}
}

// uncertainStore reports its clock as [t, t+width].
type uncertainStore struct {
	objstore.Store
	width time.Duration
}

func (u *uncertainStore) Now(ctx context.Context) (objstore.TimeBounds, error) {
	b, err := u.Store.Now(ctx)
	b.Latest = b.Latest.Add(u.width)
	return b, err
}

// Release after the lease changed hands answers ownership-changed and leaves
// the new holder's lease untouched.
func TestReleaseAfterOwnershipChanged(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	a := newManager(t, s, f)
	g := mustTake(t, a, "s", time.Minute)
	// Someone overwrites the live lease (an operator's forced write, a
	// buggy writer): the key changed hands while A's term runs.
	intruder := lease.Record{SchemaVersion: 1, SubjectID: "s", DecisionID: "x", Token: "intruder-token", Holder: "service-reconciler", Owner: "elsewhere/1/x",
		AcquiredAt: t0.Add(time.Second), ExpiresAt: t0.Add(time.Hour)}
	body := mustJSON(t, intruder)
	if _, err := s.Put(bg(t), g.Key(), body); err != nil {
		t.Fatal(err)
	}
	f.Advance(10 * time.Second)
	before, _ := s.Get(bg(t), g.Key())
	res, err := a.Release(bg(t), g)
	if err != nil || res != lease.OwnershipChanged {
		t.Fatalf("Release = %v, %v; want ownership-changed", res, err)
	}
	after, err := s.Get(bg(t), g.Key())
	if err != nil || after.ETag != before.ETag || string(after.Body) != string(body) {
		t.Fatalf("the new holder's lease was touched: %v %q", err, after.Body)
	}
	// And a removed live lease is an ownership change too.
	g2 := mustTake(t, a, "u", time.Minute)
	if err := s.Delete(bg(t), g2.Key()); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Release(bg(t), g2); err != nil || res != lease.OwnershipChanged {
		t.Fatalf("release of a removed live lease = %v, %v", res, err)
	}
}

func TestReleaseNearInstantWritesNothing(t *testing.T) {
	f := clock.NewFake(t0)
	c := objstore.NewCounting(objstore.NewMem(f))
	m := newManager(t, c, f)
	g := mustTake(t, m, "s", time.Minute)
	f.Set(g.ExpiresAt.Add(-lease.DefaultReleaseMargin))
	c.Reset()
	if res, err := m.Release(bg(t), g); err != nil || res != lease.NotHeld {
		t.Fatalf("release inside the margin: %v %v", res, err)
	}
	if c.Total() != 0 {
		t.Fatalf("release inside the margin sent %v", c.Counts())
	}
}

func TestRenew(t *testing.T) {
	f := clock.NewFake(t0)
	s := objstore.NewMem(f)
	m := newManager(t, s, f)
	g := mustTake(t, m, "s", time.Minute)
	token := g.Token
	f.Advance(50 * time.Second)
	if err := m.Renew(bg(t), g, time.Minute); err != nil {
		t.Fatal(err)
	}
	if g.Token != token || !g.ExpiresAt.Equal(t0.Add(110*time.Second)) {
		t.Fatalf("after renew: token %s expires %v", g.Token, g.ExpiresAt)
	}
	f.Advance(50 * time.Second) // past the original instant, inside the renewed term
	wantHeld(t, func() error { _, err := newManager(t, s, f).TryTake(bg(t), "s", time.Minute, "d"); return err }())
	if res, err := m.Release(bg(t), g); err != nil || res != lease.Released {
		t.Fatalf("release after renew: %v %v", res, err)
	}
	// A grant whose term passed cannot be renewed.
	g2 := mustTake(t, m, "s", time.Second)
	f.Advance(2 * time.Second)
	if err := m.Renew(bg(t), g2, time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("renew after the instant: %v", err)
	}
}

func TestBadTTLRefused(t *testing.T) {
	m := newManager(t, objstore.NewMem(clock.Real{}), clock.Real{})
	for _, ttl := range []time.Duration{0, -time.Second, lease.DefaultMaxTTL + time.Second} {
		if _, err := m.TryTake(bg(t), "s", ttl, "d"); !errors.Is(err, lease.ErrBadTTL) {
			t.Errorf("ttl %v: %v", ttl, err)
		}
	}
}

// The unreadable-object rule: not taken over while its modification time
// plus the longest allowed term has not passed.
func TestUnreadableLeaseHeldUntilModTimePlusMaxTTL(t *testing.T) {
	for name, body := range map[string]string{
		"garbage":        "{not json",
		"empty":          "",
		"wrong schema":   `{"schema_version":2,"subject_id":"s","token":"t","holder":"h","acquired_at":"2026-11-30T12:00:00Z","expires_at":"2026-11-30T12:01:00Z"}`,
		"no token":       `{"schema_version":1,"subject_id":"s","holder":"h","acquired_at":"2026-11-30T12:00:00Z","expires_at":"2026-11-30T12:01:00Z"}`,
		"term too long":  `{"schema_version":1,"subject_id":"s","token":"t","holder":"h","acquired_at":"2026-11-30T12:00:00Z","expires_at":"2126-11-30T12:01:00Z"}`,
		"ends before it": `{"schema_version":1,"subject_id":"s","token":"t","holder":"h","acquired_at":"2026-11-30T12:00:00Z","expires_at":"2026-11-30T11:00:00Z"}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := clock.NewFake(t0)
			s := objstore.NewMem(f)
			if _, err := s.Put(bg(t), lease.Key("s"), []byte(body)); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, s, f)
			for _, at := range []time.Duration{0, time.Hour, lease.DefaultMaxTTL, lease.DefaultMaxTTL + time.Second} {
				f.Set(t0.Add(at))
				h := wantHeld(t, func() error { _, err := m.TryTake(bg(t), "s", time.Minute, "d"); return err }())
				if !h.Unreadable {
					t.Fatalf("held answer for an unreadable object is not marked unreadable: %+v", h)
				}
			}
			f.Set(t0.Add(lease.DefaultMaxTTL + time.Second + time.Nanosecond))
			mustTake(t, m, "s", time.Minute)
		})
	}
}

func TestParseRecordNeverPanics(t *testing.T) {
	for _, b := range []string{"", "null", "[]", `{"expires_at":5}`, `{"schema_version":1e999}`, "\x00\xff"} {
		if _, err := lease.ParseRecord([]byte(b)); !errors.Is(err, lease.ErrUnreadable) {
			t.Errorf("ParseRecord(%q) = %v", b, err)
		}
	}
}

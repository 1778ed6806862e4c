package breaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// set is the policy default: 4 failures, 900 s cooldown, 14400 s maximum.
var set = Settings{Failures: 4, Cooldown: 900 * time.Second, MaxCooldown: 14400 * time.Second}

func at(t time.Time) *time.Time { return &t }
func str(s string) *string      { return &s }
func exact(t time.Time) objstore.TimeBounds {
	return objstore.TimeBounds{Earliest: t, Latest: t}
}

func TestSettingsFrom(t *testing.T) {
	if got := SettingsFrom(nil); got != set {
		t.Errorf("SettingsFrom(nil) = %+v, want the default policy's %+v", got, set)
	}
	p := policy.Default()
	p.CircuitBreaker = policy.CircuitBreaker{Failures: 7, CooldownSeconds: 60, MaxCooldownSeconds: 600}
	want := Settings{Failures: 7, Cooldown: time.Minute, MaxCooldown: 10 * time.Minute}
	if got := SettingsFrom(p); got != want {
		t.Errorf("SettingsFrom = %+v, want %+v", got, want)
	}
}

func TestPhase(t *testing.T) {
	until := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		s    State
		now  objstore.TimeBounds
		want Phase
	}{
		{"zero state is closed", State{}, exact(t0), Closed},
		{"closed with failures", State{ConsecutiveFailures: 3}, exact(until.Add(time.Hour)), Closed},
		{"before open_until", State{OpenUntil: &until}, exact(until.Add(-time.Nanosecond)), Open},
		{"exactly at open_until is still open", State{OpenUntil: &until}, exact(until), Open},
		{"one nanosecond after open_until is half-open", State{OpenUntil: &until}, exact(until.Add(time.Nanosecond)), HalfOpen},
		{"earliest before, latest after: not certainly passed", State{OpenUntil: &until},
			objstore.TimeBounds{Earliest: until.Add(-time.Second), Latest: until.Add(time.Second)}, Open},
		{"earliest after", State{OpenUntil: &until},
			objstore.TimeBounds{Earliest: until.Add(time.Millisecond), Latest: until.Add(3 * time.Second)}, HalfOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Phase(tc.now); got != tc.want {
				t.Errorf("Phase = %v, want %v", got, tc.want)
			}
		})
	}
	for p, want := range map[Phase]string{Closed: "closed", Open: "open", HalfOpen: "half-open", Phase(9): "Phase(9)"} {
		if p.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(p), p.String(), want)
		}
	}
}

func TestTransitions(t *testing.T) {
	open := t0.Add(900 * time.Second)
	halfOpenNow := open.Add(time.Nanosecond)
	for _, tc := range []struct {
		name string
		s    State
		set  Settings
		now  time.Time
		// failure records a failure with error "boom"; otherwise op runs.
		op   string // "failure", "success", "reset"
		want State
	}{
		{
			name: "zero state, first failure: cooldown starts at the policy's",
			s:    State{}, set: set, now: t0, op: "failure",
			want: State{ConsecutiveFailures: 1, CooldownSeconds: 900, LastError: str("boom")},
		},
		{
			name: "closed, one below the threshold",
			s:    State{ConsecutiveFailures: 2, CooldownSeconds: 900}, set: set, now: t0, op: "failure",
			want: State{ConsecutiveFailures: 3, CooldownSeconds: 900, LastError: str("boom")},
		},
		{
			name: "closed, at the threshold: opens for the cooldown, trips+1",
			s:    State{ConsecutiveFailures: 3, CooldownSeconds: 900, Trips: 2}, set: set, now: t0, op: "failure",
			want: State{ConsecutiveFailures: 4, OpenUntil: at(open), CooldownSeconds: 900, Trips: 3, LastError: str("boom")},
		},
		{
			name: "open_until is rounded up to a whole second",
			s:    State{ConsecutiveFailures: 3}, set: set, now: t0.Add(300 * time.Millisecond), op: "failure",
			want: State{ConsecutiveFailures: 4, OpenUntil: at(open.Add(time.Second)), CooldownSeconds: 900, Trips: 1, LastError: str("boom")},
		},
		{
			name: "failures: 1 opens on the first failure",
			s:    State{}, set: Settings{Failures: 1, Cooldown: time.Minute, MaxCooldown: time.Hour}, now: t0, op: "failure",
			want: State{ConsecutiveFailures: 1, OpenUntil: at(t0.Add(time.Minute)), CooldownSeconds: 60, Trips: 1, LastError: str("boom")},
		},
		{
			name: "open: an in-flight repair's failure counts, open_until unchanged",
			s:    State{ConsecutiveFailures: 4, OpenUntil: at(open), CooldownSeconds: 900, Trips: 1}, set: set,
			now: t0.Add(time.Minute), op: "failure",
			want: State{ConsecutiveFailures: 5, OpenUntil: at(open), CooldownSeconds: 900, Trips: 1, LastError: str("boom")},
		},
		{
			name: "exactly at open_until it is still open: no re-trip",
			s:    State{ConsecutiveFailures: 4, OpenUntil: at(open), CooldownSeconds: 900, Trips: 1}, set: set,
			now: open, op: "failure",
			want: State{ConsecutiveFailures: 5, OpenUntil: at(open), CooldownSeconds: 900, Trips: 1, LastError: str("boom")},
		},
		{
			name: "half-open: the trial failed, re-opens with the cooldown doubled",
			s:    State{ConsecutiveFailures: 4, OpenUntil: at(open), CooldownSeconds: 900, Trips: 1}, set: set,
			now: halfOpenNow, op: "failure",
			want: State{ConsecutiveFailures: 5, OpenUntil: at(open.Add(1801 * time.Second)), CooldownSeconds: 1800, Trips: 2, LastError: str("boom")},
		},
		{
			name: "half-open: doubling is capped at the maximum",
			s:    State{ConsecutiveFailures: 9, OpenUntil: at(open), CooldownSeconds: 10000, Trips: 4}, set: set,
			now: open.Add(time.Second), op: "failure",
			want: State{ConsecutiveFailures: 10, OpenUntil: at(open.Add(14401 * time.Second)), CooldownSeconds: 14400, Trips: 5, LastError: str("boom")},
		},
		{
			name: "half-open at the maximum stays at the maximum",
			s:    State{ConsecutiveFailures: 9, OpenUntil: at(open), CooldownSeconds: 14400, Trips: 4}, set: set,
			now: open.Add(time.Second), op: "failure",
			want: State{ConsecutiveFailures: 10, OpenUntil: at(open.Add(14401 * time.Second)), CooldownSeconds: 14400, Trips: 5, LastError: str("boom")},
		},
		{
			name: "half-open with a stored cooldown above a lowered maximum: the maximum",
			s:    State{ConsecutiveFailures: 9, OpenUntil: at(open), CooldownSeconds: 600000, Trips: 4},
			set:  Settings{Failures: 4, Cooldown: time.Minute, MaxCooldown: time.Hour}, now: open.Add(time.Second), op: "failure",
			want: State{ConsecutiveFailures: 10, OpenUntil: at(open.Add(3601 * time.Second)), CooldownSeconds: 3600, Trips: 5, LastError: str("boom")},
		},
		{
			name: "half-open with a zero stored cooldown doubles the policy's",
			s:    State{ConsecutiveFailures: 4, OpenUntil: at(open), Trips: 1}, set: set,
			now: open.Add(time.Second), op: "failure",
			want: State{ConsecutiveFailures: 5, OpenUntil: at(open.Add(1801 * time.Second)), CooldownSeconds: 1800, Trips: 2, LastError: str("boom")},
		},
		{
			name: "counters saturate instead of overflowing",
			s:    State{ConsecutiveFailures: MaxCount, OpenUntil: at(open), CooldownSeconds: 900, Trips: MaxCount}, set: set,
			now: open.Add(time.Second), op: "failure",
			want: State{ConsecutiveFailures: MaxCount, OpenUntil: at(open.Add(1801 * time.Second)), CooldownSeconds: 1800, Trips: MaxCount, LastError: str("boom")},
		},
		{
			name: "settings below their bounds are held to them: failures 0 opens at 1, cooldown 0 is 1 s",
			s:    State{}, set: Settings{}, now: t0, op: "failure",
			want: State{ConsecutiveFailures: 1, OpenUntil: at(t0.Add(time.Second)), CooldownSeconds: 1, Trips: 1, LastError: str("boom")},
		},
		{
			name: "an absurd cooldown is held to the policy bound",
			s:    State{ConsecutiveFailures: 3}, set: Settings{Failures: 4, Cooldown: 1 << 62, MaxCooldown: 1 << 62}, now: t0, op: "failure",
			want: State{ConsecutiveFailures: 4, OpenUntil: at(t0.Add(MaxCooldownSeconds * time.Second)), CooldownSeconds: MaxCooldownSeconds, Trips: 1, LastError: str("boom")},
		},
		{
			name: "success from open closes, resets count and cooldown, keeps trips and last error",
			s:    State{ConsecutiveFailures: 6, OpenUntil: at(open), CooldownSeconds: 3600, Trips: 3, LastError: str("x")}, set: set,
			now: t0, op: "success",
			want: State{CooldownSeconds: 900, Trips: 3, LastError: str("x")},
		},
		{
			name: "success from half-open (the trial) closes",
			s:    State{ConsecutiveFailures: 4, OpenUntil: at(open), CooldownSeconds: 1800, Trips: 2}, set: set,
			now: halfOpenNow, op: "success",
			want: State{CooldownSeconds: 900, Trips: 2},
		},
		{
			name: "success while closed with failures resets the count",
			s:    State{ConsecutiveFailures: 2, CooldownSeconds: 900, LastError: str("x")}, set: set, now: t0, op: "success",
			want: State{CooldownSeconds: 900, LastError: str("x")},
		},
		{
			name: "success on the zero state changes nothing",
			s:    State{}, set: set, now: t0, op: "success",
			want: State{},
		},
		{
			name: "reset from open: closed, no history, the policy's cooldown",
			s:    State{ConsecutiveFailures: 6, OpenUntil: at(open), CooldownSeconds: 3600, Trips: 3, LastError: str("x")}, set: set,
			now: t0, op: "reset",
			want: State{CooldownSeconds: 900},
		},
		{
			name: "reset of the zero state changes nothing",
			s:    State{}, set: set, now: t0, op: "reset",
			want: State{},
		},
		{
			name: "reset keeps nothing of a closed breaker's history",
			s:    State{CooldownSeconds: 900, Trips: 2}, set: set, now: t0, op: "reset",
			want: State{CooldownSeconds: 900},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got State
			switch tc.op {
			case "failure":
				got = tc.s.RecordFailure(tc.set, tc.now, "boom")
			case "success":
				got = tc.s.RecordSuccess(tc.set)
			case "reset":
				got = tc.s.Reset(tc.set)
			}
			if !got.Equal(tc.want) {
				t.Errorf("%s:\n got %s\nwant %s", tc.op, show(got), show(tc.want))
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the result does not validate: %v", err)
			}
		})
	}
}

func show(s State) string {
	until, lastErr := "nil", "nil"
	if s.OpenUntil != nil {
		until = s.OpenUntil.Format(time.RFC3339Nano)
	}
	if s.LastError != nil {
		lastErr = strconv.Quote(*s.LastError)
	}
	return fmt.Sprintf("{failures %d open_until %s cooldown %d trips %d last_error %s}",
		s.ConsecutiveFailures, until, s.CooldownSeconds, s.Trips, lastErr)
}

// TestLifeCycle drives one breaker through trips and re-trips on a fake
// store clock: the cooldown doubles up to the maximum, then a success closes
// it and the next trip starts from the policy's cooldown again.
func TestLifeCycle(t *testing.T) {
	c := clock.NewFake(t0)
	now := func() objstore.TimeBounds { return exact(c.Now()) }
	var s State
	for i := 0; i < set.Failures; i++ {
		if s.Phase(now()) != Closed {
			t.Fatalf("after %d failures the breaker is %v, want closed", i, s.Phase(now()))
		}
		s = s.RecordFailure(set, c.Now(), "boom")
	}
	if s.Phase(now()) != Open || !s.OpenUntil.Equal(t0.Add(900*time.Second)) || s.Trips != 1 {
		t.Fatalf("after %d failures: %s, want open until t0+900s with one trip", set.Failures, show(s))
	}
	for i, want := range []int{1800, 3600, 7200, 14400, 14400} {
		c.Set(*s.OpenUntil)
		if s.Phase(now()) != Open {
			t.Fatalf("re-trip %d: at open_until the breaker is %v, want open", i, s.Phase(now()))
		}
		c.Advance(time.Nanosecond)
		if s.Phase(now()) != HalfOpen {
			t.Fatalf("re-trip %d: one ns after open_until the breaker is %v, want half-open", i, s.Phase(now()))
		}
		s = s.RecordFailure(set, c.Now(), "trial failed")
		if s.CooldownSeconds != want || s.Phase(now()) != Open || s.Trips != i+2 {
			t.Fatalf("re-trip %d: %s, want open with cooldown %d and %d trips", i, show(s), want, i+2)
		}
		if got := s.OpenUntil.Sub(c.Now()); got < time.Duration(want)*time.Second || got > time.Duration(want)*time.Second+time.Second {
			t.Fatalf("re-trip %d: open for %v, want %ds (rounded up to the second)", i, got, want)
		}
	}
	c.Set(s.OpenUntil.Add(time.Second))
	s = s.RecordSuccess(set)
	if s.Phase(now()) != Closed || s.ConsecutiveFailures != 0 || s.CooldownSeconds != 900 {
		t.Fatalf("after the trial succeeded: %s, want closed with the policy's cooldown", show(s))
	}
	for i := 0; i < set.Failures; i++ {
		s = s.RecordFailure(set, c.Now(), "boom")
	}
	if got := s.OpenUntil.Sub(c.Now()); got != 900*time.Second {
		t.Fatalf("the next trip after closing opens for %v, want the policy's 15m", got)
	}
}

func TestLastErrorIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxErrorLen) // two bytes each
	s := State{}.RecordFailure(set, t0, long)
	if len(*s.LastError) > MaxErrorLen || !utf8.ValidString(*s.LastError) || !strings.HasSuffix(*s.LastError, "…") {
		t.Errorf("last_error is %d bytes, valid UTF-8 %v; want at most %d, cut on a rune boundary and marked",
			len(*s.LastError), utf8.ValidString(*s.LastError), MaxErrorLen)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
}

func TestValidate(t *testing.T) {
	zero := time.Time{}
	for _, tc := range []struct {
		name string
		s    State
		ok   bool
	}{
		{"zero", State{}, true},
		{"open", State{ConsecutiveFailures: 4, OpenUntil: at(t0), CooldownSeconds: 900, Trips: 1, LastError: str("x")}, true},
		{"negative failures", State{ConsecutiveFailures: -1}, false},
		{"failures above the bound", State{ConsecutiveFailures: MaxCount + 1}, false},
		{"negative trips", State{Trips: -1}, false},
		{"negative cooldown", State{CooldownSeconds: -1}, false},
		{"cooldown above the policy bound", State{CooldownSeconds: MaxCooldownSeconds + 1}, false},
		{"zero open_until", State{OpenUntil: &zero}, false},
		{"huge last_error", State{LastError: str(strings.Repeat("x", MaxErrorLen+1))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	a := State{OpenUntil: at(t0), LastError: str("x")}
	b := State{OpenUntil: at(t0.In(time.FixedZone("X", 3600))), LastError: str("x")}
	if !a.Equal(b) {
		t.Error("the same instant in another zone and the same text behind another pointer must be equal")
	}
	for _, c := range []State{{}, {OpenUntil: at(t0.Add(1))}, {OpenUntil: at(t0), LastError: str("y")}, {OpenUntil: at(t0)}} {
		if a.Equal(c) {
			t.Errorf("%s equals %s", show(a), show(c))
		}
	}
}

func TestTryTakeTrial(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem(clock.NewFake(t0))
	mgr := func(holder, owner string) *lease.Manager {
		m, err := lease.NewManager(store, lease.Config{Holder: holder, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	g, err := TryTakeTrial(ctx, mgr(TrialHolder, "a"), time.Minute, "d1")
	if err != nil || g.SubjectID != TrialSubject {
		t.Fatalf("first trial: %v, %+v", err, g)
	}
	if _, err := TryTakeTrial(ctx, mgr(TrialHolder, "b"), time.Minute, "d2"); !lease.IsHeld(err) {
		t.Fatalf("second trial: %v, want held", err)
	}
	if _, err := TryTakeTrial(ctx, mgr("someone-else", "c"), time.Minute, "d3"); err == nil || !strings.Contains(err.Error(), TrialHolder) {
		t.Fatalf("trial with another holder: %v, want a refusal naming %s", err, TrialHolder)
	}
}

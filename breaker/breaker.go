// Package breaker owns the fleet-wide circuit breaker of DESIGN §7 as a pure
// state machine: the State stored inside the control state object, the
// Settings the policy gives it, the Phase derived from a store-clock reading,
// and the transitions that executed repairs and operators cause.
//
// Nothing here reads a clock or a store. Every transition takes the store's
// time from its caller (package autonomy persists the State with
// compare-and-swap), so that a reconciler whose wall clock is wrong neither
// holds the breaker open too long nor lets it half-open early.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

// Bounds every stored number is held to, so that a hostile or hand-edited
// state can neither overflow a counter nor turn a cooldown into a duration
// that wraps around.
const (
	// MaxCount bounds consecutive_failures and trips; counters saturate at it.
	MaxCount = 1_000_000_000
	// MaxCooldownSeconds is the policy's upper bound on any cooldown
	// (DESIGN §6: cooldowns 1–604800).
	MaxCooldownSeconds = 604800
	// MaxErrorLen bounds last_error, in bytes: an error text is for an
	// operator to read, and a runaway one must not bloat the control object.
	MaxErrorLen = 1024
)

// State is the breaker as stored in state/autonomy/control.json (DESIGN §7).
// The zero State is a closed breaker with no history; its cooldown starts at
// the policy's.
type State struct {
	ConsecutiveFailures int `json:"consecutive_failures"`
	// OpenUntil is the instant (store clock) until which the breaker is
	// open; nil when closed. After it the breaker is half-open, which is
	// derived by Phase and never stored.
	OpenUntil *time.Time `json:"open_until"`
	// CooldownSeconds is how long the next opening from half-open lasts
	// before doubling; 0 means the policy's cooldown.
	CooldownSeconds int `json:"cooldown_seconds"`
	// Trips counts openings since the last operator reset.
	Trips int `json:"trips"`
	// LastError is the error text of the latest failed repair; it is kept
	// across successes so operators can see what last went wrong.
	LastError *string `json:"last_error"`
}

// Settings is the breaker's part of the policy.
type Settings struct {
	// Failures is how many consecutive executed-repair failures open it.
	Failures int
	// Cooldown is how long it stays open after a trip from closed.
	Cooldown time.Duration
	// MaxCooldown caps the cooldown, which doubles at each re-trip from
	// half-open.
	MaxCooldown time.Duration
}

// SettingsFrom takes the breaker settings from p (the default policy's when
// p is nil).
func SettingsFrom(p *policy.Policy) Settings {
	if p == nil {
		p = policy.Default()
	}
	return Settings{Failures: p.CircuitBreaker.Failures, Cooldown: p.Cooldown(), MaxCooldown: p.MaxCooldown()}
}

// norm is Settings held to the policy's bounds, in whole seconds: a caller
// that builds Settings by hand must not be able to make the breaker never
// open, or overflow a cooldown.
type norm struct {
	failures         int
	cooldown, maxCDs int // seconds
}

func (s Settings) norm() norm {
	n := norm{failures: clamp(s.Failures, 1, MaxCount)}
	n.cooldown = clamp(durSeconds(s.Cooldown), 1, MaxCooldownSeconds)
	n.maxCDs = clamp(durSeconds(s.MaxCooldown), n.cooldown, MaxCooldownSeconds)
	return n
}

func durSeconds(d time.Duration) int {
	s := int64(d / time.Second)
	if s > MaxCooldownSeconds {
		return MaxCooldownSeconds + 1 // clamped by the caller; avoids int overflow on 32-bit
	}
	return int(s)
}

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

func satInc(v int) int {
	if v < 0 {
		return 1
	}
	if v >= MaxCount {
		return MaxCount
	}
	return v + 1
}

// Phase is the breaker's phase at one instant.
type Phase int

// The phases. Half-open is never stored: it is an open breaker whose
// open_until has certainly passed.
const (
	Closed Phase = iota
	Open
	HalfOpen
)

func (p Phase) String() string {
	switch p {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Phase derives the phase at the store time now. The breaker stays open
// until open_until has certainly passed: half-open only when the earliest
// the store's time can be is after open_until.
func (s State) Phase(now objstore.TimeBounds) Phase {
	switch {
	case s.OpenUntil == nil:
		return Closed
	case now.Earliest.After(*s.OpenUntil):
		return HalfOpen
	default:
		return Open
	}
}

// cooldownSecs is the cooldown the next opening from half-open starts from:
// the stored one, held within the policy's current bounds.
func (s State) cooldownSecs(n norm) int {
	if s.CooldownSeconds <= 0 {
		return n.cooldown
	}
	return clamp(s.CooldownSeconds, n.cooldown, n.maxCDs)
}

// openUntil is now+secs rounded up to a whole second, so that the instant
// reads exactly in RFC 3339 without a fraction and the breaker is never open
// for less than its cooldown.
func openUntil(now time.Time, secs int) *time.Time {
	t := now.UTC().Add(time.Duration(secs) * time.Second)
	if r := t.Truncate(time.Second); !r.Equal(t) {
		t = r.Add(time.Second)
	}
	return &t
}

func truncateError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	cut := MaxErrorLen - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// RecordSuccess is an executed repair that succeeded: the count resets, the
// breaker closes and the cooldown returns to the policy's. A breaker already
// in that state is returned unchanged (equal), so the caller writes nothing.
func (s State) RecordSuccess(set Settings) State {
	n := set.norm()
	if s.ConsecutiveFailures == 0 && s.OpenUntil == nil && (s.CooldownSeconds == 0 || s.CooldownSeconds == n.cooldown) {
		return s
	}
	return State{CooldownSeconds: n.cooldown, Trips: s.Trips, LastError: s.LastError}
}

// RecordFailure is an executed repair that failed, at store time now (the
// earliest reading of the store clock), with its error text.
//
//   - closed: the count grows; at set.Failures the breaker opens until
//     now + the policy's cooldown, and trips grows.
//   - open (a repair that was in flight when it opened): the count grows; it
//     stays open until the same instant.
//   - half-open (the trial failed): it re-opens with the cooldown doubled,
//     up to set.MaxCooldown, and trips grows.
func (s State) RecordFailure(set Settings, now time.Time, errText string) State {
	n := set.norm()
	e := truncateError(errText)
	next := s
	next.LastError = &e
	next.ConsecutiveFailures = satInc(s.ConsecutiveFailures)
	switch s.Phase(objstore.TimeBounds{Earliest: now, Latest: now}) {
	case Closed:
		next.CooldownSeconds = n.cooldown
		if next.ConsecutiveFailures >= n.failures {
			next.OpenUntil = openUntil(now, n.cooldown)
			next.Trips = satInc(s.Trips)
		}
	case Open:
		next.CooldownSeconds = s.cooldownSecs(n)
	case HalfOpen:
		cd := s.cooldownSecs(n)
		if cd > n.maxCDs/2 {
			cd = n.maxCDs
		} else {
			cd *= 2
		}
		next.CooldownSeconds = cd
		next.OpenUntil = openUntil(now, cd)
		next.Trips = satInc(s.Trips)
	}
	return next
}

// Reset is an operator closing the breaker: no failures, no trips, no last
// error, the policy's cooldown. A breaker already reset is returned unchanged.
func (s State) Reset(set Settings) State {
	n := set.norm()
	fresh := State{CooldownSeconds: n.cooldown}
	if s.ConsecutiveFailures == 0 && s.OpenUntil == nil && s.Trips == 0 && s.LastError == nil &&
		(s.CooldownSeconds == 0 || s.CooldownSeconds == n.cooldown) {
		return s
	}
	return fresh
}

// Equal reports whether s and o hold the same values (the pointers' targets
// compared, not the pointers).
func (s State) Equal(o State) bool {
	if s.ConsecutiveFailures != o.ConsecutiveFailures || s.CooldownSeconds != o.CooldownSeconds || s.Trips != o.Trips {
		return false
	}
	if (s.OpenUntil == nil) != (o.OpenUntil == nil) || (s.OpenUntil != nil && !s.OpenUntil.Equal(*o.OpenUntil)) {
		return false
	}
	if (s.LastError == nil) != (o.LastError == nil) || (s.LastError != nil && *s.LastError != *o.LastError) {
		return false
	}
	return true
}

// ErrInvalid marks a stored breaker state outside its bounds.
var ErrInvalid = errors.New("invalid circuit breaker state")

// Validate checks a state read from the store against the bounds above.
func (s State) Validate() error {
	switch {
	case s.ConsecutiveFailures < 0 || s.ConsecutiveFailures > MaxCount:
		return fmt.Errorf("%w: consecutive_failures %d is outside 0–%d", ErrInvalid, s.ConsecutiveFailures, MaxCount)
	case s.Trips < 0 || s.Trips > MaxCount:
		return fmt.Errorf("%w: trips %d is outside 0–%d", ErrInvalid, s.Trips, MaxCount)
	case s.CooldownSeconds < 0 || s.CooldownSeconds > MaxCooldownSeconds:
		return fmt.Errorf("%w: cooldown_seconds %d is outside 0–%d", ErrInvalid, s.CooldownSeconds, MaxCooldownSeconds)
	case s.OpenUntil != nil && s.OpenUntil.IsZero():
		return fmt.Errorf("%w: open_until is the zero time; use null for a closed breaker", ErrInvalid)
	case s.LastError != nil && len(*s.LastError) > MaxErrorLen:
		return fmt.Errorf("%w: last_error is %d bytes, more than %d", ErrInvalid, len(*s.LastError), MaxErrorLen)
	}
	return nil
}

// TrialSubject is the lease subject that admits the one trial repair of a
// half-open breaker, fleet-wide.
const TrialSubject = "breaker:trial"

// TrialHolder is the holder the trial lease is taken as: the one every
// reconciler shares (DESIGN §5); the lease's token tells grants apart.
const TrialHolder = "service-reconciler"

// TryTakeTrial asks for the right to run the half-open breaker's one trial
// repair: a try-take of the lease on TrialSubject for ttl (the repair's
// decision TTL). It answers a grant, or an error wrapping lease.ErrHeld when
// another reconciler's trial holds it (do not repair), or the store's error
// (do not repair).
//
// Under the grant the caller re-reads the control state and decides again
// before repairing: another trial may have closed or re-opened the breaker
// since its first decision. It records the repair's outcome
// (autonomy.RecordRepair) before it releases the grant, so no second trial
// can be admitted between the release and the record.
func TryTakeTrial(ctx context.Context, m *lease.Manager, ttl time.Duration, decisionID string) (*lease.Grant, error) {
	if h := m.Holder(); h != TrialHolder {
		return nil, fmt.Errorf("breaker trial: the lease manager's holder is %q; the trial lease is taken as %q, shared by every reconciler", h, TrialHolder)
	}
	g, err := m.TryTake(ctx, TrialSubject, ttl, decisionID)
	if err != nil {
		return nil, fmt.Errorf("breaker trial: %w", err)
	}
	return g, nil
}

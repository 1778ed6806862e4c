// Package autonomy owns the control state (DESIGN §7) and THE gate: whether
// autonomy may mutate now, and if not, why.
//
// The control state is one object, state/autonomy/control.json, holding the
// operators' emergency pause and the fleet-wide circuit breaker. Every change
// is a read, an edit and a compare-and-swap against the exact version read,
// retried on conflict, so that concurrent reconcilers and operators lose no
// update. An object that cannot be read back as a valid control state stops
// every mutation (fail closed) until an operator rewrites it.
//
// Decide is the one function every caller asks "may we mutate now?": it
// combines the policy (mode, policy-level pause, validity) with the control
// state (emergency pause, breaker phase) on the store's clock.
package autonomy

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/objstore"
)

// Key is where the control state is stored.
const Key = "state/autonomy/control.json"

// SchemaVersion is the version of the control object this package reads and
// writes.
const SchemaVersion = 1

// Limits on what an operator may store, and on what is read back.
const (
	// MaxReasonLen bounds a pause reason, in bytes.
	MaxReasonLen = 1024
	// MaxActorLen bounds changed_by, in bytes.
	MaxActorLen = 256
	// MaxSize bounds the stored object: a real one is a few hundred bytes,
	// and a larger one is not parsed at all.
	MaxSize = 64 << 10
)

// ReconcilerActor is changed_by when a reconciler's breaker write creates the
// control object.
const ReconcilerActor = "service-reconciler"

// Errors callers branch on.
var (
	// ErrInvalidControl: the stored object is not a valid control state.
	// Stored.Invalid wraps it.
	ErrInvalidControl = errors.New("invalid control state")
	// ErrControlUnreadable: an update was refused because the stored
	// control state is invalid and the update cannot rewrite it whole (a
	// breaker reset or a repair outcome; pause and resume can).
	ErrControlUnreadable = errors.New("the stored control state is unreadable")
	// ErrInvalidReason: a pause reason that is empty or too long.
	ErrInvalidReason = errors.New("invalid pause reason")
	// ErrInvalidActor: an actor name that is empty or too long.
	ErrInvalidActor = errors.New("invalid actor")
	// ErrContention: the control state kept changing under an update for
	// every one of its attempts.
	ErrContention = errors.New("the control state kept changing under this update")
)

// Control is the control state object (DESIGN §7).
type Control struct {
	SchemaVersion   int    `json:"schema_version"`
	EmergencyPaused bool   `json:"emergency_paused"`
	Reason          string `json:"reason"`
	// ChangedAt and ChangedBy record the last operator change (pause,
	// resume, breaker reset), or the creation of the object by a
	// reconciler. A reconciler's breaker writes leave them alone, so that
	// status keeps showing who paused, not which repair failed last.
	ChangedAt time.Time     `json:"changed_at"`
	ChangedBy string        `json:"changed_by"`
	Breaker   breaker.State `json:"breaker"`
	// WriteID is unique to each write. ETags are content hashes, so it
	// keeps two writes from ever having one version (ABA, DESIGN §3) and
	// tells, after a write whose answer was lost, whether the stored
	// object is ours. It is an addition to the fields of DESIGN §7; an
	// object without it (written by hand) is still read.
	WriteID string `json:"write_id,omitempty"`
}

// Stored is the control state as read from the store.
type Stored struct {
	// Control is the state in effect. When Invalid is set it is a
	// fail-closed state (paused), so a caller that forgets to look at
	// Invalid still mutates nothing.
	Control Control
	// Version is the store's version (ETag) of the object; "" when absent.
	Version string
	// ModTime is when the object was written, on the store's clock.
	ModTime time.Time
	// Exists is false when no control object is stored (a fresh fleet: not
	// paused, breaker closed).
	Exists bool
	// Invalid is why the stored object is not a valid control state (it
	// wraps ErrInvalidControl), or nil.
	Invalid error
}

func zeroControl() Control { return Control{SchemaVersion: SchemaVersion} }

// failClosed is the control in effect when the stored one is unreadable.
func failClosed() Control {
	c := zeroControl()
	c.EmergencyPaused = true
	c.Reason = "the stored control state is unreadable"
	return c
}

// Load reads the control state. A missing object is the zero state (not
// paused, breaker closed). An object that does not parse or validate is not
// an error: the answer has Invalid set and a fail-closed Control, and Decide
// refuses every mutation with a sentence saying how to rewrite it. Store
// errors are returned, wrapped.
func Load(ctx context.Context, store objstore.Store) (*Stored, error) {
	obj, err := store.Get(ctx, Key)
	if errors.Is(err, objstore.ErrNotFound) {
		return &Stored{Control: zeroControl()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the control state from %s: %w", store.Location(), err)
	}
	s := &Stored{Version: obj.ETag, ModTime: obj.ModTime, Exists: true}
	c, perr := Parse(obj.Body)
	if perr != nil {
		s.Control, s.Invalid = failClosed(), perr
		return s, nil
	}
	s.Control = c
	return s, nil
}

var (
	controlKeys = map[string]bool{"schema_version": true, "emergency_paused": true, "reason": true,
		"changed_at": true, "changed_by": true, "breaker": true, "write_id": true}
	breakerKeys = map[string]bool{"consecutive_failures": true, "open_until": true, "cooldown_seconds": true,
		"trips": true, "last_error": true}
)

// Parse decodes and validates a stored control object. Every defect is an
// error wrapping ErrInvalidControl; it never panics. Decoding is strict: an
// unknown or differently-cased key, a duplicate key, a wrong type or a
// trailing value is a defect, because a field this version does not
// understand could be one that should stop mutations.
func Parse(b []byte) (Control, error) {
	if len(b) > MaxSize {
		return Control{}, fmt.Errorf("%w: the object is %d bytes, more than the %d allowed", ErrInvalidControl, len(b), MaxSize)
	}
	if err := checkKeys(b); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrInvalidControl, err)
	}
	var c Control
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrInvalidControl, err)
	}
	if err := c.validate(); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrInvalidControl, err)
	}
	return c, nil
}

// checkKeys walks the document's tokens (iteratively: nesting depth cannot
// exhaust the stack) and refuses a document that is not one object, a key
// that is not exactly one of the known ones, or a key given twice (the JSON
// decoder would silently keep the last, and match keys regardless of case).
func checkKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object  bool
		allowed map[string]bool // nil: any key (checked later by the decoder)
		seen    map[string]bool
		key     bool // next token in this object is a key
	}
	var stack []*frame
	nextAllowed := controlKeys
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) && len(stack) == 0 && nextAllowed == nil {
				return nil
			}
			return fmt.Errorf("not valid JSON: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top == nil && nextAllowed == nil {
			return errors.New("more than one JSON value")
		}
		if top != nil && top.object && top.key {
			k, ok := tok.(string)
			if !ok {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					continue
				}
				return errors.New("malformed object")
			}
			if top.seen[k] {
				return fmt.Errorf("key %q appears twice", k)
			}
			top.seen[k] = true
			if top.allowed != nil && !top.allowed[k] {
				return fmt.Errorf("unknown key %q", k)
			}
			top.key = false
			nextAllowed = nil
			if top.allowed != nil && len(stack) == 1 && k == "breaker" {
				nextAllowed = breakerKeys
			}
			continue
		}
		// A value.
		if top == nil {
			d, ok := tok.(json.Delim)
			if !ok || d != '{' {
				return errors.New("the document is not a JSON object")
			}
			stack = append(stack, &frame{object: true, allowed: nextAllowed, seen: map[string]bool{}, key: true})
			nextAllowed = nil
			continue
		}
		if top.object {
			top.key = true
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				stack = append(stack, &frame{object: true, allowed: nextAllowed, seen: map[string]bool{}, key: true})
			case '[':
				stack = append(stack, &frame{})
			case ']':
				stack = stack[:len(stack)-1]
			}
		}
		nextAllowed = nil
	}
}

func (c Control) validate() error {
	switch {
	case c.SchemaVersion != SchemaVersion:
		return fmt.Errorf("schema_version %d, want %d", c.SchemaVersion, SchemaVersion)
	case len(c.Reason) > MaxReasonLen:
		return fmt.Errorf("reason is %d bytes, more than %d", len(c.Reason), MaxReasonLen)
	case len(c.ChangedBy) > MaxActorLen:
		return fmt.Errorf("changed_by is %d bytes, more than %d", len(c.ChangedBy), MaxActorLen)
	case len(c.WriteID) > 64:
		return fmt.Errorf("write_id is %d bytes, more than 64", len(c.WriteID))
	case !writableTime(c.ChangedAt):
		return fmt.Errorf("changed_at %s is outside the years 1–9999", c.ChangedAt.Format(time.RFC3339Nano))
	case c.Breaker.OpenUntil != nil && !writableTime(*c.Breaker.OpenUntil):
		return fmt.Errorf("breaker.open_until %s is outside the years 1–9999", c.Breaker.OpenUntil.Format(time.RFC3339Nano))
	}
	return c.Breaker.Validate()
}

// writableTime reports whether t can be written back: JSON times are RFC 3339
// with a four-digit year, and an offset can push a parsed year out of range
// once it is turned to UTC.
func writableTime(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

func (c Control) marshal() ([]byte, error) {
	c.ChangedAt = c.ChangedAt.UTC()
	if c.Breaker.OpenUntil != nil {
		t := c.Breaker.OpenUntil.UTC()
		c.Breaker.OpenUntil = &t
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the control state: %w", err)
	}
	return append(b, '\n'), nil
}

func newWriteID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// Outcome is the result of an update.
type Outcome struct {
	// Before is the control state the update was applied to (as read for
	// the attempt that succeeded).
	Before *Stored
	// After is the control state stored when the update finished: the one
	// written, or Before when nothing changed.
	After *Stored
	// Changed is true when the update wrote.
	Changed bool
	// Replaced is the defect of an unreadable control object that this
	// update rewrote whole (pause, resume), or nil.
	Replaced error
}

// Retry policy of Update: bounded, with full-jitter exponential backoff, so
// that a crowd of writers spreads out instead of colliding again in step.
// The cap is small because the writers are a handful of reconcilers and
// operators and a store answers in milliseconds.
const (
	retryAttempts = 64
	retryBase     = 2 * time.Millisecond
	retryCap      = 50 * time.Millisecond
	// unansweredAttempts bounds the writes the store may leave unanswered
	// (ErrUnavailable: each already retried by the store's client) before
	// the update gives up. Contention is worth many attempts; an outage
	// is not, and an operator pausing autonomy during one must hear so in
	// seconds, not minutes.
	unansweredAttempts = 3
)

func backoff(ctx context.Context, attempt int) error {
	d := retryBase << min(attempt, 16)
	if d > retryCap || d <= 0 {
		d = retryCap
	}
	t := time.NewTimer(mrand.N(d) + time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Update applies fn to the control state and stores the result with one
// conditional write against the exact version read (create-if-absent when
// none is stored), retrying from a fresh read when another writer got there
// first. fn may be called several times and must depend only on its input.
// When fn reports no change, nothing is written. An unreadable stored object
// makes Update fail with ErrControlUnreadable without calling fn.
//
// A write whose answer was lost (the store did not answer, or a retry of a
// write that had committed answered "precondition failed") is resolved by
// reading back: the stored write_id is ours → it landed. If ours landed and
// was overwritten before the read-back, fn is applied again: for a repair
// failure that counts one failure twice, which errs towards opening the
// breaker; every other update is idempotent.
func Update(ctx context.Context, store objstore.Store, fn func(c *Control) (changed bool, err error)) (*Stored, error) {
	o, err := update(ctx, store, false, func(c *Control, _ objstore.TimeBounds) (bool, error) { return fn(c) })
	if err != nil {
		return nil, err
	}
	return o.After, nil
}

func update(ctx context.Context, store objstore.Store, rewriteInvalid bool, fn func(c *Control, now objstore.TimeBounds) (bool, error)) (*Outcome, error) {
	// Writes of this call whose outcome is unknown, by write_id, with the
	// state each was applied to.
	pending := map[string]*Stored{}
	var lastWriteErr error
	unanswered := 0
	for attempt := 0; attempt < retryAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				return nil, fmt.Errorf("update the control state: %w", err)
			}
		}
		before, err := Load(ctx, store)
		if err != nil {
			if len(pending) > 0 {
				return nil, fmt.Errorf("update the control state: the outcome of a write is unknown (%v) and reading it back failed: %w", lastWriteErr, err)
			}
			return nil, err
		}
		if before.Invalid == nil {
			if prev, ok := pending[before.Control.WriteID]; ok {
				return &Outcome{Before: prev, After: before, Changed: true, Replaced: prev.Invalid}, nil
			}
		}
		if unanswered >= unansweredAttempts {
			// Read back once more above: none of the writes landed.
			return nil, fmt.Errorf("update the control state on %s: the store did not answer %d writes (last: %w); nothing was changed; try again when the store answers",
				store.Location(), unanswered, lastWriteErr)
		}
		if before.Invalid != nil && !rewriteInvalid {
			return nil, fmt.Errorf("%w (%v): %s", ErrControlUnreadable, before.Invalid, rewriteHint)
		}
		now, err := store.Now(ctx)
		if err != nil {
			return nil, fmt.Errorf("update the control state: read the store clock: %w", err)
		}
		// An unreadable object is rewritten from the fail-closed state
		// Load gave for it (paused, breaker closed), so that resume sees
		// a pause to lift and both record who rewrote it.
		next := before.Control
		changed, err := fn(&next, now)
		if err != nil {
			return nil, err
		}
		if before.Invalid != nil {
			changed = true // rewriting an unreadable object is the point
		}
		if !changed {
			return &Outcome{Before: before, After: before}, nil
		}
		next.SchemaVersion = SchemaVersion
		next.WriteID = newWriteID()
		if err := next.validate(); err != nil {
			return nil, fmt.Errorf("update the control state: the new state is invalid (a bug): %w", err)
		}
		body, err := next.marshal()
		if err != nil {
			return nil, err
		}
		var etag string
		if before.Exists {
			etag, err = store.PutIfMatch(ctx, Key, body, before.Version)
		} else {
			etag, err = store.Create(ctx, Key, body)
		}
		switch {
		case err == nil:
			after := &Stored{Control: next, Version: etag, Exists: true, ModTime: now.Earliest}
			return &Outcome{Before: before, After: after, Changed: true, Replaced: before.Invalid}, nil
		case errors.Is(err, objstore.ErrPrecondition), errors.Is(err, objstore.ErrUnavailable):
			pending[next.WriteID] = before
			lastWriteErr = err
			if errors.Is(err, objstore.ErrUnavailable) {
				unanswered++
			}
		default:
			return nil, fmt.Errorf("write the control state to %s: %w", store.Location(), err)
		}
	}
	return nil, fmt.Errorf("update the control state on %s: %w for %d attempts (last: %v); try again", store.Location(), ErrContention, retryAttempts, lastWriteErr)
}

// maxStampBump bounds how far changeTime moves a stamp past the store
// clock's reading: a stored changed_at far in the future (hand-edited, or
// from a store whose clock was stepped back) must not pin every later stamp.
const maxStampBump = time.Minute

// changeTime is the changed_at of a change to a state last changed at prev:
// the earliest the store's time can be now, but after prev. Each process
// estimates an S3 store's time from one-second Date headers, so two processes'
// readings can disagree by a second or two; prev was at most the store's time
// of the previous write, which came before this one, so prev plus a
// nanosecond is still a lower bound on the store's time now, and the history
// of changes reads in the order it happened.
func changeTime(prev time.Time, now objstore.TimeBounds) time.Time {
	t := now.Earliest
	if !t.After(prev) && prev.Sub(t) < maxStampBump {
		t = prev.Add(time.Nanosecond)
	}
	return t
}

// rewriteHint tells an operator how to replace an unreadable control object.
const rewriteHint = "rewrite it with `stado optimize pause REASON` to keep autonomy paused, " +
	"or `stado optimize resume` to resume it; either resets the circuit breaker"

func checkActor(actor string) error {
	switch {
	case strings.TrimSpace(actor) == "":
		return fmt.Errorf("%w: the actor is empty; name who is acting, e.g. --actor alice@ops-1", ErrInvalidActor)
	case len(actor) > MaxActorLen:
		return fmt.Errorf("%w: the actor is %d bytes, more than the %d allowed; shorten it", ErrInvalidActor, len(actor), MaxActorLen)
	}
	return nil
}

// Pause turns the emergency pause on with reason, recorded as changed by
// actor at the store's time. Pausing again with the same reason changes
// nothing; with another reason it replaces the reason. An unreadable control
// object is rewritten whole (paused, breaker closed): pausing is always safe.
func Pause(ctx context.Context, store objstore.Store, reason, actor string) (*Outcome, error) {
	switch {
	case strings.TrimSpace(reason) == "":
		return nil, fmt.Errorf("%w: the reason is empty; say why autonomy is paused, e.g. \"db migration\"", ErrInvalidReason)
	case len(reason) > MaxReasonLen:
		return nil, fmt.Errorf("%w: the reason is %d bytes, more than the %d allowed; shorten it", ErrInvalidReason, len(reason), MaxReasonLen)
	}
	if err := checkActor(actor); err != nil {
		return nil, err
	}
	return update(ctx, store, true, func(c *Control, now objstore.TimeBounds) (bool, error) {
		if c.EmergencyPaused && c.Reason == reason {
			return false, nil
		}
		c.EmergencyPaused, c.Reason, c.ChangedAt, c.ChangedBy = true, reason, changeTime(c.ChangedAt, now), actor
		return true, nil
	})
}

// Resume turns the emergency pause off, recorded as changed by actor. When
// not paused it changes nothing. An unreadable control object is rewritten
// whole (not paused, breaker closed): the operator has said to resume.
func Resume(ctx context.Context, store objstore.Store, actor string) (*Outcome, error) {
	if err := checkActor(actor); err != nil {
		return nil, err
	}
	return update(ctx, store, true, func(c *Control, now objstore.TimeBounds) (bool, error) {
		if !c.EmergencyPaused {
			return false, nil
		}
		c.EmergencyPaused, c.Reason, c.ChangedAt, c.ChangedBy = false, "", changeTime(c.ChangedAt, now), actor
		return true, nil
	})
}

// ResetBreaker closes the circuit breaker and clears its history, recorded
// as changed by actor. A breaker already reset changes nothing. An unreadable
// control object is not rewritten (ErrControlUnreadable): whether autonomy
// was paused is unknown, and only pause or resume says which it should be.
func ResetBreaker(ctx context.Context, store objstore.Store, set breaker.Settings, actor string) (*Outcome, error) {
	if err := checkActor(actor); err != nil {
		return nil, err
	}
	return update(ctx, store, false, func(c *Control, now objstore.TimeBounds) (bool, error) {
		next := c.Breaker.Reset(set)
		if next.Equal(c.Breaker) {
			return false, nil
		}
		c.Breaker, c.ChangedAt, c.ChangedBy = next, changeTime(c.ChangedAt, now), actor
		return true, nil
	})
}

// RecordRepair feeds the breaker with the outcome of a repair that actually
// executed on a host (never a planning error or a refusal) and returns the
// breaker state stored afterwards. The transition is judged at the earliest
// reading of the store's clock. A success that changes nothing writes
// nothing (one read). An unreadable control object is not rewritten: the
// answer is an error wrapping ErrControlUnreadable.
func RecordRepair(ctx context.Context, store objstore.Store, set breaker.Settings, succeeded bool, errText string) (breaker.State, error) {
	o, err := update(ctx, store, false, func(c *Control, now objstore.TimeBounds) (bool, error) {
		var next breaker.State
		if succeeded {
			next = c.Breaker.RecordSuccess(set)
		} else {
			next = c.Breaker.RecordFailure(set, now.Earliest, errText)
		}
		if next.Equal(c.Breaker) {
			return false, nil
		}
		c.Breaker = next
		if c.ChangedBy == "" && c.ChangedAt.IsZero() {
			c.ChangedAt, c.ChangedBy = now.Earliest, ReconcilerActor
		}
		return true, nil
	})
	if err != nil {
		return breaker.State{}, fmt.Errorf("record the repair's outcome in the circuit breaker: %w", err)
	}
	return o.After.Control.Breaker, nil
}

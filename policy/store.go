package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stado/stado/internal/docstore"
	"github.com/stado/stado/internal/textdiff"
	"github.com/stado/stado/internal/yamlstrict"
	"github.com/stado/stado/objstore"
)

// InvalidVersion is the policy_version of the fail-closed policy Load puts in
// effect when the stored policy is invalid; reports carry it so that a run
// made under it is recognisable.
const InvalidVersion = "invalid-stored-policy"

// Loaded is the policy in effect, as read from the store.
type Loaded struct {
	// Policy is the effective policy: the stored one; the built-in default
	// when none is stored; a fail-closed policy (report mode, paused, no
	// action budget, no service allowed) when the stored one is invalid.
	// Never nil.
	Policy *Policy
	// Raw is the stored document, byte for byte (comments kept); nil when no
	// policy is stored.
	Raw []byte
	// Version is the store's version (ETag) of the stored document, to pass
	// as --expect-version; "" when no policy is stored.
	Version string
	// ModTime is when the stored document was written, on the store's clock.
	ModTime time.Time
	// Default is true when no policy is stored and Policy is Default().
	Default bool
	// Invalid is why the stored document failed Parse (a yamlstrict.Errors),
	// or nil. When set, Policy is the fail-closed policy and
	// MutationsAllowed is false.
	Invalid error
}

// MutationsAllowed reports whether the policy lets autonomy execute repairs
// at all: it is valid, its mode mutates, and it does not pause autonomy.
// The control state (emergency pause, circuit breaker) is a separate gate.
func (l *Loaded) MutationsAllowed() bool { return l.Refusal() == "" }

// Refusal is the sentence operators see in status when the policy refuses
// every mutation, saying why and what to do; "" when it does not.
func (l *Loaded) Refusal() string {
	switch {
	case l.Invalid != nil:
		return fmt.Sprintf("stored policy %s (version %s) is invalid, so autonomy makes no repair: %s; "+
			"fix it with `stado optimize policy apply -f FILE --expect-version %s`",
			Key, l.Version, yamlstrict.OneLine(l.Invalid, 3), l.Version)
	case l.Default:
		return "no policy is stored, so the built-in default (report mode) is in effect and repairs are only planned; " +
			"to let autonomy repair, apply a policy with `stado optimize policy apply -f FILE`"
	case !l.Policy.Mode.Mutates():
		return fmt.Sprintf("policy %s is in %s mode, so repairs are only planned; "+
			"to let autonomy repair, set mode: %s or %s and apply it with `stado optimize policy apply -f FILE --expect-version %s`",
			quote(l.Policy.PolicyVersion), l.Policy.Mode, ModeEnforceSafe, ModeEnforceOwned, l.Version)
	case l.Policy.Pause:
		return fmt.Sprintf("policy %s pauses autonomy (pause: true), so no repair runs; "+
			"to resume, set pause: false and apply it with `stado optimize policy apply -f FILE --expect-version %s`",
			quote(l.Policy.PolicyVersion), l.Version)
	}
	return ""
}

// failClosed is the policy in effect when the stored one is invalid: it
// refuses mutation on every count, so that a caller that forgets to check
// Loaded.Invalid still repairs nothing.
func failClosed() *Policy {
	p := Default()
	p.PolicyVersion = InvalidVersion
	p.Mode = ModeReport
	p.Pause = true
	p.MaxActionsPerTick = 0
	p.Services = Services{Allow: []string{}, Deny: []string{"*"}}
	return p
}

// Load reads the policy in effect. No stored policy gives the built-in
// default; a stored policy that fails Parse gives a Loaded with Invalid set
// and a fail-closed Policy, not an error, so that status can still show why
// nothing is repaired. Any store error other than not-found is returned,
// wrapped.
func Load(ctx context.Context, store objstore.Store) (*Loaded, error) {
	obj, err := store.Get(ctx, Key)
	if errors.Is(err, objstore.ErrNotFound) {
		return &Loaded{Policy: Default(), Default: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy from %s: %w", store.Location(), err)
	}
	l := &Loaded{Raw: obj.Body, Version: obj.ETag, ModTime: obj.ModTime}
	p, perr := Parse(obj.Body)
	if perr != nil {
		l.Policy, l.Invalid = failClosed(), perr
		return l, nil
	}
	l.Policy = p
	return l, nil
}

// Errors Apply returns; see also ConflictError.
var (
	// ErrExpectVersionRequired: a policy is stored and the apply named no
	// expected version, so it could overwrite a change it has not seen.
	ErrExpectVersionRequired = errors.New("a policy is already stored: --expect-version is required")
	// ErrVersionConflict: the stored policy is not at the version the apply
	// expected. Every *ConflictError matches it with errors.Is.
	ErrVersionConflict = errors.New("policy version conflict")
	// ErrNoChange: the document applied is byte-identical to the stored one.
	// Nothing is written; the stored version stays the current one. Callers
	// may well report this as success.
	ErrNoChange = errors.New("policy unchanged")
)

// ConflictError says the stored policy changed since the operator read it;
// errors.Is(err, ErrVersionConflict) is true.
type ConflictError = docstore.ConflictError

// kind is how the policy is stored and named.
var kind = &docstore.Kind{
	Key:                      Key,
	What:                     "policy",
	Noun:                     "policy",
	ShowCmd:                  "stado optimize policy show",
	Review:                   "review it with `stado optimize policy show` and `stado optimize policy diff -f FILE`",
	ExpectReview:             "review it with `stado optimize policy diff -f FILE`",
	ErrExpectVersionRequired: ErrExpectVersionRequired,
	ErrVersionConflict:       ErrVersionConflict,
	ErrNoChange:              ErrNoChange,
}

// NewConflictError is the version conflict between an expected and the
// current stored version, worded for the policy.
func NewConflictError(expected, current string) *ConflictError {
	return kind.Conflict(expected, current)
}

// Apply validates raw and stores it as the policy, byte for byte, with
// compare-and-swap against expectVersion, and returns the new version. A
// document that fails Parse is refused with the Parse error, unchanged
// (callers prefix each line with the file name), and nothing is written;
// the other answers are docstore.Kind.Apply's.
func Apply(ctx context.Context, store objstore.Store, raw []byte, expectVersion string) (string, error) {
	if _, err := Parse(raw); err != nil {
		return "", err
	}
	return kind.Apply(ctx, store, raw, expectVersion)
}

// Diff returns the unified diff from the stored document (at storedVersion;
// nil and "" when none is stored) to the proposed one read from
// proposedName, or "" when they are identical. The text is raw document
// content: a caller writing it to a terminal escapes control characters.
func Diff(storedVersion string, stored []byte, proposedName string, proposed []byte) string {
	from := fmt.Sprintf("stored (version %s)", storedVersion)
	if storedVersion == "" {
		from = "stored (none: the built-in default is in effect)"
	}
	return textdiff.Unified(from, stored, proposedName, proposed)
}

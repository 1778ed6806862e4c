package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
			Key, l.Version, summarize(l.Invalid), l.Version)
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

// summarize renders a Parse error on one line: the first few problems,
// separated by " | ", and how many more there are.
func summarize(err error) string {
	const shown = 3
	var es yamlstrict.Errors
	if !errors.As(err, &es) {
		return err.Error()
	}
	parts := make([]string, 0, shown)
	for i := 0; i < len(es) && i < shown; i++ {
		parts = append(parts, es[i].Error())
	}
	s := strings.Join(parts, " | ")
	if len(es) > shown {
		s += fmt.Sprintf(" | and %d more", len(es)-shown)
	}
	return s
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

// ConflictError says the stored policy changed since the operator read it.
type ConflictError struct {
	// Expected is the version the apply expected ("" when it expected no
	// stored policy).
	Expected string
	// Current is the version stored now ("" when none is stored).
	Current string
}

// Is makes errors.Is(err, ErrVersionConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrVersionConflict }

// Error says which version is stored now and how to re-apply against it.
func (e *ConflictError) Error() string {
	switch {
	case e.Current == "" && e.Expected == "":
		return fmt.Sprintf("%s: the stored policy changed while this apply was writing it, and none is stored now; "+
			"run `stado optimize policy show` to check, then apply again", ErrVersionConflict)
	case e.Current == "":
		return fmt.Sprintf("%s: --expect-version %s was given, but no policy is stored; "+
			"run `stado optimize policy show` to check, then apply without --expect-version to create it",
			ErrVersionConflict, e.Expected)
	case e.Expected == "":
		return fmt.Sprintf("%s: another policy (version %s) was stored while this one was being created; "+
			"review it with `stado optimize policy show` and `stado optimize policy diff -f FILE`, "+
			"then re-apply with --expect-version %s",
			ErrVersionConflict, e.Current, e.Current)
	}
	return fmt.Sprintf("%s: the stored policy is at version %s, not %s: someone applied a change since you read it; "+
		"review it with `stado optimize policy show` and `stado optimize policy diff -f FILE`, "+
		"then re-apply with --expect-version %s",
		ErrVersionConflict, e.Current, e.Expected, e.Current)
}

// Apply validates raw and stores it as the policy, byte for byte, with
// compare-and-swap against expectVersion, and returns the new version.
//
//   - raw fails Parse: the Parse error, unchanged (callers prefix each line
//     with the file name); nothing is written.
//   - nothing stored: raw is created; with expectVersion set, a
//     *ConflictError, since the operator expected a policy that is not there.
//   - a policy stored, expectVersion empty: ErrExpectVersionRequired, naming
//     the current version.
//   - a policy stored at another version than expectVersion, or replaced
//     while this write was under way: a *ConflictError naming the current
//     version.
//   - raw byte-identical to the stored policy: ErrNoChange. Versions are
//     content hashes, so writing it would leave the version unchanged and
//     an apply would look like it did something it did not.
//
// Reusing a version is harmless here, unlike for leases (DESIGN §3): a
// version names the exact document the operator reviewed, and if the stored
// document has that version it is that document.
func Apply(ctx context.Context, store objstore.Store, raw []byte, expectVersion string) (string, error) {
	if _, err := Parse(raw); err != nil {
		return "", err
	}
	cur, err := store.Get(ctx, Key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		if expectVersion != "" {
			return "", &ConflictError{Expected: expectVersion}
		}
		v, err := store.Create(ctx, Key, raw)
		return resolveWrite(ctx, store, raw, "", v, err)
	case err != nil:
		return "", fmt.Errorf("read the stored policy from %s: %w", store.Location(), err)
	case expectVersion == "":
		return "", fmt.Errorf("%w: it is at version %s; review it with `stado optimize policy diff -f FILE`, then pass --expect-version %s",
			ErrExpectVersionRequired, cur.ETag, cur.ETag)
	case cur.ETag != expectVersion:
		return "", &ConflictError{Expected: expectVersion, Current: cur.ETag}
	case bytes.Equal(cur.Body, raw):
		return "", fmt.Errorf("%w: the stored policy (version %s) is already byte-identical to this document; nothing was written", ErrNoChange, cur.ETag)
	}
	v, err := store.PutIfMatch(ctx, Key, raw, expectVersion)
	return resolveWrite(ctx, store, raw, expectVersion, v, err)
}

// resolveWrite turns the outcome of a conditional write into Apply's answer.
// A failed condition becomes a ConflictError naming the version stored now.
// A write whose outcome is unknown (the store did not answer) is resolved by
// reading back: if the stored document is ours, the write happened.
func resolveWrite(ctx context.Context, store objstore.Store, raw []byte, expected, version string, err error) (string, error) {
	if err == nil {
		return version, nil
	}
	if errors.Is(err, objstore.ErrPrecondition) {
		now, rerr := store.Get(ctx, Key)
		switch {
		case errors.Is(rerr, objstore.ErrNotFound):
			return "", &ConflictError{Expected: expected}
		case rerr != nil:
			return "", fmt.Errorf("%w: the stored policy changed while this apply was writing, and reading it back failed: %w",
				ErrVersionConflict, rerr)
		}
		return "", &ConflictError{Expected: expected, Current: now.ETag}
	}
	if errors.Is(err, objstore.ErrUnavailable) {
		if now, rerr := store.Get(ctx, Key); rerr == nil && bytes.Equal(now.Body, raw) {
			return now.ETag, nil
		}
	}
	return "", fmt.Errorf("write the policy to %s: %w", store.Location(), err)
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

// Package docstore owns the one way stado stores a document an operator
// applies (the policy, the service registry): byte for byte, comments kept,
// written with compare-and-swap against the version the operator reviewed,
// so that two operators can never silently overwrite each other.
package docstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/stado/stado/objstore"
)

// Kind describes one kind of applied document: where it lives, how
// operators name and review it, and the sentinel errors its package exports.
type Kind struct {
	Key string
	// What names the document in store errors: "policy", "service registry".
	What string
	// Noun names it after "the stored": "policy", "registry".
	Noun string
	// ShowCmd shows the stored document.
	ShowCmd string
	// Review says how to review the stored document against a file.
	Review string
	// ExpectReview says how to review before passing --expect-version.
	ExpectReview string

	ErrExpectVersionRequired error
	ErrVersionConflict       error
	ErrNoChange              error
}

// ConflictError says the stored document changed since the operator read
// it. errors.Is(err, kind.ErrVersionConflict) is true.
type ConflictError struct {
	Kind *Kind
	// Expected is the version the apply expected ("" when it expected no
	// stored document).
	Expected string
	// Current is the version stored now ("" when none is stored).
	Current string
}

// Conflict returns the ConflictError of this kind.
func (k *Kind) Conflict(expected, current string) *ConflictError {
	return &ConflictError{Kind: k, Expected: expected, Current: current}
}

// Is makes errors.Is(err, Kind.ErrVersionConflict) true.
func (e *ConflictError) Is(target error) bool {
	return e.Kind != nil && target == e.Kind.ErrVersionConflict
}

// Error says which version is stored now and how to re-apply against it.
func (e *ConflictError) Error() string {
	k := e.Kind
	switch {
	case e.Current == "" && e.Expected == "":
		return fmt.Sprintf("%s: the stored %s changed while this apply was writing it, and none is stored now; "+
			"run `%s` to check, then apply again", k.ErrVersionConflict, k.Noun, k.ShowCmd)
	case e.Current == "":
		return fmt.Sprintf("%s: --expect-version %s was given, but no %s is stored; "+
			"run `%s` to check, then apply without --expect-version to create it",
			k.ErrVersionConflict, e.Expected, k.Noun, k.ShowCmd)
	case e.Expected == "":
		return fmt.Sprintf("%s: another %s (version %s) was stored while this one was being created; "+
			"%s, then re-apply with --expect-version %s",
			k.ErrVersionConflict, k.Noun, e.Current, k.Review, e.Current)
	}
	return fmt.Sprintf("%s: the stored %s is at version %s, not %s: someone applied a change since you read it; "+
		"%s, then re-apply with --expect-version %s",
		k.ErrVersionConflict, k.Noun, e.Current, e.Expected, k.Review, e.Current)
}

// Apply stores raw, already validated by the caller, byte for byte, with
// compare-and-swap against expectVersion, and returns the new version.
//
//   - nothing stored: raw is created; with expectVersion set, a
//     *ConflictError, since the operator expected a document that is not
//     there.
//   - a document stored, expectVersion empty: ErrExpectVersionRequired,
//     naming the current version.
//   - a document stored at another version than expectVersion, or replaced
//     while this write was under way: a *ConflictError naming the current
//     version.
//   - raw byte-identical to the stored document: ErrNoChange. Versions are
//     content hashes, so writing it would leave the version unchanged and
//     an apply would look like it did something it did not.
//
// Reusing a version is harmless here, unlike for leases (DESIGN §3): a
// version names the exact document the operator reviewed.
func (k *Kind) Apply(ctx context.Context, store objstore.Store, raw []byte, expectVersion string) (string, error) {
	cur, err := store.Get(ctx, k.Key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		if expectVersion != "" {
			return "", &ConflictError{Kind: k, Expected: expectVersion}
		}
		v, err := store.Create(ctx, k.Key, raw)
		return k.resolveWrite(ctx, store, raw, "", v, err)
	case err != nil:
		return "", fmt.Errorf("read the stored %s from %s: %w", k.What, store.Location(), err)
	case expectVersion == "":
		return "", fmt.Errorf("%w: it is at version %s; %s, then pass --expect-version %s",
			k.ErrExpectVersionRequired, cur.ETag, k.ExpectReview, cur.ETag)
	case cur.ETag != expectVersion:
		return "", &ConflictError{Kind: k, Expected: expectVersion, Current: cur.ETag}
	case bytes.Equal(cur.Body, raw):
		return "", fmt.Errorf("%w: the stored %s (version %s) is already byte-identical to this document; nothing was written",
			k.ErrNoChange, k.Noun, cur.ETag)
	}
	v, err := store.PutIfMatch(ctx, k.Key, raw, expectVersion)
	return k.resolveWrite(ctx, store, raw, expectVersion, v, err)
}

// resolveWrite turns the outcome of a conditional write into Apply's answer.
// A failed condition becomes a ConflictError naming the version stored now.
// A write whose outcome is unknown (the store did not answer, or the SDK's
// retry of a write that had landed failed its condition) is resolved by
// reading back: if the stored document is ours, the write happened.
func (k *Kind) resolveWrite(ctx context.Context, store objstore.Store, raw []byte, expected, version string, err error) (string, error) {
	if err == nil {
		return version, nil
	}
	if errors.Is(err, objstore.ErrPrecondition) {
		now, rerr := store.Get(ctx, k.Key)
		switch {
		case errors.Is(rerr, objstore.ErrNotFound):
			return "", &ConflictError{Kind: k, Expected: expected}
		case rerr != nil:
			return "", fmt.Errorf("%w: the stored %s changed while this apply was writing, and reading it back failed: %w",
				k.ErrVersionConflict, k.Noun, rerr)
		case bytes.Equal(now.Body, raw):
			return now.ETag, nil
		}
		return "", &ConflictError{Kind: k, Expected: expected, Current: now.ETag}
	}
	if errors.Is(err, objstore.ErrUnavailable) {
		if now, rerr := store.Get(ctx, k.Key); rerr == nil && bytes.Equal(now.Body, raw) {
			return now.ETag, nil
		}
	}
	return "", fmt.Errorf("write the %s to %s: %w", k.What, store.Location(), err)
}

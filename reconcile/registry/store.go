package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stado/stado/internal/yamlstrict"
	"github.com/stado/stado/objstore"
)

// Document is the registry as stored, not yet parsed.
type Document struct {
	// Raw is the stored document, byte for byte (comments kept); nil when
	// none is stored.
	Raw []byte
	// Version is the store's version (ETag) of the document, to pass as
	// --expect-version; "" when none is stored.
	Version string
	// ModTime is when the document was written, on the store's clock.
	ModTime time.Time
	// Missing is true when no registry is stored.
	Missing bool
}

// Loaded is the registry in effect.
type Loaded struct {
	Document
	// Registry is the parsed registry; never nil. It declares no services
	// when Missing is set.
	Registry *Registry
}

// Errors Load and Apply return; see also InvalidError and ConflictError.
var (
	// ErrInvalid: the stored registry fails Parse. Every *InvalidError
	// matches it with errors.Is.
	ErrInvalid = errors.New("the stored service registry is invalid")
	// ErrExpectVersionRequired: a registry is stored and the apply named no
	// expected version, so it could overwrite a change it has not seen.
	ErrExpectVersionRequired = errors.New("a service registry is already stored: --expect-version is required")
	// ErrVersionConflict: the stored registry is not at the version the
	// apply expected. Every *ConflictError matches it with errors.Is.
	ErrVersionConflict = errors.New("service registry version conflict")
	// ErrNoChange: the document applied is byte-identical to the stored one;
	// nothing is written. Callers may report this as success.
	ErrNoChange = errors.New("service registry unchanged")
)

// InvalidError says the stored registry fails Parse. A tick cannot run on
// it: which services exist is the one thing it must not guess.
type InvalidError struct {
	// Version is the stored version.
	Version string
	// Problems is the Parse error, a yamlstrict.Errors.
	Problems error
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the Parse error.
func (e *InvalidError) Unwrap() error { return e.Problems }

// Error names the key, the version and the first problems on one line, and
// says how to fix it.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("the stored service registry %s (version %s) is invalid: %s; "+
		"fix it and apply it with `stado service apply -f FILE --expect-version %s` (see it with `stado service show`)",
		Key, e.Version, summarize(e.Problems), e.Version)
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

// Fetch reads the stored document without parsing it: what `stado service
// show` prints, valid or not. No stored registry is not an error: Missing is
// set.
func Fetch(ctx context.Context, store objstore.Store) (Document, error) {
	obj, err := store.Get(ctx, Key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return Document{Missing: true}, nil
	case err != nil:
		return Document{}, fmt.Errorf("read the service registry from %s: %w", store.Location(), err)
	}
	return Document{Raw: obj.Body, Version: obj.ETag, ModTime: obj.ModTime}, nil
}

// Load reads and parses the registry. No stored registry gives an empty one
// with Missing set. A stored registry that fails Parse is an *InvalidError;
// any store error is returned, wrapped.
func Load(ctx context.Context, store objstore.Store) (*Loaded, error) {
	doc, err := Fetch(ctx, store)
	if err != nil {
		return nil, err
	}
	if doc.Missing {
		return &Loaded{Document: doc, Registry: &Registry{Services: []Service{}}}, nil
	}
	r, err := Parse(doc.Raw)
	if err != nil {
		return nil, &InvalidError{Version: doc.Version, Problems: err}
	}
	return &Loaded{Document: doc, Registry: r}, nil
}

// ConflictError says the stored registry changed since the operator read it.
type ConflictError struct {
	// Expected is the version the apply expected ("" when it expected no
	// stored registry).
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
		return fmt.Sprintf("%s: the stored registry changed while this apply was writing it, and none is stored now; "+
			"run `stado service show` to check, then apply again", ErrVersionConflict)
	case e.Current == "":
		return fmt.Sprintf("%s: --expect-version %s was given, but no registry is stored; "+
			"run `stado service show` to check, then apply without --expect-version to create it",
			ErrVersionConflict, e.Expected)
	case e.Expected == "":
		return fmt.Sprintf("%s: another registry (version %s) was stored while this one was being created; "+
			"review it with `stado service show`, then re-apply with --expect-version %s",
			ErrVersionConflict, e.Current, e.Current)
	}
	return fmt.Sprintf("%s: the stored registry is at version %s, not %s: someone applied a change since you read it; "+
		"review it with `stado service show`, then re-apply with --expect-version %s",
		ErrVersionConflict, e.Current, e.Expected, e.Current)
}

// Apply validates raw and stores it as the registry, byte for byte, with
// compare-and-swap against expectVersion, and returns the new version and
// the registry parsed from raw (so that a caller need not parse it again).
// Its cases are those of policy.Apply:
//
//   - raw fails Parse: the Parse error, unchanged (callers prefix each line
//     with the file name); nothing is written.
//   - nothing stored: raw is created; with expectVersion set, a
//     *ConflictError, since the operator expected a registry that is not
//     there.
//   - a registry stored, expectVersion empty: ErrExpectVersionRequired,
//     naming the current version.
//   - a registry stored at another version than expectVersion, or replaced
//     while this write was under way: a *ConflictError naming the current
//     version.
//   - raw byte-identical to the stored registry: ErrNoChange (versions are
//     content hashes, so writing it would change nothing).
func Apply(ctx context.Context, store objstore.Store, raw []byte, expectVersion string) (string, *Registry, error) {
	r, err := Parse(raw)
	if err != nil {
		return "", nil, err
	}
	cur, err := store.Get(ctx, Key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		if expectVersion != "" {
			return "", nil, &ConflictError{Expected: expectVersion}
		}
		v, err := store.Create(ctx, Key, raw)
		v, err = resolveWrite(ctx, store, raw, "", v, err)
		return v, r, err
	case err != nil:
		return "", nil, fmt.Errorf("read the stored service registry from %s: %w", store.Location(), err)
	case expectVersion == "":
		return "", nil, fmt.Errorf("%w: it is at version %s; review it with `stado service show`, then pass --expect-version %s",
			ErrExpectVersionRequired, cur.ETag, cur.ETag)
	case cur.ETag != expectVersion:
		return "", nil, &ConflictError{Expected: expectVersion, Current: cur.ETag}
	case bytes.Equal(cur.Body, raw):
		return "", nil, fmt.Errorf("%w: the stored registry (version %s) is already byte-identical to this document; nothing was written",
			ErrNoChange, cur.ETag)
	}
	v, err := store.PutIfMatch(ctx, Key, raw, expectVersion)
	v, err = resolveWrite(ctx, store, raw, expectVersion, v, err)
	return v, r, err
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
			return "", fmt.Errorf("%w: the stored registry changed while this apply was writing, and reading it back failed: %w",
				ErrVersionConflict, rerr)
		}
		return "", &ConflictError{Expected: expected, Current: now.ETag}
	}
	if errors.Is(err, objstore.ErrUnavailable) {
		if now, rerr := store.Get(ctx, Key); rerr == nil && bytes.Equal(now.Body, raw) {
			return now.ETag, nil
		}
	}
	return "", fmt.Errorf("write the service registry to %s: %w", store.Location(), err)
}

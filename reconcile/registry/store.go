package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stado/stado/internal/docstore"
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
		Key, e.Version, yamlstrict.OneLine(e.Problems, 3), e.Version)
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

// ConflictError says the stored registry changed since the operator read
// it; errors.Is(err, ErrVersionConflict) is true.
type ConflictError = docstore.ConflictError

// kind is how the registry is stored and named.
var kind = &docstore.Kind{
	Key:                      Key,
	What:                     "service registry",
	Noun:                     "registry",
	ShowCmd:                  "stado service show",
	Review:                   "review it with `stado service show`",
	ExpectReview:             "review it with `stado service show`",
	ErrExpectVersionRequired: ErrExpectVersionRequired,
	ErrVersionConflict:       ErrVersionConflict,
	ErrNoChange:              ErrNoChange,
}

// Apply validates raw and stores it as the registry, byte for byte, with
// compare-and-swap against expectVersion, and returns the new version and
// the registry parsed from raw (so that a caller need not parse it again).
// A document that fails Parse is refused with the Parse error, unchanged,
// and nothing is written; the other answers are docstore.Kind.Apply's.
func Apply(ctx context.Context, store objstore.Store, raw []byte, expectVersion string) (string, *Registry, error) {
	r, err := Parse(raw)
	if err != nil {
		return "", nil, err
	}
	v, err := kind.Apply(ctx, store, raw, expectVersion)
	if err != nil {
		return "", nil, err
	}
	return v, r, nil
}

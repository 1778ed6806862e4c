// Package objstore owns stado's only means of coordination: an object store
// with conditional writes. It defines the Store interface, the three backends
// (fs, the embedded default; s3; mem, for tests), the write allowlist, the
// request-counting wrapper and the store clock, the time every lease instant
// is minted and judged on.
//
// Reconcilers never talk to each other. Every decision that two of them could
// make at once is arbitrated by one conditional write here, so the contract of
// each operation is exact and the same on every backend; the conformance suite
// in objstore/storetest holds every backend to it.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Callers branch on them with errors.Is; every error a
// backend returns for one of these conditions wraps exactly one of them.
var (
	// ErrNotFound: the key holds no object.
	ErrNotFound = errors.New("object not found")
	// ErrPrecondition: a conditional write's condition did not hold. For
	// Create the key already exists; for PutIfMatch and DeleteIfMatch the
	// stored version is not the one given (or there is none).
	ErrPrecondition = errors.New("precondition failed")
	// ErrUnavailable: the store could not be reached or did not answer
	// (connection refused or reset, timeout, 5xx after retries). The outcome
	// of a write that failed this way is unknown: it may have committed.
	ErrUnavailable = errors.New("store unavailable")
	// ErrDenied: the store refused the credentials or the operation.
	ErrDenied = errors.New("store access denied")
	// ErrOutsideAllowlist: a write to a key outside the write allowlist,
	// refused before any request was sent.
	ErrOutsideAllowlist = errors.New("key outside the write allowlist")
	// ErrInvalidKey: the key is not a valid object key.
	ErrInvalidKey = errors.New("invalid object key")
)

// Object is one stored object as read.
type Object struct {
	Key  string
	Body []byte
	// ETag identifies this exact version of the object; pass it to
	// PutIfMatch or DeleteIfMatch. It is a hash of the content on every
	// backend, so two equal bodies have equal ETags: content written with
	// compare-and-swap must be unique per write (a token, a timestamp).
	ETag string
	// ModTime is the store's modification time of this version, on the
	// store's clock (second resolution on S3).
	ModTime time.Time
}

// Entry is one key returned by List.
type Entry struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// TimeBounds is one reading of the store's clock: the store's time at the
// moment of reading lies within [Earliest, Latest]. A judgement that an
// instant has passed uses Earliest (it has certainly passed); a deadline that
// must not be overrun uses Latest.
type TimeBounds struct {
	Earliest time.Time
	Latest   time.Time
}

// Uncertainty is the width of the interval.
func (b TimeBounds) Uncertainty() time.Duration { return b.Latest.Sub(b.Earliest) }

// Store is an object store with conditional writes. Keys are slash-separated
// paths (see ValidKey). Every method that does I/O takes a context; methods
// are safe for concurrent use.
type Store interface {
	// Get reads the object at key, or fails with ErrNotFound.
	Get(ctx context.Context, key string) (Object, error)
	// Create writes body at key only if the key holds no object
	// (S3 If-None-Match: *), or fails with ErrPrecondition. It returns the
	// new ETag.
	Create(ctx context.Context, key string, body []byte) (string, error)
	// PutIfMatch replaces the object at key only if its current ETag is etag
	// (S3 If-Match), or fails with ErrPrecondition, also when the key holds
	// no object. It returns the new ETag.
	PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error)
	// Put writes body at key unconditionally and returns the new ETag.
	Put(ctx context.Context, key string, body []byte) (string, error)
	// DeleteIfMatch deletes the object at key only if its current ETag is
	// etag, or fails with ErrPrecondition. When the key holds no object it
	// fails with ErrNotFound on fs and mem; S3 servers differ (AWS answers
	// 404, some gateways succeed), so callers must not rely on the
	// distinction there.
	DeleteIfMatch(ctx context.Context, key, etag string) error
	// Delete removes the object at key; deleting an absent key succeeds.
	Delete(ctx context.Context, key string) error
	// List calls fn for every key that starts with prefix, in byte order,
	// however many there are; an error from fn stops the listing and is
	// returned.
	List(ctx context.Context, prefix string, fn func(Entry) error) error
	// Now reads the store's clock. It may cost a request when the store has
	// not answered one recently.
	Now(ctx context.Context) (TimeBounds, error)
	// Location names the store for messages, without credentials.
	Location() string
}

// MaxKeyLen is the longest key accepted (S3's limit).
const MaxKeyLen = 1024

// ValidKey reports whether key is a valid object key: non-empty, at most
// MaxKeyLen bytes, slash-separated segments that are non-empty, do not start
// with a dot (".", ".." and the fs backend's own temporary files are thereby
// excluded) and contain no control characters or backslashes.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key is %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" {
			return fmt.Errorf("%w: %q has an empty path segment", ErrInvalidKey, key)
		}
		if seg[0] == '.' {
			return fmt.Errorf("%w: %q has a segment starting with a dot", ErrInvalidKey, key)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f || r == '\\' {
				return fmt.Errorf("%w: %q contains a control character or backslash", ErrInvalidKey, key)
			}
		}
	}
	return nil
}

// opError builds the error a backend returns: which operation on which key
// failed, wrapping the sentinel that classifies it and, when there is one, the
// underlying cause.
func opError(op, key string, sentinel, cause error) error {
	if cause == nil {
		return fmt.Errorf("store %s %s: %w", op, key, sentinel)
	}
	return fmt.Errorf("store %s %s: %w: %w", op, key, sentinel, cause)
}

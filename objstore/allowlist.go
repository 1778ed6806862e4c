package objstore

import (
	"context"
	"fmt"
	"strings"
)

// DefaultAllowlist is the write allowlist when none is configured: the prefix
// the S3 gateway in front of the canonical store authorizes.
var DefaultAllowlist = []string{"state/"}

// Allowlist wraps a Store so that every write (create, put, put-if-match,
// delete, delete-if-match) to a key outside the given prefixes fails with
// ErrOutsideAllowlist before any request is sent. Reads pass through.
func Allowlist(s Store, prefixes ...string) Store {
	if len(prefixes) == 0 {
		prefixes = DefaultAllowlist
	}
	return &allowlisted{Store: s, prefixes: append([]string(nil), prefixes...)}
}

type allowlisted struct {
	Store
	prefixes []string
}

func (a *allowlisted) check(op, key string) error {
	for _, p := range a.prefixes {
		if strings.HasPrefix(key, p) {
			return nil
		}
	}
	return fmt.Errorf("store %s %q: %w %q: stado writes only under these prefixes; this is a bug in the caller or a misconfigured allowlist",
		op, key, ErrOutsideAllowlist, a.prefixes)
}

func (a *allowlisted) Create(ctx context.Context, key string, body []byte) (string, error) {
	if err := a.check("create", key); err != nil {
		return "", err
	}
	return a.Store.Create(ctx, key, body)
}

func (a *allowlisted) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	if err := a.check("put-if-match", key); err != nil {
		return "", err
	}
	return a.Store.PutIfMatch(ctx, key, body, etag)
}

func (a *allowlisted) Put(ctx context.Context, key string, body []byte) (string, error) {
	if err := a.check("put", key); err != nil {
		return "", err
	}
	return a.Store.Put(ctx, key, body)
}

func (a *allowlisted) DeleteIfMatch(ctx context.Context, key, etag string) error {
	if err := a.check("delete-if-match", key); err != nil {
		return err
	}
	return a.Store.DeleteIfMatch(ctx, key, etag)
}

func (a *allowlisted) Delete(ctx context.Context, key string) error {
	if err := a.check("delete", key); err != nil {
		return err
	}
	return a.Store.Delete(ctx, key)
}

// Unwrap returns the wrapped store.
func (a *allowlisted) Unwrap() Store { return a.Store }

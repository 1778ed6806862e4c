package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stado/stado/objstore"
)

// retriedStore commits every conditional write, then answers as the S3
// SDK's retry of it does once the first attempt's answer was lost: the
// retry's condition fails against the write that just landed.
type retriedStore struct{ objstore.Store }

func (r retriedStore) Create(ctx context.Context, key string, body []byte) (string, error) {
	if _, err := r.Store.Create(ctx, key, body); err != nil {
		return "", err
	}
	return "", fmt.Errorf("store create %s: %w", key, objstore.ErrPrecondition)
}

func (r retriedStore) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	if _, err := r.Store.PutIfMatch(ctx, key, body, etag); err != nil {
		return "", err
	}
	return "", fmt.Errorf("store put-if-match %s: %w", key, objstore.ErrPrecondition)
}

// TestApplyOwnWriteRetriedIsNotAConflict is the regression test of a bug the
// reliability suite found (commit-then-503 and commit-then-reset on PUT
// policy.yaml): an apply whose write landed, but whose answer was lost and
// whose SDK retry then answered 412, was reported as a version conflict with
// a change "someone" applied: the operator's own.
func TestApplyOwnWriteRetriedIsNotAConflict(t *testing.T) {
	ctx := context.Background()
	mem := newStore()
	v, err := Apply(ctx, retriedStore{mem}, doc("a", "report"), "")
	if err != nil || v != stored(t, mem).ETag {
		t.Fatalf("create that landed: %q %v, want the stored version", v, err)
	}
	v2, err := Apply(ctx, retriedStore{mem}, doc("b", "report"), v)
	if err != nil || v2 != stored(t, mem).ETag || v2 == v {
		t.Fatalf("put that landed: %q %v, want the new stored version", v2, err)
	}
	// A real conflict is still one.
	if _, err := Apply(ctx, mem, doc("c", "report"), v2); err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ctx, retriedStore{mem}, doc("d", "report"), v2)
	if !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("apply against a version replaced meanwhile: %v, want a conflict", err)
	}
}

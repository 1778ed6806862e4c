package objstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/objstore"
)

// TestS3LostDeleteAnswerRetried404IsUnavailable is the regression test of a
// bug the reliability suite found: a conditional delete that committed but
// whose answer was lost (503), retried by the SDK and answered 404 as AWS S3
// does, came back as ErrNotFound, so a lease release concluded that someone
// else had removed the lease (ownership-changed), failed a good repair and
// fed the circuit breaker a failure. The outcome is unknown: ErrUnavailable.
func TestS3LostDeleteAnswerRetried404IsUnavailable(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t)
	s := newS3Via(t, p.URL, objstore.S3Options{})
	etag, err := s.Create(ctx, "state/x", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	// The first rule fires once; the SDK's retry then meets the second.
	p.Add(&faultproxy.Rule{Method: http.MethodDelete, Times: 1, Action: faultproxy.CommitThenStatus, Status: 503},
		&faultproxy.Rule{Method: http.MethodDelete, Times: 1, Action: faultproxy.Status, Status: 404, Code: "NoSuchKey"})
	err = s.DeleteIfMatch(ctx, "state/x", etag)
	if !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("DeleteIfMatch whose answer was lost and whose retry found no object: %v, want ErrUnavailable only (injected %v)", err, p.Injected())
	}
	if _, err := s.Get(ctx, "state/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the delete did not land: %v", err)
	}
	// A delete of a key that is simply absent is still not found.
	p.Clear()
	if err := s.DeleteIfMatch(ctx, "state/never", etag); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("DeleteIfMatch of an absent key: %v", err)
	}
}

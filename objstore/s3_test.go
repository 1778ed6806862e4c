package objstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/objstore"
)

func startProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(s3srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newS3Via(t *testing.T, endpoint string, o objstore.S3Options) *objstore.S3 {
	t.Helper()
	o.Bucket = s3srv.Bucket(t)
	o.Region = s3srv.Region
	o.Endpoint = endpoint
	o.PathStyle = true
	o.Credentials = s3srv.Credentials()
	s, err := objstore.NewS3(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3StoreClockFollowsServerDate shifts the server's Date header by hours
// and skews the local wall clock the other way: the store clock must follow
// the server, never the local wall clock.
func TestS3StoreClockFollowsServerDate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		serverShift time.Duration
		localSkew   time.Duration
	}{
		{"server ahead, local behind", 3 * time.Hour, -time.Hour},
		{"server behind, local ahead", -2 * time.Hour, time.Hour},
		{"both true", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t)
			p.SetDateOffset(tc.serverShift)
			s := newS3Via(t, p.URL, objstore.S3Options{Clock: clock.Skewed{Offset: tc.localSkew}})
			ctx := context.Background()
			if _, err := s.Create(ctx, "state/x", []byte("x")); err != nil {
				t.Fatal(err)
			}
			b, err := s.Now(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := time.Now().Add(tc.serverShift)
			// The true server time lies in the bounds (the server runs on this
			// host, so its true time is ours plus the injected shift).
			if want.Before(b.Earliest.Add(-10*time.Millisecond)) || want.After(b.Latest.Add(10*time.Millisecond)) {
				t.Fatalf("store clock [%v, %v] does not contain the server's time %v", b.Earliest, b.Latest, want)
			}
			if b.Uncertainty() > 2500*time.Millisecond {
				t.Fatalf("uncertainty %v: a loopback Date sample should bound the time within two seconds", b.Uncertainty())
			}
		})
	}
}

// TestS3StoreClockColdAsksServer: with no response seen yet, Now sends one
// request (HEAD bucket) and then answers from it.
func TestS3StoreClockColdAsksServer(t *testing.T) {
	s := newS3(t, objstore.S3Options{})
	ctx := context.Background()
	if _, err := s.Now(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()["HeadBucket"]; got != 1 {
		t.Fatalf("cold Now sent %d HeadBucket requests, want 1 (all: %v)", got, s.Requests())
	}
	if _, err := s.Now(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()["HeadBucket"]; got != 1 {
		t.Fatalf("warm Now sent another request: %v", s.Requests())
	}
}

func TestS3TransportErrorsAreUnavailable(t *testing.T) {
	ctx := context.Background()
	t.Run("connection refused", func(t *testing.T) {
		p := startProxy(t)
		url := p.URL
		p.Close()
		s := newS3Via(t, url, objstore.S3Options{RetryMaxAttempts: 1})
		_, err := s.Get(ctx, "state/x")
		if !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Get through a closed port: %v, want ErrUnavailable only", err)
		}
	})
	for _, st := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(st), func(t *testing.T) {
			p := startProxy(t)
			s := newS3Via(t, p.URL, objstore.S3Options{RetryMaxAttempts: 2})
			p.Add(&faultproxy.Rule{Action: faultproxy.Status, Status: st})
			_, err := s.Create(ctx, "state/x", []byte("x"))
			if !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrPrecondition) {
				t.Fatalf("Create answered %d: %v, want ErrUnavailable only", st, err)
			}
		})
	}
	t.Run("reset", func(t *testing.T) {
		p := startProxy(t)
		s := newS3Via(t, p.URL, objstore.S3Options{RetryMaxAttempts: 1})
		p.Add(&faultproxy.Rule{Action: faultproxy.Reset})
		_, err := s.Get(ctx, "state/x")
		if !errors.Is(err, objstore.ErrUnavailable) {
			t.Fatalf("Get over a reset connection: %v, want ErrUnavailable", err)
		}
	})
}

// TestS3CreateRetriedAfterCommit shows the ambiguity the lease must resolve:
// the first attempt commits, its answer is lost, the SDK retries, and the
// retry is refused because the object now exists.
func TestS3CreateRetriedAfterCommit(t *testing.T) {
	p := startProxy(t)
	s := newS3Via(t, p.URL, objstore.S3Options{})
	p.Add(&faultproxy.Rule{Method: http.MethodPut, Times: 1, Action: faultproxy.CommitThenStatus, Status: http.StatusServiceUnavailable})
	ctx := context.Background()
	_, err := s.Create(ctx, "state/x", []byte("mine"))
	if !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("Create whose first attempt committed: %v, want ErrPrecondition from the retry", err)
	}
	if got := s.Requests()["PutObject"]; got != 2 {
		t.Fatalf("PutObject attempts = %d, want 2 (the committed one and the SDK's retry)", got)
	}
	o, err := s.Get(ctx, "state/x")
	if err != nil || string(o.Body) != "mine" {
		t.Fatalf("stored %q, %v", o.Body, err)
	}
}

func TestS3NoSuchBucketIsNotNotFound(t *testing.T) {
	s, err := objstore.NewS3(context.Background(), objstore.S3Options{
		Bucket: "no-such-bucket-here", Region: s3srv.Region, Endpoint: s3srv.Endpoint, PathStyle: true, Credentials: s3srv.Credentials(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(context.Background(), "state/autonomy/policy.yaml")
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get from a missing bucket: %v; a missing bucket must never read as a missing object", err)
	}
}

func TestAllowlistRefusesBeforeAnyRequest(t *testing.T) {
	p := startProxy(t)
	raw := newS3Via(t, p.URL, objstore.S3Options{})
	s := objstore.Allowlist(raw)
	ctx := context.Background()
	before := p.Forwarded()
	checks := map[string]error{}
	_, checks["create"] = s.Create(ctx, "other/x", []byte("x"))
	_, checks["put"] = s.Put(ctx, "stateX/x", []byte("x"))
	_, checks["put-if-match"] = s.PutIfMatch(ctx, "x", []byte("x"), "e")
	checks["delete"] = s.Delete(ctx, "other/x")
	checks["delete-if-match"] = s.DeleteIfMatch(ctx, "other/x", "e")
	for op, err := range checks {
		if !errors.Is(err, objstore.ErrOutsideAllowlist) {
			t.Errorf("%s outside the allowlist: %v", op, err)
		}
	}
	if got := p.Forwarded() - before; got != 0 {
		t.Fatalf("%d requests reached the server for refused writes", got)
	}
	if _, err := s.Create(ctx, "state/ok", []byte("x")); err != nil {
		t.Fatalf("write inside the allowlist: %v", err)
	}
}

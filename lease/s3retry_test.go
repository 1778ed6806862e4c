package lease_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

// A create retried by the SDK after its first attempt committed is answered
// 412 by the server; the lease reads back, finds its own token, and holds.
// The faults are injected by a proxy between the SDK and a real S3 server.
func TestS3CreateRetriedBySDKAfterCommitIsOurs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action faultproxy.Action
	}{
		{"answer lost as 503", faultproxy.CommitThenStatus},
		{"connection reset after commit", faultproxy.CommitThenReset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := faultproxy.Start(s3srv.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			s, err := objstore.NewS3(context.Background(), objstore.S3Options{
				Bucket: s3srv.Bucket(t), Region: s3srv.Region, Endpoint: p.URL, PathStyle: true, Credentials: s3srv.Credentials(),
			})
			if err != nil {
				t.Fatal(err)
			}
			m := newManager(t, s, clock.Real{})
			if _, err := s.Now(bg(t)); err != nil {
				t.Fatal(err)
			}
			p.Add(&faultproxy.Rule{Method: http.MethodPut, Times: 1, Action: tc.action, Status: http.StatusServiceUnavailable})
			before := s.Requests()
			g, err := m.TryTake(bg(t), "service:web-1:api.service", time.Minute, "d")
			if err != nil {
				t.Fatalf("TryTake: %v; a create that committed before its answer was lost must be recognised as ours", err)
			}
			after := s.Requests()
			if puts := after["PutObject"] - before["PutObject"]; puts != 2 {
				t.Fatalf("%d PutObject attempts, want 2 (the committed one and the SDK's retry answered 412)", puts)
			}
			if p.Injected()[tc.action.String()] != 1 {
				t.Fatalf("the fault was not injected: %v", p.Injected())
			}
			o, err := s.Get(bg(t), g.Key())
			if err != nil {
				t.Fatal(err)
			}
			rec, err := lease.ParseRecord(o.Body)
			if err != nil || rec.Token != g.Token {
				t.Fatalf("stored token %q, grant token %q (%v)", rec.Token, g.Token, err)
			}
			if res, err := m.Release(bg(t), g); err != nil || res != lease.Released {
				t.Fatalf("release: %v %v", res, err)
			}
		})
	}
}

package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var ownerSeq atomic.Int64

func newManager(t testing.TB, s objstore.Store, c clock.Clock) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(s, lease.Config{
		Holder:       "service-reconciler",
		Owner:        "test/" + time.Now().Format("150405") + "/" + string(rune('a'+ownerSeq.Add(1)%26)),
		Clock:        c,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustTake(t testing.TB, m *lease.Manager, subject string, ttl time.Duration) *lease.Grant {
	t.Helper()
	g, err := m.TryTake(bg(t), subject, ttl, "decision-"+subject)
	if err != nil {
		t.Fatalf("TryTake(%s): %v", subject, err)
	}
	return g
}

func wantHeld(t testing.TB, err error) *lease.HeldError {
	t.Helper()
	var h *lease.HeldError
	if !errors.As(err, &h) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("got %v, want a HeldError", err)
	}
	return h
}

// writes counts the mutating requests a Counting store saw.
func writes(c *objstore.Counting) int64 {
	n := int64(0)
	for verb, v := range c.Counts() {
		if verb != "get" && verb != "list" {
			n += v
		}
	}
	return n
}

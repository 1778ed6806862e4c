// Package clock owns the notion of local time that stado's logic reads: the
// wall clock with its monotonic reading, and sleeping. Every component takes a
// Clock so tests can skew it, freeze it or advance it by hand; nothing in the
// logic calls time.Now directly.
package clock

import (
	"context"
	"time"
)

// Clock is the local clock of one process.
//
// Now returns the local wall time with Go's monotonic reading attached, so
// differences between two readings (t.Sub, time.Since on a Real clock) measure
// elapsed time even when the wall clock is wrong or is stepped.
type Clock interface {
	Now() time.Time
	// Sleep waits for d to elapse on this clock, or for ctx to end.
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the process's own clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Sleep waits for d or for ctx to end, whichever comes first.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Skewed is a real clock whose wall reading is offset by Offset. Elapsed time
// is unaffected: the monotonic reading is kept, which is exactly what a host
// with a wrong wall clock looks like.
type Skewed struct {
	Offset time.Duration
}

// Now returns time.Now() shifted by the offset, monotonic reading intact.
func (s Skewed) Now() time.Time { return time.Now().Add(s.Offset) }

// Sleep sleeps on the real clock.
func (s Skewed) Sleep(ctx context.Context, d time.Duration) error { return Real{}.Sleep(ctx, d) }

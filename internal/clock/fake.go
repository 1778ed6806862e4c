package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a clock that moves only when Advance or Set is called. Sleepers wake
// when the fake time reaches their deadline. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	until time.Time
	ch    chan struct{}
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time. It carries no monotonic reading; differences
// between fake readings are exact.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Sleep blocks until the fake time has advanced by d or ctx ends.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	f.mu.Lock()
	w := &fakeWaiter{until: f.now.Add(d), ch: make(chan struct{})}
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				break
			}
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the fake time forward by d and wakes every sleeper whose
// deadline has been reached.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.wakeLocked()
	f.mu.Unlock()
}

// Set moves the fake time to t (forward or backward) and wakes due sleepers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.wakeLocked()
	f.mu.Unlock()
}

// Sleepers reports how many goroutines are blocked in Sleep.
func (f *Fake) Sleepers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// NextWake returns the earliest sleeper deadline, if any.
func (f *Fake) NextWake() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiters) == 0 {
		return time.Time{}, false
	}
	sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].until.Before(f.waiters[j].until) })
	return f.waiters[0].until, true
}

func (f *Fake) wakeLocked() {
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !f.now.Before(w.until) {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	f.waiters = kept
}

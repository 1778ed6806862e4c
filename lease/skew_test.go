package lease_test

import (
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
)

// TestClockSkew runs two reconcilers whose local wall clocks are an hour
// ahead and an hour behind. Instants are minted and judged on the store's
// clock, so neither takes over the other's live lease early, and neither's
// freshly minted lease looks expired to the other.
func TestClockSkew(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		ahead, behind := clock.Skewed{Offset: time.Hour}, clock.Skewed{Offset: -time.Hour}
		sa, sb := b.open(t, loc, ahead), b.open(t, loc, behind)
		a, bm := newManager(t, sa, ahead), newManager(t, sb, behind)

		// A (an hour ahead) mints; B (an hour behind) must find it held
		// until its instant, and take it right after.
		g := mustTake(t, a, "s1", 3*time.Second)
		if d := time.Until(g.AcquiredAt); d > 5*time.Second || d < -5*time.Second {
			t.Fatalf("acquired_at %v is %v off the store's clock: minted on the local wall clock?", g.AcquiredAt, d)
		}
		wantHeld(t, func() error { _, err := bm.TryTake(bg(t), "s1", time.Minute, "d"); return err }())
		attempts := pollUntilTaken(t, bm, "s1", 25*time.Millisecond, 15*time.Second)
		checkTakenAtInstantNotBefore(t, b, sb, attempts, g.ExpiresAt)

		// B (an hour behind) mints; A (an hour ahead) must find it held.
		g2 := mustTake(t, bm, "s2", 3*time.Second)
		if d := time.Until(g2.AcquiredAt); d > 5*time.Second || d < -5*time.Second {
			t.Fatalf("acquired_at %v is %v off the store's clock", g2.AcquiredAt, d)
		}
		wantHeld(t, func() error { _, err := a.TryTake(bg(t), "s2", time.Minute, "d"); return err }())
		if left, ok, err := bm.Remaining(bg(t), g2); err != nil || !ok || left > 3*time.Second || left < 0 {
			t.Fatalf("holder's remaining %v %v %v with its clock an hour behind", left, ok, err)
		}
		attempts = pollUntilTaken(t, a, "s2", 25*time.Millisecond, 15*time.Second)
		checkTakenAtInstantNotBefore(t, b, sa, attempts, g2.ExpiresAt)
	})
}

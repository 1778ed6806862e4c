package autonomy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

// TestHalfOpenAdmitsExactlyOneTrial: 16 reconcilers, each with its own store
// client and lease manager, find the breaker half-open at once; the gate
// tells every one of them it needs the trial lease, and exactly one gets it.
func TestHalfOpenAdmitsExactlyOneTrial(t *testing.T) {
	const racers = 16
	mem := objstore.NewMem(clock.Real{})
	backends := append([]backend{{
		name:        "mem",
		newLocation: func(testing.TB) string { return "" },
		open:        func(testing.TB, string) objstore.Store { return mem },
	}}, sharedBackends()...)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			loc := b.newLocation(t)
			// Open until an hour ago: half-open on any store clock here.
			until := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
			putControl(t, b.open(t, loc), fmt.Sprintf(`{"schema_version": 1, "emergency_paused": false, "reason": "",
				"changed_at": "2026-11-30T12:00:00Z", "changed_by": "alice",
				"breaker": {"consecutive_failures": 4, "open_until": %q, "cooldown_seconds": 900, "trips": 1, "last_error": "boom"}}`,
				until.Format(time.RFC3339)))
			pol := enforcing(t)

			stores := make([]objstore.Store, racers)
			managers := make([]*lease.Manager, racers)
			for i := range managers {
				stores[i] = b.open(t, loc)
				m, err := lease.NewManager(stores[i], lease.Config{Holder: breaker.TrialHolder, Owner: fmt.Sprintf("racer-%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				managers[i] = m
			}
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex
				granted []int
				errs    []error
			)
			for i := 0; i < racers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					err := func() error {
						ctl, err := Load(ctx, stores[i])
						if err != nil {
							return err
						}
						now, err := stores[i].Now(ctx)
						if err != nil {
							return err
						}
						d := Decide(pol, ctl, now)
						if !d.Allowed || !d.NeedsTrial || d.Phase != breaker.HalfOpen {
							return fmt.Errorf("racer %d: decision %+v, want allowed with a trial", i, d)
						}
						_, err = breaker.TryTakeTrial(ctx, managers[i], time.Minute, fmt.Sprintf("trial-%d", i))
						if errors.Is(err, lease.ErrHeld) {
							return nil
						}
						if err != nil {
							return err
						}
						mu.Lock()
						granted = append(granted, i)
						mu.Unlock()
						return nil
					}()
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatal(errors.Join(errs...))
			}
			if len(granted) != 1 {
				t.Fatalf("%d of %d racers were admitted to the trial (%v), want exactly 1", len(granted), racers, granted)
			}
		})
	}
}

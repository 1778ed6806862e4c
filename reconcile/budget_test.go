package reconcile

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBudgetNeverExceedsAndBlockedDoNotConsume(t *testing.T) {
	for _, tc := range []struct {
		max, workers, tries int
		spendEvery          int // every n-th reservation is spent, the rest given back
	}{
		{max: 0, workers: 4, tries: 10, spendEvery: 1},
		{max: 3, workers: 8, tries: 50, spendEvery: 1},
		{max: 3, workers: 8, tries: 50, spendEvery: 4},
		{max: 10, workers: 2, tries: 8, spendEvery: 2},
	} {
		b := newBudget(tc.max)
		var granted, refused, n atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < tc.workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < tc.tries; i++ {
					if !b.reserve() {
						refused.Add(1)
						continue
					}
					granted.Add(1)
					time.Sleep(time.Microsecond)
					if n.Add(1)%int64(tc.spendEvery) == 0 {
						b.spend()
					} else {
						b.giveBack()
					}
				}
			}()
		}
		wg.Wait()
		total := int64(tc.workers * tc.tries)
		if b.executed() > tc.max {
			t.Fatalf("%+v: %d executed, budget %d", tc, b.executed(), tc.max)
		}
		// Refusals only once the budget is truly spent.
		if refused.Load() > 0 && b.executed() != tc.max {
			t.Fatalf("%+v: %d refused although only %d of %d were spent", tc, refused.Load(), b.executed(), tc.max)
		}
		if granted.Load()+refused.Load() != total {
			t.Fatalf("%+v: %d granted + %d refused != %d", tc, granted.Load(), refused.Load(), total)
		}
	}
}

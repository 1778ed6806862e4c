package reconcile

import "sync"

// budget is the tick's action budget (max_actions_per_tick) shared by
// concurrent repairs. A repair reserves a slot before it takes its lease and
// either spends it (the repair executed) or gives it back (it ended blocked
// or recovered: those never consume the budget). A repair asking while every
// free slot is reserved waits for the reservations to resolve, so that an
// action_limit is only ever answered when the budget is truly spent.
type budget struct {
	mu       sync.Mutex
	cond     *sync.Cond
	max      int
	spent    int
	reserved int
}

func newBudget(max int) *budget {
	b := &budget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// reserve returns false when the budget is spent.
func (b *budget) reserve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.spent+b.reserved >= b.max {
		if b.spent >= b.max {
			return false
		}
		b.cond.Wait()
	}
	b.reserved++
	return true
}

// spend turns a reservation into an executed action.
func (b *budget) spend() {
	b.mu.Lock()
	b.reserved--
	b.spent++
	b.mu.Unlock()
	b.cond.Broadcast()
}

// giveBack returns a reservation unused.
func (b *budget) giveBack() {
	b.mu.Lock()
	b.reserved--
	b.mu.Unlock()
	b.cond.Broadcast()
}

// executed is how many actions were spent.
func (b *budget) executed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

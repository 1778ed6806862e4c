package lease_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
)

// The sequential specification the lease must linearize to, with terms long
// enough that no instant passes during the test: per subject, either free or
// held by one token.
type linOp int

const (
	opTryTake linOp = iota
	opRelease
	opRemaining
)

type linInput struct {
	op      linOp
	subject string
	token   string // release, remaining: the asking grant's token
}

type linOutput struct {
	taken  bool   // try-take
	token  string // try-take: the grant's token
	result lease.ReleaseResult
	some   bool // remaining answered a duration
	err    error
}

var leaseModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			s := op.Input.(linInput).subject
			if _, ok := by[s]; !ok {
				order = append(order, s)
			}
			by[s] = append(by[s], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, s := range order {
			out = append(out, by[s])
		}
		return out
	},
	Init: func() any { return "" }, // the holding token, "" when free
	Step: func(state, input, output any) (bool, any) {
		holder := state.(string)
		in, out := input.(linInput), output.(linOutput)
		if out.err != nil {
			return false, state
		}
		switch in.op {
		case opTryTake:
			if out.taken {
				return holder == "", out.token
			}
			return holder != "", holder
		case opRelease:
			switch out.result {
			case lease.Released:
				return holder == in.token, ""
			case lease.NotHeld:
				return holder != in.token, holder
			default:
				return false, holder // no term passes, nobody overwrites: never
			}
		case opRemaining:
			return out.some == (holder == in.token), holder
		}
		return false, state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case opTryTake:
			if out.taken {
				return fmt.Sprintf("try-take(%s) -> taken %.8s", in.subject, out.token)
			}
			return fmt.Sprintf("try-take(%s) -> held", in.subject)
		case opRelease:
			return fmt.Sprintf("release(%s, %.8s) -> %v", in.subject, in.token, out.result)
		default:
			return fmt.Sprintf("remaining(%s, %.8s) -> %v", in.subject, in.token, out.some)
		}
	},
}

// TestLinearizability records concurrent try-take, release and remaining
// operations from 16 goroutines over 4 subjects and has porcupine check the
// history against the model, on every backend.
func TestLinearizability(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		loc := b.newLocation(t)
		const workers = 16
		const opsPerWorker = 140 // 2,240 operations
		subjects := []string{"service:a:x.service", "service:a:y.service", "service:b:x.service", "service:b:y.service"}
		epoch := time.Now()
		var mu sync.Mutex
		var history []porcupine.Operation
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			m := newManager(t, b.open(t, loc, clock.Real{}), clock.Real{})
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var mine []*lease.Grant // grants this worker took, released or not
				// do runs one operation and records it in the history.
				do := func(in linInput, g *lease.Grant) bool {
					call := time.Since(epoch).Nanoseconds()
					var out linOutput
					switch in.op {
					case opTryTake:
						ng, err := m.TryTake(bg(t), in.subject, time.Hour, "lin")
						switch {
						case err == nil:
							out = linOutput{taken: true, token: ng.Token}
							mine = append(mine, ng)
						case lease.IsHeld(err):
						default:
							out.err = err
						}
					case opRelease:
						out.result, out.err = m.Release(bg(t), g)
					case opRemaining:
						_, out.some, out.err = m.Remaining(bg(t), g)
					}
					ret := time.Since(epoch).Nanoseconds()
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
					if out.err != nil {
						t.Errorf("worker %d: %v", w, out.err)
						return false
					}
					return true
				}
				for i := 0; i < opsPerWorker; i++ {
					var in linInput
					var g *lease.Grant
					switch r := rng.IntN(10); {
					case len(mine) == 0 || r < 4:
						in = linInput{op: opTryTake, subject: subjects[rng.IntN(len(subjects))]}
					case r < 8:
						g = mine[rng.IntN(len(mine))]
						in = linInput{op: opRelease, subject: g.SubjectID, token: g.Token}
					default:
						g = mine[rng.IntN(len(mine))]
						in = linInput{op: opRemaining, subject: g.SubjectID, token: g.Token}
					}
					if !do(in, g) {
						return
					}
				}
				// Leave nothing held; these releases are part of the history.
				for _, g := range mine {
					if !do(linInput{op: opRelease, subject: g.SubjectID, token: g.Token}, g) {
						return
					}
				}
			}(w)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if len(history) < 2000 {
			t.Fatalf("history of %d operations, want at least 2,000", len(history))
		}
		counts := map[string]int{}
		for _, op := range history {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			switch {
			case in.op == opTryTake && out.taken:
				counts["taken"]++
			case in.op == opTryTake:
				counts["held"]++
			case in.op == opRelease:
				counts[out.result.String()]++
			case out.some:
				counts["remaining-some"]++
			default:
				counts["remaining-none"]++
			}
		}
		res, info := porcupine.CheckOperationsVerbose(leaseModel, history, 2*time.Minute)
		if res != porcupine.Ok {
			path := t.TempDir() + "/history.html"
			_ = porcupine.VisualizePath(leaseModel, info, path)
			for _, part := range leaseModel.Partition(history) {
				if porcupine.CheckOperations(leaseModel, part) {
					continue
				}
				sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
				for _, op := range part {
					t.Logf("%d %d..%d %s", op.ClientId, op.Call, op.Return, leaseModel.DescribeOperation(op.Input, op.Output))
				}
				break
			}
			t.Fatalf("history of %d operations is %v (visualisation: %s); outcomes %v", len(history), res, path, counts)
		}
		t.Logf("%d operations linearizable; outcomes %v", len(history), counts)
		for _, k := range []string{"taken", "held", "released", "not-held", "remaining-some", "remaining-none"} {
			if counts[k] == 0 {
				t.Errorf("no %s outcome: the history does not exercise the model", k)
			}
		}
	})
}

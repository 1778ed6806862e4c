package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stado/stado/reconcile"
	"github.com/stado/stado/reports"
)

// Two, then eight `stado optimize run` processes started at once over 50
// broken services: every service is repaired exactly once (the repair
// command logs each run), the other reconcilers answer lease_blocked (or,
// arriving after the repair, find it recovered), and no report is lost.
func TestConcurrentReconcilersRepairEachServiceOnce(t *testing.T) {
	for _, backend := range []string{"fs", "s3"} {
		t.Run(backend, func(t *testing.T) {
			f := newFleet(t, backend)
			var svcs []service
			for i := 0; i < 50; i++ {
				svcs = append(svcs, f.newService(fmt.Sprintf("svc%02d", i), fmt.Sprintf("web-%d", i%5), fmt.Sprintf("svc%02d.service", i), false))
			}
			for _, s := range svcs {
				// Slow enough that the other reconcilers meet the lease.
				f.setMode(s.Unit, "slow:1500ms")
			}
			f.applyRegistry(svcs, "")
			f.applyPolicy(strings.Replace(enforcePolicy, "max_concurrent_mutations: 8", "max_concurrent_mutations: 32", 1))
			runsBefore := 0
			for round, procs := range []int{2, 8} {
				if round > 0 {
					for _, s := range svcs {
						f.kill(s.Unit)
					}
				}
				states := map[string]map[string]string{}
				for _, s := range svcs {
					if states[s.Host] == nil {
						states[s.Host] = map[string]string{}
					}
					states[s.Host][s.Unit] = "failed"
				}
				f.publish(states)
				logBefore := len(f.repairs())

				reps := runConcurrently(t, f, procs)

				runs := f.repairs()[logBefore:]
				perUnit := map[string]int{}
				for _, r := range runs {
					perUnit[r.Unit]++
				}
				for _, s := range svcs {
					if perUnit[s.Unit] != 1 {
						t.Errorf("%d reconcilers: %s repaired %d times, want exactly once", procs, s.Unit, perUnit[s.Unit])
					}
					if !up(s.Addr) {
						t.Errorf("%s is not up after the ticks", s.Unit)
					}
				}
				counts := map[string]int{}
				for _, rep := range reps {
					if rep.FailedCount() != 0 {
						t.Errorf("run %s had %d repair_failed", rep.RunID, rep.FailedCount())
					}
					perClass := map[string]int{}
					for _, o := range rep.Outcomes {
						counts[o.Classification]++
						perClass[o.Classification]++
						switch o.Classification {
						case reports.LeaseBlocked:
							if o.Detail != reconcile.DetailLeaseBlocked || o.Changed {
								t.Errorf("lease_blocked outcome %+v", o)
							}
						case reports.Recovered:
							if o.Detail != reconcile.DetailRecovered || o.Changed {
								t.Errorf("recovered outcome %+v", o)
							}
						case reports.Reconciled:
						default:
							t.Errorf("unexpected outcome %+v", o)
						}
					}
					if rep.BlockedCount() != perClass[reports.LeaseBlocked] {
						t.Errorf("run %s counts %d blocked, has %d lease_blocked", rep.RunID, rep.BlockedCount(), perClass[reports.LeaseBlocked])
					}
				}
				if counts[reports.Reconciled] != len(svcs) {
					t.Errorf("%d reconcilers: %d reconciled outcomes in all, want %d (one per service)", procs, counts[reports.Reconciled], len(svcs))
				}
				if counts[reports.LeaseBlocked] == 0 {
					t.Errorf("%d reconcilers never met each other's leases: the test proved nothing", procs)
				}
				t.Logf("%d reconcilers: outcomes %v", procs, counts)

				// No report lost: every run's report is stored.
				var hist []reports.HistoryEntry
				h := f.must("optimize", "history", "--json", "--limit", "1000")
				if err := json.Unmarshal([]byte(h.Stdout), &hist); err != nil {
					t.Fatal(err)
				}
				stored := map[string]bool{}
				for _, e := range hist {
					stored[e.RunID] = true
				}
				for _, rep := range reps {
					if !stored[rep.RunID] {
						t.Errorf("the report of run %s is not stored", rep.RunID)
					}
				}
				if len(hist) != runsBefore+procs {
					t.Errorf("%d run reports stored, want %d", len(hist), runsBefore+procs)
				}
				runsBefore += procs
			}
		})
	}
}

// runConcurrently starts n `stado optimize run --json` processes at once
// and returns their reports.
func runConcurrently(t *testing.T, f *fleet, n int) []*reports.Report {
	t.Helper()
	type result struct {
		out, errOut bytes.Buffer
		err         error
	}
	results := make([]*result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		r := &result{}
		results[i] = r
		cmd := f.stadoCmd("optimize", "run", "--json")
		cmd.Stdout, cmd.Stderr = &r.out, &r.errOut
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r.err = cmd.Run()
		}()
	}
	close(start)
	wg.Wait()
	var reps []*reports.Report
	for i, r := range results {
		if r.err != nil {
			t.Errorf("reconciler %d: %v\n%s", i, r.err, r.errOut.String())
			continue
		}
		var rep reports.Report
		if err := json.Unmarshal(r.out.Bytes(), &rep); err != nil {
			t.Fatalf("reconciler %d printed no report: %v\n%s", i, err, r.out.String())
		}
		reps = append(reps, &rep)
	}
	return reps
}

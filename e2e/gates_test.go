package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/reconcile"
	"github.com/stado/stado/reports"
)

// A lease written beforehand by another reconciler blocks the repair and
// shows in status; an expired one is taken over; a repair whose lease is
// overwritten while it runs ends repair_failed with the ownership-changed
// detail.
func TestLeasesBlockTakeOverAndChangeHands(t *testing.T) {
	for _, backend := range []string{"fs", "s3"} {
		t.Run(backend, func(t *testing.T) {
			f := newFleet(t, backend)
			api := f.newService("api", "web-1", "api.service", false)
			f.applyRegistry([]service{api}, "")
			f.applyPolicy(enforcePolicy)
			f.publish(map[string]map[string]string{"web-1": {"api.service": "failed"}})
			subject := "service:web-1:api.service"

			f.putLease(subject, "ctl-9/777/deadbeef", 3600)
			rep, res := f.run()
			o := outcome(t, rep, "api.service")
			if res.Code != 0 || o.Classification != reports.LeaseBlocked || o.Detail != "another reconciler owns this service mutation" {
				t.Fatalf("with a live foreign lease: exit %d, %+v", res.Code, o)
			}
			if n := len(f.repairs()); n != 0 {
				t.Fatalf("%d repairs ran under another reconciler's lease", n)
			}
			st := f.must("optimize", "status")
			if !strings.Contains(st.Stdout, subject) || !strings.Contains(st.Stdout, "ctl-9/777/deadbeef") || !strings.Contains(st.Stdout, "leases:   1 active") {
				t.Fatalf("status does not show the active lease:\n%s", st.Stdout)
			}

			f.putLease(subject, "ctl-9/777/deadbeef", -10)
			rep, res = f.run()
			if o := outcome(t, rep, "api.service"); res.Code != 0 || o.Classification != reports.Reconciled {
				t.Fatalf("with an expired foreign lease: exit %d, %+v", res.Code, o)
			}

			f.kill("api.service")
			f.setMode("api.service", "overwrite")
			f.setRepairCommand("api.service", f.exe, "e2e-put-lease", f.store, subject, "intruder/1/x", "3600")
			rep, res = f.run()
			o = outcome(t, rep, "api.service")
			if res.Code != 3 || o.Classification != reports.RepairFailed || o.Detail != reconcile.DetailOwnershipChanged {
				t.Fatalf("lease overwritten mid-repair: exit %d, %+v", res.Code, o)
			}
			// The intruder's lease was left alone.
			st = f.must("optimize", "status", "--json")
			if !strings.Contains(st.Stdout, `"owner": "intruder/1/x"`) {
				t.Fatalf("the new holder's lease is gone:\n%s", st.Stdout)
			}
			// And the breaker was fed a failure.
			if !strings.Contains(st.Stdout, `"consecutive_failures": 1`) {
				t.Fatalf("the ownership change did not feed the breaker:\n%s", st.Stdout)
			}
		})
	}
}

// A repair that would outlive its fence is killed, with its whole process
// group, before the lease's instant.
func TestRepairKilledAtFenceBeforeLeaseInstant(t *testing.T) {
	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", false)
	f.applyRegistry([]service{api}, "")
	f.applyPolicy(`policy_version: "fence"
mode: enforce-safe
decision_ttl_seconds: 12
evidence:
  verify_timeout_seconds: 5
  probe_timeout_seconds: 2
fence_allowance_seconds: 5
`)
	f.publish(map[string]map[string]string{"web-1": {"api.service": "failed"}})
	f.setMode("api.service", "hang")

	cmd := f.stadoCmd("optimize", "run", "--json")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Watch the hung repair die.
	var pid int
	for end := time.Now().Add(20 * time.Second); pid == 0; {
		if time.Now().After(end) {
			t.Fatal("the repair never started")
		}
		pid = f.pid("api.service")
		time.Sleep(20 * time.Millisecond)
	}
	var died time.Time
	for end := time.Now().Add(30 * time.Second); ; {
		if !alive(pid) {
			died = time.Now()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the repair %d outlived its fence by far", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := <-done
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("optimize run: %v, want exit 3", err)
	}
	runs := f.repairs()
	if len(runs) != 1 || runs[0].ExpiresAt.IsZero() || runs[0].Fence.IsZero() {
		t.Fatalf("repair log %+v", runs)
	}
	// The fs store's clock is this host's: compare directly.
	if !died.Before(runs[0].ExpiresAt) {
		t.Fatalf("the repair died at %v, not before the lease instant %v", died, runs[0].ExpiresAt)
	}
	if died.Before(runs[0].Fence.Add(-time.Second)) {
		t.Fatalf("the repair died at %v, well before its fence %v: killed for another reason?", died, runs[0].Fence)
	}
	rep := f.latest()
	o := outcome(t, rep, "api.service")
	if o.Classification != reports.RepairFailed || !strings.Contains(o.Detail, "fence deadline reached") {
		t.Fatalf("outcome %+v", o)
	}
}

// Pause set while a tick runs: the repairs not yet started end
// control_blocked with the exact detail.
func TestPauseDuringTickBlocksRemainingRepairs(t *testing.T) {
	for _, backend := range []string{"fs", "s3"} {
		t.Run(backend, func(t *testing.T) {
			f := newFleet(t, backend)
			a := f.newService("a", "web-1", "a.service", false)
			b := f.newService("b", "web-1", "b.service", false)
			c := f.newService("c", "web-1", "c.service", false)
			f.applyRegistry([]service{a, b, c}, "")
			f.applyPolicy(strings.Replace(enforcePolicy, "max_concurrent_mutations: 8", "max_concurrent_mutations: 1", 1))
			f.publish(map[string]map[string]string{"web-1": {"a.service": "failed", "b.service": "failed", "c.service": "failed"}})
			// a's repair (the first, in host/unit order) pauses autonomy.
			f.setMode("a.service", "pause")
			f.setRepairCommand("a.service", strings.Fields(stadoLine(f, "optimize", "pause", "maintenance-window", "--actor", "e2e"))...)
			rep, res := f.run()
			if res.Code != 0 {
				t.Fatalf("exit %d: %s", res.Code, res.Stderr)
			}
			if o := outcome(t, rep, "a.service"); o.Classification != reports.Reconciled {
				t.Fatalf("a: %+v", o)
			}
			for _, unit := range []string{"b.service", "c.service"} {
				o := outcome(t, rep, unit)
				if o.Classification != reports.ControlBlocked || o.Detail != "autonomy pause or circuit breaker became active" || o.Changed {
					t.Errorf("%s: %+v", unit, o)
				}
			}
			if n := len(f.repairs()); n != 1 {
				t.Fatalf("%d repairs ran, want only a's", n)
			}
			if rep.BlockedCount() != 2 || rep.FailedCount() != 0 {
				t.Fatalf("summary %v", rep.Summary)
			}
			// The next tick plans them under the pause.
			rep, _ = f.run()
			if o := outcome(t, rep, "b.service"); o.Classification != reports.Planned || o.Detail != "mutation blocked by autonomy emergency pause" {
				t.Fatalf("b under pause: %+v", o)
			}
		})
	}
}

// N failing repairs open the breaker; the next tick records the breaker
// detail; after the cooldown exactly one trial runs fleet-wide.
func TestBreakerOpensThenAdmitsOneTrial(t *testing.T) {
	for _, backend := range []string{"fs", "s3"} {
		t.Run(backend, func(t *testing.T) {
			f := newFleet(t, backend)
			var svcs []service
			for _, n := range []string{"a", "b", "c"} {
				s := f.newService(n, "web-1", n+".service", false)
				f.setMode(s.Unit, "fail")
				svcs = append(svcs, s)
			}
			f.applyRegistry(svcs, "")
			f.applyPolicy(`policy_version: "breaker"
mode: enforce-safe
decision_ttl_seconds: 60
max_concurrent_mutations: 1
circuit_breaker:
  failures: 2
  cooldown_seconds: 2
  max_cooldown_seconds: 60
evidence:
  verify_timeout_seconds: 5
  probe_timeout_seconds: 2
`)
			f.publish(map[string]map[string]string{"web-1": {"a.service": "failed", "b.service": "failed", "c.service": "failed"}})

			rep, res := f.run()
			if res.Code != 3 || rep.FailedCount() != 2 {
				t.Fatalf("first tick: exit %d, summary %v", res.Code, rep.Summary)
			}
			if o := outcome(t, rep, "c.service"); o.Classification != reports.ControlBlocked {
				t.Fatalf("c after the breaker opened mid-tick: %+v", o)
			}
			rep, res = f.run()
			if res.Code != 0 {
				t.Fatalf("second tick exit %d", res.Code)
			}
			for _, s := range svcs {
				o := outcome(t, rep, s.Unit)
				if o.Classification != reports.Planned || !strings.HasPrefix(o.Detail, "mutation blocked by open circuit breaker until ") {
					t.Fatalf("%s while open: %+v", s.Unit, o)
				}
				until := strings.TrimPrefix(o.Detail, "mutation blocked by open circuit breaker until ")
				if _, err := time.Parse(time.RFC3339, until); err != nil {
					t.Fatalf("%q is not RFC 3339: %v", until, err)
				}
			}
			if n := len(f.repairs()); n != 2 {
				t.Fatalf("%d repairs ran, want 2", n)
			}
			// After the cooldown (plus the store clock's uncertainty), a
			// trial: it fails, so the breaker re-opens and the rest wait.
			time.Sleep(4500 * time.Millisecond)
			rep, _ = f.run()
			if n := len(f.repairs()); n != 3 {
				t.Fatalf("after the cooldown %d repairs ran in all, want exactly one trial more", n)
			}
			if rep.FailedCount() != 1 || rep.Summary[reports.ControlBlocked] != 2 {
				t.Fatalf("trial tick summary %v", rep.Summary)
			}
			st := f.must("optimize", "status", "--json")
			if !strings.Contains(st.Stdout, `"state": "open"`) || !strings.Contains(st.Stdout, `"cooldown_seconds": 4`) || !strings.Contains(st.Stdout, `"trips": 2`) {
				t.Fatalf("after a failed trial the breaker must re-open with the cooldown doubled:\n%s", st.Stdout)
			}
		})
	}
}

// stadoLine is the command line that runs stado on the fleet's store.
func stadoLine(f *fleet, args ...string) string {
	return strings.Join(append([]string{clitestBinary(f), "--store", f.store, "--config", f.config}, args...), " ")
}

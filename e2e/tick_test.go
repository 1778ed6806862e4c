package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/clitest"
	"github.com/stado/stado/reports"
)

const enforcePolicy = `policy_version: "e2e-enforce"
mode: enforce-safe
decision_ttl_seconds: 60
max_actions_per_tick: 100
max_concurrent_mutations: 8
evidence:
  verify_timeout_seconds: 15
  probe_timeout_seconds: 2
fence_allowance_seconds: 5
`

const reportPolicy = `policy_version: "e2e-report"
mode: report
`

// A service killed: in report mode the tick plans its repair with the exact
// detail and runs nothing; in enforce-safe the next tick restarts it through
// the exec channel and verifies it.
func TestKilledServiceIsRepaired(t *testing.T) {
	for _, backend := range []string{"fs", "s3"} {
		t.Run(backend, func(t *testing.T) {
			f := newFleet(t, backend)
			api := f.newService("api", "web-1", "api.service", true)
			db := f.newService("db", "web-1", "db.service", true)
			f.applyRegistry([]service{api, db}, "")
			f.applyPolicy(reportPolicy)
			oldPid := f.pid("api.service")
			f.kill("api.service")
			f.publish(map[string]map[string]string{"web-1": {"api.service": "failed", "db.service": "active"}})

			rep, res := f.run()
			if res.Code != 0 {
				t.Fatalf("report-mode run exit %d: %s", res.Code, res.Stderr)
			}
			o := outcome(t, rep, "api.service")
			if o.Classification != reports.Planned || o.Detail != "report mode: restart was planned but not executed" || o.Changed {
				t.Fatalf("report mode outcome %+v", o)
			}
			if o.BeaconState != "failed" || o.EndpointState != "unreachable" {
				t.Fatalf("evidence %+v", o)
			}
			if d := outcome(t, rep, "db.service"); d.Classification != reports.Healthy {
				t.Fatalf("db: %+v", d)
			}
			if n := len(f.repairs()); n != 0 {
				t.Fatalf("report mode ran %d repairs", n)
			}

			f.applyPolicy(enforcePolicy)
			rep, res = f.run()
			if res.Code != 0 {
				t.Fatalf("enforce run exit %d: %s %s", res.Code, res.Stdout, res.Stderr)
			}
			o = outcome(t, rep, "api.service")
			if o.Classification != reports.Reconciled || !o.Changed || o.Action != "restart" || !strings.Contains(o.Detail, "answered") {
				t.Fatalf("enforce outcome %+v", o)
			}
			runs := f.repairs()
			if len(runs) != 1 || runs[0].Unit != "api.service" || runs[0].Token == "" {
				t.Fatalf("repair runs %+v, want exactly one of api.service with a lease token", runs)
			}
			if !up(api.Addr) || f.pid("api.service") == oldPid {
				t.Fatal("the service is not back in a new process")
			}
			if rep.Summary["services"] != 2 || rep.Summary[reports.Reconciled] != 1 || rep.Summary[reports.Healthy] != 1 {
				t.Fatalf("summary %v", rep.Summary)
			}
			// service list joins the declaration, the beacon and the last outcome.
			list := f.must("service", "list")
			if !strings.Contains(list.Stdout, "LAST OUTCOME") || !strings.Contains(list.Stdout, "reconciled") {
				t.Errorf("service list lacks the last outcome:\n%s", list.Stdout)
			}
			// status shows the run; the lease is gone.
			st := f.must("optimize", "status")
			for _, want := range []string{"mode:     enforce-safe", "leases:   none active", "1 reconciled", "api.service"} {
				if !strings.Contains(st.Stdout, want) {
					t.Errorf("status lacks %q:\n%s", want, st.Stdout)
				}
			}
		})
	}
}

// Stale, conflicting and unverifiable evidence never runs anything.
func TestEvidenceThatProvesNothingRunsNothing(t *testing.T) {
	f := newFleet(t, "fs")
	stale := f.newService("stale", "web-9", "stale.service", false)
	conflict := f.newService("conflict", "web-1", "conflict.service", true)
	slow := f.newService("slow", "web-1", "slow.service", false)
	// An endpoint that accepts connections and never answers: the probe
	// times out.
	hang := startHangingServer(t)
	slow.Addr = hang
	f.applyRegistry([]service{stale, conflict, slow}, "")
	f.applyPolicy(enforcePolicy + "\n" + `# beacons older than 10s are silence
` + "")
	f.applyPolicy(strings.Replace(enforcePolicy, "evidence:\n", "evidence:\n  beacon_silence_seconds: 10\n", 1))
	f.publish(map[string]map[string]string{"web-9": {"stale.service": "failed"}})
	time.Sleep(11 * time.Second)
	f.publish(map[string]map[string]string{"web-1": {"conflict.service": "failed", "slow.service": "failed"}})
	rep, res := f.run()
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	for unit, want := range map[string]string{"stale.service": reports.Unknown, "conflict.service": reports.EvidenceConflict, "slow.service": reports.EndpointUnverified} {
		o := outcome(t, rep, unit)
		if o.Classification != want || o.Changed {
			t.Errorf("%s: %+v, want %s", unit, o, want)
		}
	}
	if o := outcome(t, rep, "slow.service"); !strings.Contains(o.Detail, "timeout") {
		t.Errorf("slow.service detail %q should say the probe timed out", o.Detail)
	}
	if o := outcome(t, rep, "stale.service"); !strings.Contains(o.Detail, "stale") && !strings.Contains(o.Detail, "ago") {
		t.Errorf("stale.service detail %q should say the beacon is stale", o.Detail)
	}
	if n := len(f.repairs()); n != 0 {
		t.Fatalf("%d repairs ran on evidence that proves nothing", n)
	}
}

// A tick that cannot run exits 1 with one sentence saying what failed and
// what to do, and writes nothing.
func TestRunThatCannotRunExitsOne(t *testing.T) {
	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", true)
	f.applyRegistry([]service{api}, "")
	f.applyPolicy(enforcePolicy)
	// A registry broken behind stado's back.
	if err := os.WriteFile(filepath.Join(f.store, "state", "services", "registry.yaml"), []byte("services:\n  - name: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := f.stado("optimize", "run")
	if r.Code != 1 || !strings.Contains(r.Stderr, "registry") || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 3 {
		t.Fatalf("invalid registry: exit %d\n%s", r.Code, r.Stderr)
	}
	if runs, _ := filepath.Glob(filepath.Join(f.store, "state", "autonomy", "services", "runs", "*")); len(runs) != 0 {
		t.Fatalf("a tick that could not run wrote %v", runs)
	}
	// An unreachable store.
	r = clitest.Run(t, clitest.Cmd{Args: []string{"--store", "s3://nowhere/p?endpoint=http://127.0.0.1:1&path_style=true&region=us-east-1", "optimize", "run"},
		Env: []string{"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=y"}})
	if r.Code != 1 || !strings.Contains(r.Stderr, "store unavailable") {
		t.Fatalf("unreachable store: exit %d\n%s", r.Code, r.Stderr)
	}
}

// status --run shows an older run; an unknown run id is a clear error.
func TestStatusOfAnOlderRun(t *testing.T) {
	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", true)
	f.applyRegistry([]service{api}, "")
	f.publish(map[string]map[string]string{"web-1": {"api.service": "active"}})
	first, _ := f.run()
	f.publish(map[string]map[string]string{"web-1": {"api.service": "activating"}})
	f.run()
	r := f.must("optimize", "status", "--run", first.RunID, "--all")
	if !strings.Contains(r.Stdout, first.RunID) || !strings.Contains(r.Stdout, "healthy") {
		t.Fatalf("status --run %s:\n%s", first.RunID, r.Stdout)
	}
	r = f.stado("optimize", "status", "--run", "2020-01-01T00-00-00.000000000Z")
	if r.Code != 1 || !strings.Contains(r.Stderr, "optimize history") {
		t.Fatalf("unknown run: exit %d %s", r.Code, r.Stderr)
	}
}

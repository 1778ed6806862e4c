package reliability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// A fault kind: how the proxy breaks a request it matches. times is how
// many matching requests it breaks (0: every one, a store that stays
// broken).
type faultKind struct {
	name  string
	rules func(sel faultproxy.Rule, times int) []*faultproxy.Rule
	// inProcess: the tick runs in the test process with a 1 s S3 attempt
	// timeout (the binary's is 30 s, and has no flag).
	inProcess bool
}

func rule(sel faultproxy.Rule, times int, a faultproxy.Action, status int, code string, delay time.Duration) *faultproxy.Rule {
	r := sel
	r.Times, r.Action, r.Status, r.Code, r.Delay = times, a, status, code, delay
	return &r
}

var faultKinds = []faultKind{
	{name: "500", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.Status, 500, "", 0)}
	}},
	{name: "503-slowdown", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.Status, 503, "SlowDown", 0)}
	}},
	{name: "reset", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.Reset, 0, "", 0)}
	}},
	{name: "delay-past-timeout", inProcess: true, rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.Delay, 0, "", 2*time.Second)}
	}},
	{name: "commit-then-500", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.CommitThenStatus, 500, "", 0)}
	}},
	{name: "commit-then-503", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.CommitThenStatus, 503, "SlowDown", 0)}
	}},
	{name: "commit-then-reset", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		return []*faultproxy.Rule{rule(s, n, faultproxy.CommitThenReset, 0, "", 0)}
	}},
	// AWS S3 answers a retried conditional delete whose first attempt
	// committed with 404 (Versity Gateway answers 204): the delete committed,
	// its answer was lost, and the SDK's retry found the key gone.
	{name: "commit-then-503-retry-404", rules: func(s faultproxy.Rule, n int) []*faultproxy.Rule {
		// The 404 answers the retry of the very request that committed.
		var mu sync.Mutex
		committed := map[string]int{}
		first := rule(s, n, faultproxy.CommitThenStatus, 503, "SlowDown", 0)
		sel := s.Match
		first.Match = func(r *http.Request) bool {
			if sel != nil && !sel(r) {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			// Match runs before the proxy counts Times: count here.
			if committed[r.URL.Path] > 0 || (n > 0 && len(committed) >= n) {
				return false
			}
			committed[r.URL.Path] = 1
			return true
		}
		retry := rule(s, n, faultproxy.Status, 404, "NoSuchKey", 0)
		retry.Match = func(r *http.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			if committed[r.URL.Path] != 1 {
				return false
			}
			committed[r.URL.Path] = 2
			return true
		}
		return []*faultproxy.Rule{first, retry}
	}},
}

// A fault target: which requests a fault hits.
type faultTarget struct {
	name string
	sel  faultproxy.Rule
	// failing: make one service's repair fail, so the breaker (control.json)
	// is written.
	failing bool
}

func pathRule(method, path string) faultproxy.Rule {
	return faultproxy.Rule{Method: method, PathContains: path}
}

var faultTargets = []faultTarget{
	{name: "lease-put", sel: pathRule(http.MethodPut, "/state/autonomy/leases/")},
	{name: "lease-delete", sel: pathRule(http.MethodDelete, "/state/autonomy/leases/")},
	{name: "control-put", sel: pathRule(http.MethodPut, "/state/autonomy/control.json"), failing: true},
	{name: "run-report-put", sel: pathRule(http.MethodPut, "/state/autonomy/services/runs/")},
	{name: "latest-put", sel: pathRule(http.MethodPut, "/state/autonomy/services/latest.json")},
	{name: "beacon-get", sel: pathRule(http.MethodGet, "/state/beacons/")},
	{name: "control-get", sel: pathRule(http.MethodGet, "/state/autonomy/control.json"), failing: true},
	{name: "list", sel: faultproxy.Rule{Method: http.MethodGet, Match: func(r *http.Request) bool { return r.URL.Query().Has("list-type") }}},
}

// faultCases is the matrix to run: in CI every kind once or twice against a
// write it matters most for; in full every kind against every target, once
// transient (within the SDK's retries) and once persistent.
func faultCases() []faultCase {
	if full() {
		var out []faultCase
		for _, k := range faultKinds {
			for _, tg := range faultTargets {
				if k.name == "commit-then-503-retry-404" && tg.name != "lease-delete" {
					continue // an AWS answer to a retried delete only
				}
				for _, times := range []int{1, 2, 0} {
					if times == 0 && (strings.HasPrefix(k.name, "commit-then") || k.inProcess) {
						continue // a persistent fault is covered by its non-committing kind
					}
					out = append(out, faultCase{k, tg, times})
				}
			}
		}
		// The whole store flaky at once.
		for _, k := range faultKinds[:3] {
			out = append(out, faultCase{k, faultTarget{name: "any-20pct", sel: faultproxy.Rule{Probability: 0.2}}, 0})
		}
		return out
	}
	find := func(kind, target string, times int) faultCase {
		var fc faultCase
		for _, k := range faultKinds {
			if k.name == kind {
				fc.kind = k
			}
		}
		for _, tg := range faultTargets {
			if tg.name == target {
				fc.target = tg
			}
		}
		fc.times = times
		return fc
	}
	return []faultCase{
		find("500", "lease-put", 2),
		find("503-slowdown", "run-report-put", 2),
		find("503-slowdown", "beacon-get", 0),
		find("reset", "lease-delete", 1),
		find("delay-past-timeout", "lease-put", 1),
		find("commit-then-500", "control-put", 1),
		find("commit-then-503", "lease-put", 1),
		find("commit-then-reset", "latest-put", 1),
		find("commit-then-reset", "lease-delete", 1),
		find("commit-then-503-retry-404", "lease-delete", 1),
	}
}

type faultCase struct {
	kind   faultKind
	target faultTarget
	times  int
}

func (fc faultCase) String() string {
	n := "persistent"
	if fc.times > 0 {
		n = fmt.Sprintf("x%d", fc.times)
	}
	return fc.kind.name + "/" + fc.target.name + "/" + n
}

// TestStoreFaults: under every fault kind against the writes and reads of
// a tick, a tick through the fault proxy either completes with per-service
// errors recorded or exits 1 with one clear sentence; no repair runs
// without its lease held, no service is repaired twice, every report
// printed is stored intact, latest.json and control.json parse, and no
// lease outlives its TTL. A tick after the faults repairs what is left.
func TestStoreFaults(t *testing.T) {
	cases := faultCases()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, fc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(fc.String(), func(t *testing.T) { runFaultCase(t, fc) })
		}()
	}
	wg.Wait()
}

func runFaultCase(t *testing.T, fc faultCase) {
	f := newFleet(t, "s3")
	f.declare(6, 3)
	f.applyPolicy(reliabilityPolicy)
	for _, s := range f.svcs {
		f.setMode(s.Unit, "ok")
	}
	broken := []svc{f.svcs[0], f.svcs[1], f.svcs[4]}
	if fc.target.failing {
		f.setMode(f.svcs[1].Unit, "fail")
	}
	f.down(broken...)

	sel := fc.target.sel
	if sel.Probability > 0 {
		sel.Rand = lockedRand()
	}
	f.proxy.Add(fc.kind.rules(sel, fc.times)...)
	var res result
	var rep *reports.Report
	if fc.kind.inProcess {
		res, rep = f.tickInProcess(time.Second)
	} else {
		res, rep = f.tick()
	}
	injected := f.proxy.Injected()
	f.proxy.Clear()
	n := 0
	for _, v := range injected {
		n += v
	}
	figures.add("faults injected: "+fc.kind.name, n)
	figures.add("fault ticks", 1)
	t.Logf("%s: exit %d, injected %v", fc, res.Code, injected)
	if rep != nil {
		t.Logf("%s: summary %v", fc, rep.Summary)
		if os.Getenv("REL_DEBUG") != "" {
			t.Logf("%s", rep.Marshal())
		}
	}
	if n == 0 {
		t.Errorf("%s: no fault was injected: the case proved nothing", fc)
	}
	if msg := cleanStderr(fc.String(), res); msg != "" {
		t.Error(msg)
	}
	var printed []*reports.Report
	switch res.Code {
	case 0, 3:
		if rep == nil {
			t.Fatalf("%s: exit %d without a report:\n%s\n%s", fc, res.Code, res.Stdout, res.Stderr)
		}
		printed = append(printed, rep)
		for _, o := range rep.Outcomes {
			if o.Classification == reports.RepairFailed {
				t.Logf("%s: %s repair_failed: %s", fc, o.Unit, o.Detail)
			}
		}
	case 1:
		t.Logf("%s: exit 1: %s", fc, lastLine(res.Stderr))
	default:
		t.Errorf("%s: exit %d:\n%s", fc, res.Code, res.Stderr)
	}

	st := f.checkStore(fc.String(), leaseTTL)
	f.checkReportsStored(fc.String(), st, printed)
	runs := f.checkRepairLog(fc.String())
	// A repair that ran and brought its service back is reconciled: a lost
	// store answer must not turn it into a failure fed to the breaker.
	ranOK := map[string]bool{}
	for _, r := range runs {
		if r.Result == "ok" {
			ranOK[r.Unit] = true
		}
	}
	if rep != nil {
		for _, o := range rep.Outcomes {
			if ranOK[o.Unit] && o.Classification != reports.Reconciled {
				t.Errorf("%s: %s was repaired and came back, but the tick says %s: %s", fc, o.Unit, o.Classification, o.Detail)
				figures.add("false repair failures", 1)
			}
		}
	}
	if ctl, err := autonomy.Load(context.Background(), f.store); err != nil {
		t.Errorf("%s: load control: %v", fc, err)
	} else if got := ctl.Control.Breaker.ConsecutiveFailures; !fc.target.failing && got != 0 {
		t.Errorf("%s: the breaker counts %d failures; no repair failed", fc, got)
		figures.add("false repair failures", 1)
	}
	f.checkLeasesEnd(fc.String(), st)

	// The faults are gone: the next tick repairs what is left.
	for _, s := range f.svcs {
		f.setMode(s.Unit, "ok")
	}
	res2, rep2 := f.tick()
	if res2.Code != 0 || rep2 == nil {
		t.Fatalf("%s: the tick after the faults: exit %d\n%s\n%s", fc, res2.Code, res2.Stdout, res2.Stderr)
	}
	if down := f.allUp(); len(down) > 0 {
		t.Errorf("%s: still down after the tick that followed the faults: %v (report: %s)", fc, down, rep2.Marshal())
	}
	runs = f.checkRepairLog(fc.String() + " then clean")
	perUnit := map[string]int{}
	for _, r := range runs {
		if r.Result == "ok" {
			perUnit[r.Unit]++
		}
	}
	for _, s := range f.svcs {
		want := 0
		for _, b := range broken {
			if b == s {
				want = 1
			}
		}
		if perUnit[s.Unit] != want {
			t.Errorf("%s: %s repaired successfully %d times, want %d", fc, s.Unit, perUnit[s.Unit], want)
			if perUnit[s.Unit] > want {
				figures.add("double repairs", perUnit[s.Unit]-want)
			}
		}
	}
	st = f.checkStore(fc.String()+" then clean", leaseTTL)
	f.checkReportsStored(fc.String()+" then clean", st, []*reports.Report{rep2})
}

// tickInProcess runs one tick in the test process, against the store
// through the proxy with the given S3 attempt timeout, and answers as the
// binary would: exit 0, 3 or 1 and the report.
func (f *fleet) tickInProcess(timeout time.Duration) (result, *reports.Report) {
	f.t.Helper()
	ctx := context.Background()
	cfg, _, err := localconfig.Load(f.config, func(string) string { return "" })
	if err != nil {
		f.t.Fatal(err)
	}
	store, err := objstore.Open(ctx, f.storeURL, objstore.OpenOptions{S3: objstore.S3Options{Credentials: s3srv.Credentials(), Timeout: timeout}})
	if err != nil {
		f.t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	r, err := reconcile.New(reconcile.Config{Store: store, Owner: fmt.Sprintf("reliability/%d/%s", os.Getpid(), hex.EncodeToString(b[:])), Local: cfg})
	if err != nil {
		f.t.Fatal(err)
	}
	rep, err := r.Tick(ctx, reconcile.Options{})
	res := result{Args: []string{"in-process tick"}}
	switch {
	case err != nil:
		res.Code = 1
		res.Stderr = "stado: " + err.Error() + "\n"
		if errors.Is(err, reconcile.ErrCannotRun) {
			rep = nil
		}
		return res, nil
	case rep.FailedCount() > 0:
		res.Code = 3
	}
	res.Stdout = string(rep.Marshal())
	return res, rep
}

// lockedRand is a float source safe for the proxy's concurrent handlers.
func lockedRand() func() float64 {
	var mu sync.Mutex
	var b [8]byte
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		_, _ = rand.Read(b[:])
		u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48
		return float64(u) / math.Exp2(56)
	}
}

// TestOperatorCommandsUnderFaults: the operator's writes (policy apply,
// service apply, pause, resume, breaker reset, beacon publish) through a
// store that commits a write and loses its answer, or refuses every write.
// A write that landed is reported as done, never as a conflict with itself;
// a write that cannot be made fails with one clear sentence; what is stored
// always parses.
func TestOperatorCommandsUnderFaults(t *testing.T) {
	type opCase struct {
		name   string
		path   string
		args   func(f *fleet) []string
		check  func(f *fleet) string // "" when the stored state is what the command asked for
		kind   string
		times  int
		wantOK bool
	}
	policyV2 := strings.Replace(reliabilityPolicy, `"reliability"`, `"reliability-v2"`, 1)
	versionOf := func(f *fleet, key string) string {
		o, err := f.store.Get(context.Background(), key)
		if err != nil {
			return ""
		}
		return o.ETag
	}
	storedIs := func(key, want string) func(f *fleet) string {
		return func(f *fleet) string {
			o, err := f.store.Get(context.Background(), key)
			if err != nil || string(o.Body) != want {
				return fmt.Sprintf("%s is not the document applied (%v)", key, err)
			}
			return ""
		}
	}
	registryV2 := func(f *fleet) string {
		var b strings.Builder
		b.WriteString("services:\n")
		for _, s := range f.svcs {
			fmt.Fprintf(&b, "  - name: %s\n    host: %s\n    unit: %s\n    endpoint: %s\n    repair: restart\n    channel: exec\n", s.Name, s.Host, s.Unit, f.sim.endpoint(s.Unit))
		}
		b.WriteString("  - name: extra\n    host: h99\n    unit: extra.service\n    managed: false\n")
		return b.String()
	}
	paused := func(want bool) func(f *fleet) string {
		return func(f *fleet) string {
			o, err := f.store.Get(context.Background(), autonomy.Key)
			if err != nil {
				return "no control.json: " + err.Error()
			}
			c, err := autonomy.Parse(o.Body)
			if err != nil {
				return "control.json: " + err.Error()
			}
			if c.EmergencyPaused != want {
				return fmt.Sprintf("emergency_paused is %v, want %v", c.EmergencyPaused, want)
			}
			return ""
		}
	}
	var cases []opCase
	for _, k := range []struct {
		kind   string
		times  int
		wantOK bool
	}{{"commit-then-503", 1, true}, {"commit-then-reset", 1, true}, {"503-slowdown", 0, false}} {
		cases = append(cases,
			opCase{name: "policy-apply", path: "/state/autonomy/policy.yaml", kind: k.kind, times: k.times, wantOK: k.wantOK,
				args: func(f *fleet) []string {
					return []string{"optimize", "policy", "apply", "-f", f.write("policy-v2.yaml", policyV2), "--expect-version", versionOf(f, policy.Key)}
				},
				check: storedIs(policy.Key, policyV2)},
			opCase{name: "service-apply", path: "/state/services/registry.yaml", kind: k.kind, times: k.times, wantOK: k.wantOK,
				args: func(f *fleet) []string {
					return []string{"service", "apply", "-f", f.write("registry-v2.yaml", registryV2(f)), "--expect-version", versionOf(f, registry.Key)}
				},
				check: func(f *fleet) string { return storedIs(registry.Key, registryV2(f))(f) }},
			opCase{name: "pause", path: "/state/autonomy/control.json", kind: k.kind, times: k.times, wantOK: k.wantOK,
				args: func(*fleet) []string {
					return []string{"optimize", "pause", "fault drill", "--actor", "ops@reliability"}
				},
				check: paused(true)},
			opCase{name: "beacon-publish", path: "/state/beacons/", kind: k.kind, times: k.times, wantOK: k.wantOK,
				args: func(*fleet) []string {
					return []string{"beacon", "publish", "--host", "h00", "--state", "s0000.service=active"}
				},
				check: func(*fleet) string { return "" }},
		)
	}
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, oc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(oc.name+"/"+oc.kind, func(t *testing.T) {
				f := newFleet(t, "s3")
				f.declare(2, 1)
				f.applyPolicy(reliabilityPolicy)
				var k faultKind
				for _, fk := range faultKinds {
					if fk.name == oc.kind {
						k = fk
					}
				}
				f.proxy.Add(k.rules(pathRule(http.MethodPut, oc.path), oc.times)...)
				r := f.stado(oc.args(f)...)
				injected := f.proxy.Injected()
				f.proxy.Clear()
				for _, v := range injected {
					figures.add("faults injected: "+oc.kind, v)
				}
				if msg := cleanStderr(oc.name, r); msg != "" {
					t.Error(msg)
				}
				switch {
				case oc.wantOK && r.Code != 0:
					t.Errorf("%s under %s: exit %d, want 0: the write landed and only its answer was lost\n%s%s", oc.name, oc.kind, r.Code, r.Stdout, r.Stderr)
				case !oc.wantOK && r.Code != 1:
					t.Errorf("%s under %s: exit %d, want 1\n%s%s", oc.name, oc.kind, r.Code, r.Stdout, r.Stderr)
				}
				if oc.wantOK {
					if msg := oc.check(f); msg != "" {
						t.Errorf("%s under %s: %s", oc.name, oc.kind, msg)
					}
				}
				f.checkStore(oc.name, leaseTTL)
			})
		}()
	}
	wg.Wait()
}

package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/clitest"
	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reports"
)

// soakPolicy lets eight reconcilers meet each other's leases often.
const soakPolicy = `policy_version: "reliability-soak"
mode: enforce-safe
decision_ttl_seconds: 10
max_actions_per_tick: 100
max_concurrent_mutations: 8
circuit_breaker:
  failures: 1000
evidence:
  verify_timeout_seconds: 4
  probe_timeout_seconds: 2
  probe_concurrency: 64
  beacon_silence_seconds: 600
fence_allowance_seconds: 2
keep_runs: 300
`

// TestContentionSoak: eight reconciler processes tick every second over 500
// services on 50 hosts while services fail at random (the service goes
// down, its host's beacon says failed). Afterwards a checker over the repair
// log and the fleet proves that no service was ever repaired by two repairs
// at once, that every repair held its lease, that every injected failure
// was repaired exactly once, and that every stored report parses. CI soaks
// 20 s on the fs store; full soaks 2 minutes on fs, then 2 minutes on S3
// with 2% of the store's requests failing.
func TestContentionSoak(t *testing.T) {
	d := time.Duration(scale(20, 120)) * time.Second
	if s := os.Getenv("STADO_RELIABILITY_SOAK_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("STADO_RELIABILITY_SOAK_SECONDS=%q: %v", s, err)
		}
		d = time.Duration(n) * time.Second
	}
	t.Run("fs", func(t *testing.T) { soak(t, "fs", d, 0) })
	if full() || os.Getenv("STADO_RELIABILITY_SOAK_S3") != "" {
		t.Run("s3-flaky", func(t *testing.T) { soak(t, "s3", d, 0.02) })
	}
}

// serveAvailable reports whether the binary has `optimize serve`.
func serveAvailable(t testing.TB) bool {
	out, err := exec.Command(clitest.Binary(t), "optimize", "--help").CombinedOutput()
	return err == nil && bytes.Contains(out, []byte("\n  serve "))
}

type soakStats struct {
	mu         sync.Mutex
	ticks      int
	outcomes   map[string]int
	exits      map[int]int
	seen       map[string]bool
	corrupt    int
	injections map[string]int
}

func soak(t *testing.T, backend string, d time.Duration, flaky float64) {
	const services, hosts, reconcilers = 500, 50, 8
	f := newFleet(t, backend)
	f.declare(services, hosts)
	f.applyPolicy(soakPolicy)
	f.setModes(f.svcs, "ok")
	if flaky > 0 {
		f.proxy.Add(&faultproxy.Rule{Probability: flaky / 2, Rand: lockedRand(), Action: faultproxy.Status, Status: 503, Code: "SlowDown"},
			&faultproxy.Rule{Probability: flaky / 2, Rand: lockedRand(), Action: faultproxy.Reset})
	}
	// A few slow repairs, so reconcilers meet each other's leases.
	for i := 0; i < services; i += 25 {
		f.setMode(f.svcs[i].Unit, "slow:1500ms")
	}
	st := &soakStats{outcomes: map[string]int{}, exits: map[int]int{}, seen: map[string]bool{}, injections: map[string]int{}}
	useServe := serveAvailable(t) && os.Getenv("STADO_RELIABILITY_SOAK") != "run"
	t.Logf("soak: %d reconcilers (%s) over %d services on %d hosts for %v on %s, store fault rate %.0f%%", reconcilers,
		map[bool]string{true: "optimize serve --schedule '@every 1s'", false: "a loop of optimize run"}[useServe], services, hosts, d, backend, flaky*100)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The reconcilers.
	for i := 0; i < reconcilers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if useServe {
				serveUntil(t, f, stop, st)
			} else {
				runLoopUntil(t, f, stop, st)
			}
		}()
	}
	// The reports, read as they are written (retention keeps the last 300).
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stop:
				st.readReports(f)
				return
			case <-time.After(time.Second):
				st.readReports(f)
			}
		}
	}()
	// The hosts' agents: republish every beacon whose truth changed, and all
	// of them now and then.
	agentStop := make(chan struct{})
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		for n := 0; ; n++ {
			select {
			case <-agentStop:
				return
			case <-time.After(time.Second):
			}
			f.publishQuiet(f.hosts...)
		}
	}()
	// The failures.
	injectEvery := time.Duration(scale(150, 100)) * time.Millisecond
	end := time.Now().Add(d)
	injected := 0
	for time.Now().Before(end) {
		time.Sleep(injectEvery)
		s := f.svcs[rand.IntN(len(f.svcs))]
		if !f.sim.isUp(s.Unit) {
			continue
		}
		f.sim.set(s.Unit, false)
		f.publishQuiet(s.Host)
		st.mu.Lock()
		st.injections[s.Unit]++
		st.mu.Unlock()
		injected++
	}
	// Converge: no more failures; every one injected must be repaired.
	deadline := time.Now().Add(90 * time.Second)
	for len(f.allUp()) > 0 && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	down := f.allUp()
	close(agentStop)
	<-agentDone
	close(stop)
	wg.Wait()
	<-watchDone
	if f.proxy != nil {
		f.proxy.Clear()
	}

	starts := f.sim.startCounts()
	redundant := f.sim.redundantCounts()
	repairs := 0
	for _, n := range starts {
		repairs += n
	}
	if len(down) > 0 {
		t.Errorf("soak: %d injected failures never repaired: %v", len(down), down)
		figures.add("soak: injected failures never repaired", len(down))
	}
	for _, s := range f.svcs {
		if starts[s.Unit] != st.injections[s.Unit] {
			t.Errorf("soak: %s failed %d times and was started %d times", s.Unit, st.injections[s.Unit], starts[s.Unit])
		}
		if redundant[s.Unit] > 0 {
			t.Errorf("soak: %s was started %d times while it was up: repaired twice", s.Unit, redundant[s.Unit])
			figures.add("double repairs", redundant[s.Unit])
		}
	}
	runs := f.checkRepairLog("soak")
	stored := f.checkStore("soak", leaseTTL)
	f.checkLeasesEnd("soak", stored)
	if st.corrupt > 0 {
		t.Errorf("soak: %d stored reports did not parse", st.corrupt)
		figures.add("corrupt or lost objects", st.corrupt)
	}
	if st.outcomes[reports.LeaseBlocked]+st.outcomes[reports.Recovered] == 0 {
		t.Errorf("soak: the reconcilers never met each other's leases: the soak proved nothing")
	}
	for code, n := range st.exits {
		if code != 0 && code != 3 {
			t.Logf("soak: %d reconciler runs exited %d", n, code)
		}
	}
	label := "soak " + backend
	if flaky > 0 {
		label += fmt.Sprintf(" (%.0f%% store faults)", flaky*100)
	}
	t.Logf("%s: %d ticks, %d injected failures, %d repairs (%d repair command runs), outcomes %v, exits %v, store faults %v",
		label, st.ticks, injected, repairs, len(runs), st.outcomes, st.exits, injectedOf(f))
	figures.add(label+": reconcilers", reconcilers)
	figures.add(label+": services", services)
	figures.add(label+": seconds", int(d.Seconds()))
	figures.add(label+": ticks (run reports read)", st.ticks)
	figures.add(label+": injected failures", injected)
	figures.add(label+": repairs", repairs)
	figures.add(label+": repair commands run", len(runs))
	for c, n := range st.outcomes {
		figures.add(label+": outcome "+c, n)
	}
	if f.proxy != nil {
		for k, v := range f.proxy.Injected() {
			figures.add("faults injected: soak "+k, v)
		}
	}
}

func injectedOf(f *fleet) map[string]int {
	if f.proxy == nil {
		return nil
	}
	return f.proxy.Injected()
}

// serveUntil runs `optimize serve --schedule '@every 1s'` until stop, then
// stops it with SIGTERM: it must exit 0 within its fence.
func serveUntil(t *testing.T, f *fleet, stop <-chan struct{}, st *soakStats) {
	cmd := f.cmd("optimize", "serve", "--schedule", "@every 1s")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return
	}
	exited := make(chan result, 1)
	go func() { exited <- wait(cmd, &out, &errb) }()
	var r result
	select {
	case r = <-exited:
		t.Errorf("optimize serve exited early: %d\n%s", r.Code, r.Stderr)
	case <-stop:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case r = <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			r = <-exited
			t.Errorf("optimize serve did not stop within 30 s of SIGTERM")
		}
	}
	st.mu.Lock()
	st.exits[r.Code]++
	st.mu.Unlock()
	if msg := cleanStderr("optimize serve", r); msg != "" || r.Code != 0 {
		t.Errorf("optimize serve: exit %d %s\n%s", r.Code, msg, lastLines(r.Stderr, 20))
	}
}

// runLoopUntil runs `optimize run` every second until stop.
func runLoopUntil(t *testing.T, f *fleet, stop <-chan struct{}, st *soakStats) {
	for {
		next := time.Now().Add(time.Second)
		r := f.stado("optimize", "run")
		st.mu.Lock()
		st.exits[r.Code]++
		st.mu.Unlock()
		if msg := cleanStderr("optimize run", r); msg != "" {
			t.Error(msg)
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Until(next)):
		}
	}
}

// readReports reads the run reports not read yet and tallies their
// outcomes.
func (st *soakStats) readReports(f *fleet) {
	ctx := context.Background()
	ids, err := reports.RunIDs(ctx, f.store)
	if err != nil {
		f.t.Errorf("soak: list the run reports: %v", err)
		return
	}
	for _, id := range ids {
		st.mu.Lock()
		seen := st.seen[id]
		st.seen[id] = true
		st.mu.Unlock()
		if seen {
			continue
		}
		r, err := reports.Get(ctx, f.store, id)
		switch {
		case err != nil && errors.Is(err, objstore.ErrUnavailable):
			continue
		case err != nil:
			f.t.Errorf("soak: run report %s: %v", id, err)
			st.mu.Lock()
			st.corrupt++
			st.mu.Unlock()
			continue
		case r == nil:
			continue // retention got there first
		}
		st.mu.Lock()
		st.ticks++
		for c, n := range r.Summary {
			if c != "services" {
				st.outcomes[c] += n
			}
		}
		st.mu.Unlock()
	}
}

// publishQuiet publishes beacons, reporting failures without stopping the
// test (it runs in a goroutine).
func (f *fleet) publishQuiet(hosts ...string) {
	for _, h := range hosts {
		if err := f.publishHost(h); err != nil {
			f.t.Errorf("publish the beacon of %s: %v", h, err)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

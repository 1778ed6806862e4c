package reliability

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/reports"
)

// A crash point: where in a tick the reconciler is killed with SIGKILL.
type crashPoint struct {
	name string
	// prepare sets the units' repair modes and the proxy rules, and returns
	// the trigger: a channel that fires when the reconciler is at the point.
	prepare func(f *fleet, broken []svc) <-chan struct{}
}

// holdOnce returns a rule that holds the first request it matches for 20 s
// (the reconciler is killed meanwhile, so the request never reaches the
// server) and a channel that fires when that request arrives.
func holdOnce(method, path string) (*faultproxy.Rule, <-chan struct{}) {
	ch := make(chan struct{}, 1)
	return &faultproxy.Rule{Method: method, PathContains: path, Times: 1, Action: faultproxy.Delay, Delay: 20 * time.Second,
		Match: func(*http.Request) bool {
			select {
			case ch <- struct{}{}:
			default:
			}
			return true
		}}, ch
}

// poll fires the returned channel when cond becomes true (checked every
// 5 ms for 30 s).
func poll(cond func() bool) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if cond() {
				close(ch)
				return
			}
		}
	}()
	return ch
}

func (f *fleet) setModes(ss []svc, mode string) {
	for _, s := range ss {
		f.setMode(s.Unit, mode)
	}
}

var crashPoints = []crashPoint{
	{name: "random", prepare: func(f *fleet, _ []svc) <-chan struct{} {
		ch := make(chan struct{})
		time.AfterFunc(time.Duration(rand.IntN(700))*time.Millisecond, func() { close(ch) })
		return ch
	}},
	{name: "before-lease", prepare: func(f *fleet, _ []svc) <-chan struct{} {
		r, ch := holdOnce(http.MethodPut, "/state/autonomy/leases/")
		f.proxy.Add(r)
		return ch
	}},
	{name: "mid-repair", prepare: func(f *fleet, broken []svc) <-chan struct{} {
		// Half the time a repair that would outlive its lease: only the
		// fence stops it, and its reconciler is dead.
		f.setModes(broken, []string{"signal:3s", "signal:30s"}[rand.IntN(2)])
		return poll(func() bool {
			for _, s := range broken {
				if _, err := os.Stat(filepath.Join(f.dir, "units", s.Unit+".running")); err == nil {
					return true
				}
			}
			return false
		})
	}},
	{name: "after-repair-before-release", prepare: func(f *fleet, _ []svc) <-chan struct{} {
		before := countEnds(f)
		return poll(func() bool { return countEnds(f) > before })
	}},
	{name: "mid-release", prepare: func(f *fleet, _ []svc) <-chan struct{} {
		r, ch := holdOnce(http.MethodDelete, "/state/autonomy/leases/")
		f.proxy.Add(r)
		return ch
	}},
	{name: "mid-breaker-write", prepare: func(f *fleet, broken []svc) <-chan struct{} {
		f.setMode(broken[0].Unit, "fail")
		r, ch := holdOnce(http.MethodPut, "/state/autonomy/control.json")
		f.proxy.Add(r)
		return ch
	}},
	{name: "mid-run-report", prepare: func(f *fleet, _ []svc) <-chan struct{} {
		r, ch := holdOnce(http.MethodPut, "/state/autonomy/services/runs/")
		f.proxy.Add(r)
		return ch
	}},
	{name: "mid-latest-report", prepare: func(f *fleet, _ []svc) <-chan struct{} {
		r, ch := holdOnce(http.MethodPut, "/state/autonomy/services/latest.json")
		f.proxy.Add(r)
		return ch
	}},
}

func countEnds(f *fleet) int {
	b, _ := os.ReadFile(filepath.Join(f.dir, "repairs.log"))
	return bytes.Count(b, []byte("\nend ")) + map[bool]int{true: 1}[bytes.HasPrefix(b, []byte("end "))]
}

// TestCrashes kills `stado optimize run` with SIGKILL at random moments and
// at the worst ones (before the lease, mid-repair, after the repair but
// before the release, mid-release, mid-breaker write, mid-report), 20 times
// in CI and 120 in full. After each: every object in the store parses; a
// tick at once repairs nothing the dead reconciler's lease still covers; the
// first tick after the lease's TTL repairs what was left; no service is
// repaired twice within one TTL, nor by two repairs at once; no repair ran
// without its lease.
func TestCrashes(t *testing.T) {
	total := scale(20, 120)
	workers := scale(4, 6)
	var next, kills atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(fmt.Sprintf("worker-%d", w), func(t *testing.T) {
				f := newFleet(t, "s3")
				f.declare(6, 3)
				f.applyPolicy(reliabilityPolicy)
				for kills.Load() < int64(total) && !t.Failed() {
					i := int(next.Add(1)) - 1
					if crashOnce(t, f, i, crashPoints[i%len(crashPoints)]) {
						kills.Add(1)
					}
				}
			})
		}()
	}
	wg.Wait()
}

// crashOnce runs one tick, kills it at the crash point, and checks what it
// left; it reports whether the kill landed (the tick may end first).
func crashOnce(t *testing.T, f *fleet, i int, cp crashPoint) bool {
	what := fmt.Sprintf("crash %d (%s)", i, cp.name)
	f.setModes(f.svcs, "ok")
	for _, s := range f.svcs {
		_ = os.Remove(filepath.Join(f.dir, "units", s.Unit+".running"))
	}
	perm := rand.Perm(len(f.svcs))
	var broken []svc
	for _, j := range perm[:1+rand.IntN(3)] {
		broken = append(broken, f.svcs[j])
	}
	f.down(broken...)
	runsBefore, _ := f.repairLog()
	startsBefore := f.sim.startCounts()
	trigger := cp.prepare(f, broken)

	cmd := f.cmd("optimize", "run", "--json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan result, 1)
	go func() { exited <- wait(cmd, &out, &errb) }()
	var res result
	select {
	case <-trigger:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		res = <-exited
	case res = <-exited:
	case <-time.After(40 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		res = <-exited
		t.Errorf("%s: the point was never reached and the tick did not end", what)
	}
	killedAt := time.Now()
	f.proxy.Clear()
	if res.Killed {
		figures.add("crashes (SIGKILL): "+cp.name, 1)
		figures.add("crashes (SIGKILL)", 1)
	} else {
		figures.add("crash attempts where the tick ended first: "+cp.name, 1)
		if msg := cleanStderr(what, res); msg != "" {
			t.Error(msg)
		}
	}

	// The store is consistent as the dead reconciler left it.
	st := f.checkStore(what+" after the kill", leaseTTL)
	if !res.Killed {
		if rep := parseReport(res.Stdout); rep != nil {
			f.checkReportsStored(what, st, []*reports.Report{rep})
		}
	}
	f.setModes(f.svcs, "ok")

	// A tick at once: it may repair what no lease covers, nothing else.
	r1, rep1 := f.tick()
	if (r1.Code != 0 && r1.Code != 3) || rep1 == nil {
		t.Errorf("%s: the tick right after: exit %d\n%s", what, r1.Code, r1.Stderr)
	}
	// Wait out every lease the dead reconciler left, then tick again: it
	// repairs what was left.
	st = f.checkStore(what+" after the next tick", leaseTTL)
	f.checkLeasesEnd(what, st)
	r2, rep2 := f.tick()
	if r2.Code != 0 || rep2 == nil {
		t.Errorf("%s: the tick after the TTL: exit %d\n%s\n%s", what, r2.Code, r2.Stdout, r2.Stderr)
	}
	if down := f.allUp(); len(down) > 0 {
		t.Errorf("%s: still down after the tick that followed the TTL: %v", what, down)
	}
	st = f.checkStore(what+" at the end", leaseTTL)
	f.checkReportsStored(what, st, []*reports.Report{rep1, rep2})
	f.publish(f.hosts...)

	runs := f.checkRepairLog(what)
	runs = runs[len(runsBefore):]
	// A repair killed with its reconciler may have done its work before it
	// logged its end: count what the fleet saw, the starts.
	ok := map[string]int{}
	for u, n := range f.sim.startCounts() {
		ok[u] = n - startsBefore[u]
	}
	isBroken := map[string]bool{}
	for _, s := range broken {
		isBroken[s.Unit] = true
	}
	for _, s := range f.svcs {
		want := map[bool]int{true: 1}[isBroken[s.Unit]]
		if ok[s.Unit] != want {
			t.Errorf("%s: %s repaired successfully %d times, want %d", what, s.Unit, ok[s.Unit], want)
			if ok[s.Unit] > want {
				figures.add("double repairs", ok[s.Unit]-want)
			}
		}
	}
	// Within one TTL: a run of the dead reconciler that did not fail left
	// its lease behind, and no other run of that unit may start before the
	// lease's instant.
	for _, r := range runs {
		if !r.Start.Before(killedAt) || r.Result == "failed" {
			continue
		}
		for _, r2 := range runs {
			if r2.Unit == r.Unit && r2.Start.After(r.Start) && r2.Start.Before(r.ExpiresAt) {
				t.Errorf("%s: %s repaired again at %s, within the TTL of the killed reconciler's repair (lease until %s)",
					what, r.Unit, r2.Start.Format(time.RFC3339Nano), r.ExpiresAt.Format(time.RFC3339Nano))
				figures.add("double repairs", 1)
			}
		}
	}
	if testing.Verbose() {
		t.Logf("%s: killed=%v, broken %v, runs %d, tick after: %v, after TTL: %v", what, res.Killed, units(broken), len(runs),
			summaryOf(rep1), summaryOf(rep2))
	}
	return res.Killed
}

func units(ss []svc) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Unit)
	}
	return strings.Join(out, ",")
}

func summaryOf(r *reports.Report) map[string]int {
	if r == nil {
		return nil
	}
	return r.Summary
}

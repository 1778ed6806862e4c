package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/reports"
)

// serveProcess runs `stado optimize serve` for a test.
type serveProcess struct {
	t      *testing.T
	f      *fleet
	addr   string
	done   chan error
	stderr *strings.Builder
	pid    int
}

func (f *fleet) serve(schedule string) *serveProcess {
	f.t.Helper()
	addr := freeAddr(f.t)
	cmd := f.stadoCmd("-v", "optimize", "serve", "--schedule", schedule, "--listen", addr)
	sp := &serveProcess{t: f.t, f: f, addr: addr, done: make(chan error, 1), stderr: &strings.Builder{}}
	cmd.Stderr = sp.stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	sp.pid = cmd.Process.Pid
	go func() { sp.done <- cmd.Wait() }()
	f.t.Cleanup(func() { _ = syscall.Kill(sp.pid, syscall.SIGKILL) })
	for end := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return sp
		}
		if time.Now().After(end) {
			f.t.Fatalf("serve did not listen on %s:\n%s", addr, sp.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (sp *serveProcess) stop() {
	sp.t.Helper()
	if err := syscall.Kill(sp.pid, syscall.SIGTERM); err != nil {
		sp.t.Fatal(err)
	}
	select {
	case err := <-sp.done:
		if err != nil {
			sp.t.Fatalf("serve exited with %v after SIGTERM, want 0:\n%s", err, sp.stderr)
		}
	case <-time.After(90 * time.Second):
		sp.t.Fatalf("serve did not exit after SIGTERM:\n%s", sp.stderr)
	}
}

// metrics scrapes /metrics and returns each sample's value by its line's
// name and labels.
func (sp *serveProcess) metrics() map[string]float64 {
	sp.t.Helper()
	resp, err := http.Get("http://" + sp.addr + "/metrics")
	if err != nil {
		sp.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		sp.t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$`)
	for sc.Scan() {
		if m := sample.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = v
		}
	}
	return out
}

// sum adds every sample of a metric whose labels contain match.
func sum(ms map[string]float64, name, match string) float64 {
	var n float64
	for k, v := range ms {
		if (k == name || strings.HasPrefix(k, name+"{")) && strings.Contains(k, match) {
			n += v
		}
	}
	return n
}

// `serve --schedule '@every 1s'` for 10 seconds over a repair that takes 3
// seconds: no two ticks overlap, the skipped ones are counted in /metrics,
// and the tick and outcome counters a real HTTP client scrapes match the
// reports written.
func TestServeNeverOverlapsTicksAndCountsSkipped(t *testing.T) {
	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", false)
	db := f.newService("db", "web-1", "db.service", true)
	f.applyRegistry([]service{api, db}, "")
	f.applyPolicy(enforcePolicy)
	f.publish(map[string]map[string]string{"web-1": {"api.service": "failed", "db.service": "active"}})
	f.setMode("api.service", "slow:3s")

	sp := f.serve("@every 1s")
	time.Sleep(10 * time.Second)
	h, err := http.Get("http://" + sp.addr + "/healthz")
	if err != nil || h.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", h, err)
	}
	h.Body.Close()
	ms := sp.metrics()
	sp.stop()

	var hist []reports.HistoryEntry
	if err := json.Unmarshal([]byte(f.must("optimize", "history", "--json", "--limit", "1000").Stdout), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) < 3 {
		t.Fatalf("only %d ticks in 10s", len(hist))
	}
	for i := 1; i < len(hist); i++ { // newest first
		newer, older := hist[i-1], hist[i]
		if newer.CreatedAt.Before(older.FinishedAt) {
			t.Errorf("tick %s started at %v, before tick %s finished at %v", newer.RunID, newer.CreatedAt, older.RunID, older.FinishedAt)
		}
	}
	if n := len(f.repairs()); n != 1 {
		t.Errorf("%d repairs, want 1", n)
	}
	skipped := sum(ms, "stado_ticks_skipped_total", "")
	if skipped < 2 {
		t.Errorf("%v ticks skipped while a 3-second repair ran under a 1-second schedule; want at least 2\n%v", skipped, ms)
	}
	// The counters scraped before the stop match the reports written by
	// then (the scrape may be one tick behind the final history).
	ticks := sum(ms, "stado_ticks_total", "")
	if ticks < float64(len(hist)-1) || ticks > float64(len(hist)) {
		t.Errorf("stado_ticks_total %v, but %d reports were written", ticks, len(hist))
	}
	perClass := map[string]int{}
	for _, e := range hist[len(hist)-int(ticks):] {
		for c, n := range e.Summary {
			if c != "services" {
				perClass[c] += n
			}
		}
	}
	for c, n := range perClass {
		if got := sum(ms, "stado_outcomes_total", fmt.Sprintf(`classification="%s"`, c)); got != float64(n) {
			t.Errorf("stado_outcomes_total{classification=%q} = %v, the reports say %d", c, got, n)
		}
	}
	if sum(ms, "stado_repair_duration_seconds_count", "") != 1 {
		t.Errorf("repair duration histogram: %v", ms)
	}
}

// SIGTERM in the middle of a repair: the repair finishes, the lease object
// is gone, the report is written, and serve exits 0.
func TestServeSIGTERMMidRepairFinishesAndReleases(t *testing.T) {
	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", false)
	other := f.newService("other", "web-2", "other.service", false)
	f.applyRegistry([]service{api, other}, "")
	f.applyPolicy(strings.Replace(enforcePolicy, "max_concurrent_mutations: 8", "max_concurrent_mutations: 1", 1))
	f.publish(map[string]map[string]string{"web-1": {"api.service": "failed"}, "web-2": {"other.service": "failed"}})
	f.setMode("api.service", "slow:3s")

	sp := f.serve("@every 1h")
	for end := time.Now().Add(20 * time.Second); len(f.repairs()) == 0; {
		if time.Now().After(end) {
			t.Fatalf("the repair never started:\n%s", sp.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sp.stop()
	if !up(api.Addr) {
		t.Fatal("the repair did not finish: the service is down")
	}
	leases, _ := filepath.Glob(filepath.Join(f.store, "state", "autonomy", "leases", "*.json"))
	if len(leases) != 0 {
		t.Fatalf("lease objects left behind: %v", leases)
	}
	rep := f.latest()
	if o := outcome(t, rep, "api.service"); o.Classification != reports.Reconciled {
		t.Fatalf("the interrupted tick's report: %+v", o)
	}
	if o := outcome(t, rep, "other.service"); o.Classification != reports.ControlBlocked || !strings.Contains(o.Detail, "shutting down") {
		t.Fatalf("the repair not yet started when SIGTERM came: %+v", o)
	}
	if n := len(f.repairs()); n != 1 {
		t.Fatalf("%d repairs ran; only the one in flight may", n)
	}
}

// /healthz is healthy while the last tick started within three intervals,
// and unhealthy when a tick has been running longer than that.
func TestServeHealthz(t *testing.T) {
	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", false)
	f.applyRegistry([]service{api}, "")
	f.applyPolicy(enforcePolicy)
	f.publish(map[string]map[string]string{"web-1": {"api.service": "failed"}})
	f.setMode("api.service", "slow:6s")
	sp := f.serve("@every 1s")
	get := func() (int, string) {
		resp, err := http.Get("http://" + sp.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 200 {
		t.Fatalf("at start: %d %s", code, body)
	}
	// The first tick is stuck in a 6-second repair: after three 1-second
	// intervals, nothing has started since.
	var code int
	var body string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if code, body = get(); code == http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "three intervals") {
		t.Fatalf("while a tick ran past three intervals: %d %q", code, body)
	}
	sp.stop()
}

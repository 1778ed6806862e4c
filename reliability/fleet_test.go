package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/clitest"
	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// simFleet simulates the services of a fleet in the test process, on one
// listener: GET /svc/UNIT/healthz answers 200 while the unit is up and 503
// (which a probe reads as unreachable: absence proven) while it is down;
// POST /ctl/start?unit=UNIT brings a unit up (the repair command calls it).
// Hundreds of services cost nothing, and a unit's state is exact.
type simFleet struct {
	URL string
	srv *http.Server

	mu     sync.Mutex
	up     map[string]bool
	starts map[string]int
	// redundant counts starts of a unit that was up: a repair that should
	// not have run.
	redundant map[string]int
}

func startSim(t testing.TB) *simFleet {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &simFleet{URL: "http://" + ln.Addr().String(), up: map[string]bool{}, starts: map[string]int{}, redundant: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /svc/{unit}/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.isUp(r.PathValue("unit")) {
			fmt.Fprintln(w, "ok")
			return
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("POST /ctl/start", func(w http.ResponseWriter, r *http.Request) {
		u := r.URL.Query().Get("unit")
		s.mu.Lock()
		if s.up[u] {
			s.redundant[u]++
		}
		s.up[u] = true
		s.starts[u]++
		s.mu.Unlock()
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *simFleet) set(unit string, up bool) {
	s.mu.Lock()
	s.up[unit] = up
	s.mu.Unlock()
}

func (s *simFleet) isUp(unit string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up[unit]
}

func (s *simFleet) redundantCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.redundant))
	for k, v := range s.redundant {
		out[k] = v
	}
	return out
}

// startCounts returns how many times each unit has been started.
func (s *simFleet) startCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.starts))
	for k, v := range s.starts {
		out[k] = v
	}
	return out
}

func (s *simFleet) endpoint(unit string) string { return s.URL + "/svc/" + unit + "/healthz" }

// svc is one declared service.
type svc struct{ Name, Host, Unit string }

// fleet is one fleet under test: a store (a directory, or a bucket of the
// S3 server, reached by stado through a fault proxy), a local config whose
// exec channel runs this binary's repair role, and the simulated services.
type fleet struct {
	t         testing.TB
	dir       string
	config    string
	exe       string
	sim       *simFleet
	backend   string
	storeURL  string // as stado reaches it
	directURL string // as checks reach it: never through the proxy
	env       []string
	proxy     *faultproxy.Proxy
	store     objstore.Store // direct
	svcs      []svc
	hosts     []string
}

func newFleet(t testing.TB, backend string) *fleet {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, dir: dir, exe: exe, backend: backend, sim: startSim(t), config: filepath.Join(dir, "config.yaml")}
	ctx := context.Background()
	opts := objstore.OpenOptions{}
	switch backend {
	case "fs":
		f.storeURL = filepath.Join(dir, "store")
		f.directURL = f.storeURL
	case "s3":
		bucket := s3srv.Bucket(t)
		p, err := faultproxy.Start(s3srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		f.proxy = p
		f.directURL = s3srv.URL(bucket, "fleet")
		f.storeURL = strings.Replace(f.directURL, "endpoint="+s3srv.Endpoint, "endpoint="+p.URL, 1)
		f.env = s3srv.Env()
		opts.S3.Credentials = s3srv.Credentials()
		f.write("store.creds", s3srv.AccessKey+"\n"+s3srv.SecretKey)
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	f.store, err = objstore.Open(ctx, f.directURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.write("store.url", f.directURL)
	f.write("ctl.url", f.sim.URL)
	if err := os.MkdirAll(filepath.Join(dir, "units"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.write("config.yaml", fmt.Sprintf(`channels:
  exec:
    actions:
      restart: [%q, "rel-repair", %q, "{host}", "{unit}"]
      check: [%q, "rel-check", %q, "{host}", "{unit}"]
`, exe, dir, exe, dir))
	return f
}

func (f *fleet) write(name, content string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fleet) setMode(unit, mode string) { f.write(filepath.Join("units", unit+".mode"), mode) }

// declare declares n services spread over hosts hosts, all up, and applies
// the registry.
func (f *fleet) declare(n, hosts int) {
	f.t.Helper()
	f.svcs = nil
	f.hosts = nil
	for h := 0; h < hosts; h++ {
		f.hosts = append(f.hosts, fmt.Sprintf("h%02d", h))
	}
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; i < n; i++ {
		s := svc{Name: fmt.Sprintf("s%04d", i), Host: f.hosts[i%hosts], Unit: fmt.Sprintf("s%04d.service", i)}
		f.svcs = append(f.svcs, s)
		f.sim.set(s.Unit, true)
		fmt.Fprintf(&b, "  - name: %s\n    host: %s\n    unit: %s\n    endpoint: %s\n    repair: restart\n    channel: exec\n",
			s.Name, s.Host, s.Unit, f.sim.endpoint(s.Unit))
	}
	ctx := context.Background()
	cur, err := registry.Fetch(ctx, f.store)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, _, err := registry.Apply(ctx, f.store, []byte(b.String()), cur.Version); err != nil {
		f.t.Fatalf("apply the registry: %v", err)
	}
	f.publish(f.hosts...)
}

// reliabilityPolicy is the policy of most tests: enforce, the shortest
// lease the policy allows (10 s, so that waiting out a lease is cheap), and
// a breaker that does not open on the failures the tests cause on purpose.
const reliabilityPolicy = `policy_version: "reliability"
mode: enforce-safe
decision_ttl_seconds: 10
max_actions_per_tick: 1000
max_concurrent_mutations: 4
circuit_breaker:
  failures: 1000
evidence:
  verify_timeout_seconds: 4
  probe_timeout_seconds: 2
  beacon_silence_seconds: 600
fence_allowance_seconds: 2
`

const leaseTTL = 10 * time.Second

func (f *fleet) applyPolicy(doc string) {
	f.t.Helper()
	ctx := context.Background()
	cur, err := policy.Load(ctx, f.store)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := policy.Apply(ctx, f.store, []byte(doc), cur.Version); err != nil && !errors.Is(err, policy.ErrNoChange) {
		f.t.Fatalf("apply the policy: %v", err)
	}
}

// publish publishes the beacons of hosts from the true unit states, as each
// host's agent would.
func (f *fleet) publish(hosts ...string) {
	f.t.Helper()
	for _, h := range hosts {
		if err := f.publishHost(h); err != nil {
			f.t.Fatalf("publish the beacon of %s: %v", h, err)
		}
	}
}

func (f *fleet) publishHost(h string) error {
	var units []beacon.Unit
	for _, s := range f.svcs {
		if s.Host != h {
			continue
		}
		st := beacon.Active
		if !f.sim.isUp(s.Unit) {
			st = beacon.Failed
		}
		units = append(units, beacon.Unit{Unit: s.Unit, ActiveState: st})
	}
	_, err := beacon.Publish(context.Background(), f.store, h, units)
	return err
}

// down takes services down and republishes their hosts' beacons.
func (f *fleet) down(ss ...svc) {
	f.t.Helper()
	hosts := map[string]bool{}
	for _, s := range ss {
		f.sim.set(s.Unit, false)
		hosts[s.Host] = true
	}
	for h := range hosts {
		f.publish(h)
	}
}

func (f *fleet) allUp() []string {
	var down []string
	for _, s := range f.svcs {
		if !f.sim.isUp(s.Unit) {
			down = append(down, s.Unit)
		}
	}
	return down
}

// cmd builds a stado process against the fleet (through the proxy, if any).
func (f *fleet) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(clitest.Binary(f.t), append([]string{"--store", f.storeURL, "--config", f.config}, args...)...)
	cmd.Env = append(clitest.BaseEnv(f.t), f.env...)
	return cmd
}

// result is one finished stado process.
type result struct {
	Args   []string
	Code   int
	Stdout string
	Stderr string
	Killed bool
}

func wait(cmd *exec.Cmd, out, errb *bytes.Buffer) result {
	err := cmd.Wait()
	r := result{Args: cmd.Args[1:], Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Killed = true
		}
	case err != nil:
		r.Code = -1
		r.Stderr += "\n(wait: " + err.Error() + ")"
	}
	return r
}

// stado runs stado to completion (at most 2 minutes).
func (f *fleet) stado(args ...string) result {
	f.t.Helper()
	cmd := f.cmd(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	return wait(cmd, &out, &errb)
}

// tick runs `optimize run --json` and returns the result and the report
// it printed (nil if none).
func (f *fleet) tick() (result, *reports.Report) {
	f.t.Helper()
	r := f.stado("optimize", "run", "--json")
	return r, parseReport(r.Stdout)
}

func parseReport(stdout string) *reports.Report {
	var rep reports.Report
	if json.Unmarshal([]byte(stdout), &rep) != nil || rep.RunID == "" {
		return nil
	}
	return &rep
}

// repairRun is one run of the repair command, from the repair log.
type repairRun struct {
	Host, Unit, Token string
	Start, End        time.Time // End is zero when the run never logged its end
	ExpiresAt         time.Time
	Result            string
	Pid               int
	// Running: the run never logged its end and its process is still
	// alive.
	Running bool
}

// stop is the latest instant the run can have been running: its end, or,
// when it never logged one (killed), its lease's instant, which the fence
// must not let it pass.
func (r repairRun) stop() time.Time {
	switch {
	case !r.End.IsZero():
		return r.End
	case r.Running:
		return time.Now()
	}
	return r.ExpiresAt
}

// alive reports whether pid is a live process (a zombie is dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// repairLog reads DIR/repairs.log: the runs and the violations repairs saw.
func (f *fleet) repairLog() ([]repairRun, []string) {
	f.t.Helper()
	return readRepairLog(f.t, filepath.Join(f.dir, "repairs.log"))
}

func readRepairLog(t testing.TB, path string) ([]repairRun, []string) {
	t.Helper()
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var runs []repairRun
	var violations []string
	open := map[string]int{} // token -> index in runs
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		if len(p) < 5 {
			t.Fatalf("malformed repair log line %q", sc.Text())
		}
		ns, _ := strconv.ParseInt(p[1], 10, 64)
		at := time.Unix(0, ns)
		switch p[0] {
		case "start":
			exp, _ := time.Parse(time.RFC3339Nano, p[5])
			pid, _ := strconv.Atoi(p[6])
			runs = append(runs, repairRun{Host: p[2], Unit: p[3], Token: p[4], Start: at, ExpiresAt: exp, Pid: pid})
			open[p[4]] = len(runs) - 1
		case "end":
			if i, ok := open[p[4]]; ok {
				runs[i].End, runs[i].Result = at, p[5]
			} else {
				violations = append(violations, "end without start: "+sc.Text())
			}
		case "violation":
			violations = append(violations, sc.Text())
		default:
			t.Fatalf("malformed repair log line %q", sc.Text())
		}
	}
	for i := range runs {
		if runs[i].End.IsZero() && runs[i].Pid > 0 && alive(runs[i].Pid) {
			runs[i].Running = true
		}
	}
	return runs, violations
}

// overlaps returns, per unit, every pair of repair runs whose running
// intervals overlap: two repairs of one service at once.
func overlaps(runs []repairRun) []string {
	by := map[string][]repairRun{}
	for _, r := range runs {
		by[r.Host+"/"+r.Unit] = append(by[r.Host+"/"+r.Unit], r)
	}
	var out []string
	for k, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		for i := 1; i < len(rs); i++ {
			for j := 0; j < i; j++ {
				if rs[i].Start.Before(rs[j].stop()) {
					out = append(out, fmt.Sprintf("%s: repair %s started at %s while repair %s (started %s) was running until %s",
						k, rs[i].Token, rs[i].Start.Format(time.RFC3339Nano), rs[j].Token, rs[j].Start.Format(time.RFC3339Nano), rs[j].stop().Format(time.RFC3339Nano)))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkRepairLog fails the test on any violation a repair saw (no lease, a
// lease not its own, an expired lease, store credentials in its
// environment) and on any two repairs of one service at once, and returns
// the runs.
func (f *fleet) checkRepairLog(what string) []repairRun {
	f.t.Helper()
	runs, violations := f.repairLog()
	for _, v := range violations {
		f.t.Errorf("%s: violation: %s", what, v)
	}
	figures.add("violations (repair without a held lease, env leak)", len(violations))
	ov := overlaps(runs)
	for _, o := range ov {
		f.t.Errorf("%s: double repair: %s", what, o)
	}
	figures.add("double repairs", len(ov))
	return runs
}

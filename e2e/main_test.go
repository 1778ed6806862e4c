// Package e2e runs stado end to end, as operators and cron do: the built
// binary against a real store (a directory, and a real S3 server), small
// HTTP services that are really started and killed, and repair commands
// that are really run. The test binary doubles as those services and repair
// commands: TestMain dispatches on its first argument.
package e2e

import (
	"bufio"
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
	"github.com/stado/stado/internal/s3test"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reports"
)

var s3srv *s3test.Server

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "e2e-service":
			os.Exit(serviceMain(os.Args[2]))
		case "e2e-repair":
			os.Exit(repairMain(os.Args[2], os.Args[3], os.Args[4]))
		case "e2e-check":
			os.Exit(checkMain(os.Args[2], os.Args[4]))
		case "e2e-put-lease":
			os.Exit(putLeaseMain(os.Args[2], os.Args[3], os.Args[4], os.Args[5]))
		}
	}
	os.Exit(s3test.RunTests(m, &s3srv))
}

// serviceMain is a small HTTP service: /healthz answers 200 with its pid.
func serviceMain(addr string) int {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, os.Getpid()) })
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// unitFile is where the fleet keeps what a unit's repair needs to know.
func unitFile(dir, unit, what string) string { return filepath.Join(dir, "units", unit+"."+what) }

func readUnit(dir, unit, what string) string {
	b, _ := os.ReadFile(unitFile(dir, unit, what))
	return strings.TrimSpace(string(b))
}

// repairMain is the exec channel's restart action: it logs the run, then
// does what the unit's mode file says: ok (start the service again), fail,
// hang (outlive any fence), slow (wait, then start), overwrite (replace the
// lease under the running repair, then start), pause (pause autonomy, then
// start).
func repairMain(dir, host, unit string) int {
	line := fmt.Sprintf("%d %s %s %s %s %s\n", time.Now().UnixNano(), host, unit, os.Getenv("STADO_LEASE_TOKEN"),
		os.Getenv("STADO_FENCE_DEADLINE"), os.Getenv("STADO_LEASE_EXPIRES_AT"))
	f, err := os.OpenFile(filepath.Join(dir, "repairs.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _ = f.WriteString(line)
	f.Close()
	mode := readUnit(dir, unit, "mode")
	switch {
	case mode == "fail":
		fmt.Println("the unit refuses to start: exit status 1")
		return 1
	case mode == "hang":
		_ = os.WriteFile(unitFile(dir, unit, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		time.Sleep(time.Hour)
		return 0
	case strings.HasPrefix(mode, "slow:"):
		d, _ := time.ParseDuration(strings.TrimPrefix(mode, "slow:"))
		time.Sleep(d)
	case mode == "overwrite" || mode == "pause":
		args := strings.Fields(readUnit(dir, unit, "cmd"))
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), strings.Split(readUnit(dir, unit, "env"), "\n")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Printf("%s: %v: %s\n", mode, err, out)
			return 1
		}
	}
	return startService(dir, unit)
}

// putLeaseMain writes a lease on subject held by another reconciler, as one
// that crashed or misbehaves would leave it: expiring in the given seconds
// (negative: already expired). It reads the store's credentials, if any, from
// the environment.
func putLeaseMain(storeURL, subject, owner, expiresIn string) int {
	secs, err := strconv.Atoi(expiresIn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	store, err := objstore.Open(ctx, storeURL, objstore.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	now := time.Now().UTC()
	rec := lease.Record{SchemaVersion: 1, SubjectID: subject, DecisionID: "service-reconcile-elsewhere", Token: fmt.Sprintf("foreign-%d", now.UnixNano()),
		Holder: "service-reconciler", Owner: owner, AcquiredAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Duration(secs) * time.Second)}
	b, _ := json.Marshal(rec)
	if _, err := store.Put(ctx, lease.Key(subject), b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startService starts the unit's service in a session of its own, as a
// service manager would, so that it outlives the repair's process group.
func startService(dir, unit string) int {
	exe, err := os.Executable()
	if err != nil {
		return 2
	}
	addr := readUnit(dir, unit, "addr")
	cmd := exec.Command(exe, "e2e-service", addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = os.WriteFile(unitFile(dir, unit, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	_ = cmd.Process.Release()
	return 0
}

// checkMain is the exec channel's check action: 0 when the service answers.
func checkMain(dir, unit string) int {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + readUnit(dir, unit, "addr") + "/healthz")
	if err != nil {
		return 3
	}
	resp.Body.Close()
	return 0
}

// fleet is one fleet under test: a store, a local config whose exec channel
// runs this test binary's repair role, and the services it declares.
type fleet struct {
	t      *testing.T
	dir    string
	store  string
	env    []string
	config string
	exe    string
}

func newFleet(t *testing.T, backend string) *fleet {
	t.Helper()
	dir := t.TempDir()
	f := &fleet{t: t, dir: dir, config: filepath.Join(dir, "config.yaml")}
	switch backend {
	case "fs":
		f.store = filepath.Join(dir, "store")
	case "s3":
		f.store = s3srv.URL(s3srv.Bucket(t), "fleet")
		f.env = s3srv.Env()
	default:
		t.Fatalf("unknown backend %s", backend)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f.exe = exe
	if err := os.MkdirAll(filepath.Join(dir, "units"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`channels:
  exec:
    actions:
      restart: [%q, "e2e-repair", %q, "{host}", "{unit}"]
      check: [%q, "e2e-check", %q, "{host}", "{unit}"]
`, exe, dir, exe, dir)
	f.write("config.yaml", cfg)
	t.Cleanup(f.killAll)
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

// stado runs the built binary against the fleet's store and config.
func (f *fleet) stado(args ...string) clitest.Result {
	f.t.Helper()
	return clitest.Run(f.t, clitest.Cmd{Args: append([]string{"--store", f.store, "--config", f.config}, args...), Env: f.env})
}

// must runs stado and fails the test unless it exits 0.
func (f *fleet) must(args ...string) clitest.Result {
	f.t.Helper()
	r := f.stado(args...)
	if r.Code != 0 {
		f.t.Fatalf("stado %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// stadoCmd builds a stado process to start concurrently with others.
func (f *fleet) stadoCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(clitest.Binary(f.t), append([]string{"--store", f.store, "--config", f.config}, args...)...)
	cmd.Env = append(clitest.BaseEnv(f.t), f.env...)
	return cmd
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// service declares a unit's service and, if up, starts it.
type service struct {
	Name, Host, Unit, Addr string
}

func (f *fleet) newService(name, host, unit string, up bool) service {
	f.t.Helper()
	s := service{Name: name, Host: host, Unit: unit, Addr: freeAddr(f.t)}
	f.write(filepath.Join("units", unit+".addr"), s.Addr)
	f.setMode(unit, "ok")
	if up {
		if code := startService(f.dir, unit); code != 0 {
			f.t.Fatalf("start %s: %d", unit, code)
		}
		f.waitUp(s)
	}
	return s
}

func (f *fleet) setMode(unit, mode string) { f.write(filepath.Join("units", unit+".mode"), mode) }

// pid is the service's current process.
func (f *fleet) pid(unit string) int {
	n, _ := strconv.Atoi(readUnit(f.dir, unit, "pid"))
	return n
}

func (f *fleet) kill(unit string) {
	f.t.Helper()
	if pid := f.pid(unit); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitDead(f.t, pid)
	}
}

func (f *fleet) killAll() {
	entries, _ := filepath.Glob(filepath.Join(f.dir, "units", "*.pid"))
	for _, e := range entries {
		b, _ := os.ReadFile(e)
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func up(addr string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func (f *fleet) waitUp(s service) {
	f.t.Helper()
	for end := time.Now().Add(10 * time.Second); !up(s.Addr); {
		if time.Now().After(end) {
			f.t.Fatalf("%s did not come up on %s", s.Unit, s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDead waits for a process to be gone (or a zombie).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(end) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// registry writes and applies a registry of services, all repaired by the
// exec channel's restart action.
func (f *fleet) applyRegistry(svcs []service, extra string) {
	f.t.Helper()
	var b strings.Builder
	b.WriteString("services:\n")
	for _, s := range svcs {
		fmt.Fprintf(&b, "  - name: %s\n    host: %s\n    unit: %s\n    endpoint: http://%s/healthz\n    repair: restart\n    channel: exec\n", s.Name, s.Host, s.Unit, s.Addr)
	}
	b.WriteString(extra)
	f.write("registry.yaml", b.String())
	r := f.stado("service", "show")
	args := []string{"service", "apply", "-f", filepath.Join(f.dir, "registry.yaml")}
	if v := versionLine(r.Stdout); v != "" && r.Code == 0 {
		args = append(args, "--expect-version", v)
	}
	f.must(args...)
}

// applyPolicy applies a policy document, with CAS against the stored one.
func (f *fleet) applyPolicy(doc string) {
	f.t.Helper()
	f.write("policy.yaml", doc)
	args := []string{"optimize", "policy", "apply", "-f", filepath.Join(f.dir, "policy.yaml")}
	if v := versionLine(f.must("optimize", "policy", "show").Stdout); v != "" {
		args = append(args, "--expect-version", v)
	}
	r := f.stado(args...)
	if r.Code != 0 && !strings.Contains(r.Stdout+r.Stderr, "nothing changed") {
		f.t.Fatalf("policy apply: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
}

func versionLine(out string) string {
	first, _, _ := strings.Cut(out, "\n")
	if v, ok := strings.CutPrefix(first, "version: "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// publish publishes each host's beacon with the given unit states.
func (f *fleet) publish(states map[string]map[string]string) {
	f.t.Helper()
	hosts := make([]string, 0, len(states))
	for h := range states {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		args := []string{"beacon", "publish", "--host", h}
		for unit, st := range states[h] {
			args = append(args, "--state", unit+"="+st)
		}
		f.must(args...)
	}
}

// run runs one tick and returns its report and exit code.
func (f *fleet) run(args ...string) (*reports.Report, clitest.Result) {
	f.t.Helper()
	r := f.stado(append([]string{"optimize", "run", "--json"}, args...)...)
	var rep reports.Report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		f.t.Fatalf("optimize run: exit %d, no JSON report (%v)\nstdout: %s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
	}
	return &rep, r
}

// repairs reads the repair log: one line per repair command run.
type repairRun struct {
	At               time.Time
	Host, Unit       string
	Token            string
	Fence, ExpiresAt time.Time
}

func (f *fleet) repairs() []repairRun {
	f.t.Helper()
	fh, err := os.Open(filepath.Join(f.dir, "repairs.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	var out []repairRun
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		if len(p) < 4 {
			f.t.Fatalf("malformed repair log line %q", sc.Text())
		}
		ns, _ := strconv.ParseInt(p[0], 10, 64)
		r := repairRun{At: time.Unix(0, ns), Host: p[1], Unit: p[2], Token: p[3]}
		if len(p) > 5 {
			r.Fence, _ = time.Parse(time.RFC3339Nano, p[4])
			r.ExpiresAt, _ = time.Parse(time.RFC3339Nano, p[5])
		}
		out = append(out, r)
	}
	return out
}

// outcome finds a unit's outcome in a report.
func outcome(t *testing.T, r *reports.Report, unit string) reports.Outcome {
	t.Helper()
	for _, o := range r.Outcomes {
		if o.Unit == unit {
			return o
		}
	}
	t.Fatalf("no outcome for %s in run %s", unit, r.RunID)
	return reports.Outcome{}
}

// putLease runs the put-lease role as a separate process.
func (f *fleet) putLease(subject, owner string, expiresIn int) {
	f.t.Helper()
	cmd := exec.Command(f.exe, "e2e-put-lease", f.store, subject, owner, strconv.Itoa(expiresIn))
	cmd.Env = append(os.Environ(), f.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("put lease: %v: %s", err, out)
	}
}

// setRepairCommand makes the unit's repair run a command first (modes
// "overwrite" and "pause"), with the store's environment.
func (f *fleet) setRepairCommand(unit string, args ...string) {
	f.write(filepath.Join("units", unit+".cmd"), strings.Join(args, " "))
	f.write(filepath.Join("units", unit+".env"), strings.Join(f.env, "\n"))
}

// startHangingServer accepts TCP connections and never answers.
func startHangingServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

func clitestBinary(f *fleet) string { return clitest.Binary(f.t) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// latest reads the latest report through status --json.
func (f *fleet) latest() *reports.Report {
	f.t.Helper()
	var s struct {
		Report *reports.Report `json:"latest_report"`
	}
	if err := json.Unmarshal([]byte(f.must("optimize", "status", "--json", "--all").Stdout), &s); err != nil || s.Report == nil {
		f.t.Fatalf("no latest report: %v", err)
	}
	return s.Report
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cmdEnv is the environment of a script run as a new user would: PATH and a
// fresh HOME, with Go's caches kept so the build does not start from zero.
func cmdEnv(t *testing.T) []string {
	env := clitest.BaseEnv(t)
	for _, k := range []string{"GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	if os.Getenv("GOCACHE") == "" {
		if out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output(); err == nil {
			p := strings.Fields(string(out))
			if len(p) == 2 {
				env = append(env, "GOCACHE="+p[0], "GOMODCACHE="+p[1])
			}
		}
	}
	return env
}

func cmdTempDir(cmd *exec.Cmd) string {
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			return v
		}
	}
	return os.TempDir()
}

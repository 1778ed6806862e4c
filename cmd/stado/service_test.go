package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/clitest"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/registry"
)

// svcStore is one store the built binary runs against in the service and
// beacon tests: the URL and environment that name it, and a client for the
// test to plant and check state with.
type svcStore struct {
	url   string
	env   []string
	store objstore.Store
	dir   string // the test's scratch directory for input files
}

// forEachSvcStore runs fn against a fresh fs store and a fresh S3 bucket.
func forEachSvcStore(t *testing.T, fn func(t *testing.T, s svcStore)) {
	t.Run("fs", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		st, err := objstore.NewFS(dir, clock.Real{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, svcStore{url: dir, store: st, dir: t.TempDir()})
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		url := s3srv.URL(s3srv.Bucket(t), "p")
		st, err := objstore.Open(context.Background(), url, objstore.OpenOptions{S3: objstore.S3Options{Credentials: s3srv.Credentials()}})
		if err != nil {
			t.Fatal(err)
		}
		fn(t, svcStore{url: url, env: s3srv.Env(), store: st, dir: t.TempDir()})
	})
}

// run runs `stado --store URL args...` with extra environment.
func (s svcStore) run(t *testing.T, stdin string, env []string, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, clitest.Cmd{Args: append([]string{"--store", s.url}, args...), Env: append(append([]string{}, s.env...), env...), Stdin: stdin, Dir: s.dir})
}

// file writes an input file in the scratch directory and returns its name.
func (s svcStore) file(t *testing.T, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func (s svcStore) put(t *testing.T, key, body string) string {
	t.Helper()
	v, err := s.store.Put(context.Background(), key, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (s svcStore) get(t *testing.T, key string) objstore.Object {
	t.Helper()
	obj, err := s.store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return obj
}

func svcExpect(t *testing.T, what string, r clitest.Result, code int, stdout, stderr []string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.Code, code, r.Stdout, r.Stderr)
	}
	for _, w := range stdout {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("%s: stdout does not contain %q:\n%s", what, w, r.Stdout)
		}
	}
	for _, w := range stderr {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("%s: stderr does not contain %q:\n%s", what, w, r.Stderr)
		}
	}
}

var svcVersionLine = regexp.MustCompile(`^version: ([0-9a-zA-Z"-]+)\n`)

func svcVersion(t *testing.T, out string) string {
	t.Helper()
	m := svcVersionLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no version line in %q", out)
	}
	return m[1]
}

const svcRegistry = `# the web fleet
services:
  - name: api
    host: web-1
    unit: api.service
    endpoint: http://web-1:8080/healthz
    repair: restart
    channel: ssh
  - name: worker
    host: web-1
    unit: worker@1.service
    repair: restart
    channel: local
  - name: db
    host: db-1
    unit: postgresql.service
    endpoint: tcp://db-1:5432
    managed: false   # the DBAs own it
`

func TestServiceApplyShowListBinary(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		none := "no service registry is stored in "
		svcExpect(t, "list with nothing stored", s.run(t, "", nil, "service", "list"), 0, nil, []string{none})
		svcExpect(t, "show with nothing stored", s.run(t, "", nil, "service", "show"), 0, nil, []string{none})

		reg := s.file(t, "reg.yaml", svcRegistry)
		r := s.run(t, "", nil, "service", "apply", "-f", reg)
		svcExpect(t, "apply", r, 0, []string{"applied reg.yaml: 3 services on 2 hosts are now the declared services\n"}, nil)
		v1 := svcVersion(t, r.Stdout)
		if got := s.get(t, registry.Key); got.ETag != v1 || string(got.Body) != svcRegistry {
			t.Errorf("stored %q at %s, want the file byte for byte at %s", got.Body, got.ETag, v1)
		}

		r = s.run(t, "", nil, "service", "show")
		svcExpect(t, "show", r, 0, nil, nil)
		if want := "version: " + v1 + "\n" + svcRegistry; r.Stdout != want {
			t.Errorf("show printed\n%s\nwant\n%s", r.Stdout, want)
		}

		svcExpect(t, "apply without --expect-version", s.run(t, "", nil, "service", "apply", "-f", reg), 2, nil,
			[]string{"--expect-version is required: it is at version " + v1 + "; review it with `stado service show`, then pass --expect-version " + v1})
		svcExpect(t, "re-apply unchanged", s.run(t, "", nil, "service", "apply", "-f", reg, "--expect-version", v1), 0,
			[]string{"version: " + v1 + "\nnothing changed: the stored registry is already byte-identical to reg.yaml\n"}, nil)

		reg2 := s.file(t, "reg2.yaml", strings.Replace(svcRegistry, "host: db-1", "host: db-2", 1))
		r = s.run(t, "", nil, "service", "apply", "-f", reg2, "--expect-version", v1)
		svcExpect(t, "apply a change", r, 0, nil, nil)
		v2 := svcVersion(t, r.Stdout)
		svcExpect(t, "apply from a stale version", s.run(t, "", nil, "service", "apply", "-f", reg, "--expect-version", v1), 1, nil,
			[]string{"stado: apply reg.yaml: service registry version conflict: the stored registry is at version " + v2 + ", not " + v1,
				"re-apply with --expect-version " + v2})

		bad := s.file(t, "bad.yaml", "services:\n  - name: api\n    host: web 1\n    unti: api.service\n    managed: false\n")
		svcExpect(t, "apply an invalid file", s.run(t, "", nil, "service", "apply", "-f", bad, "--expect-version", v2), 1, nil,
			[]string{"bad.yaml:2:5: services[0].unit: is required", "bad.yaml:3:11: services[0].host: host \"web 1\" contains ' ' (U+0020)",
				"bad.yaml:4:5: services[0].unti: unknown key \"unti\" (did you mean \"unit\"?)",
				"stado: bad.yaml is not a valid service registry: 3 problem(s), listed above; fix them and apply again"})
		if s.get(t, registry.Key).ETag != v2 {
			t.Error("an invalid apply changed the stored registry")
		}

		// The registry from standard input.
		r = s.run(t, svcRegistry, nil, "service", "apply", "-f", "-", "--expect-version", v2)
		svcExpect(t, "apply from stdin", r, 0, []string{"applied <stdin>: 3 services"}, nil)

		// Beacons: web-1 reports api failed and says nothing of the worker;
		// db-1 never published.
		svcExpect(t, "publish", s.run(t, "", nil, "beacon", "publish", "--host", "web-1", "--state", "api.service=failed"), 0, nil, nil)
		r = s.run(t, "", nil, "service", "list")
		svcExpect(t, "list", r, 0, nil, nil)
		lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
		want := []*regexp.Regexp{
			regexp.MustCompile(`^HOST +UNIT +NAME +MANAGED +BEACON +REPORTED$`),
			regexp.MustCompile(`^db-1 +postgresql\.service +db +no +no beacon +-$`),
			regexp.MustCompile(`^web-1 +api\.service +api +yes +failed +[0-9]+s ago$`),
			regexp.MustCompile(`^web-1 +worker@1\.service +worker +yes +absent +[0-9]+s ago$`),
		}
		if len(lines) != len(want) {
			t.Fatalf("list printed %d lines, want %d:\n%s", len(lines), len(want), r.Stdout)
		}
		for i, re := range want {
			if !re.MatchString(lines[i]) {
				t.Errorf("list line %d %q does not match %s", i, lines[i], re)
			}
		}

		r = s.run(t, "", nil, "service", "list", "--json")
		svcExpect(t, "list --json", r, 0, nil, nil)
		var doc serviceListJSON
		if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
			t.Fatalf("list --json: %v\n%s", err, r.Stdout)
		}
		if doc.Version != s.get(t, registry.Key).ETag || doc.BeaconSilenceSeconds != 300 || len(doc.Services) != 3 {
			t.Fatalf("list --json: %+v", doc)
		}
		api := doc.Services[1]
		if api.Host != "web-1" || api.Unit != "api.service" || api.Endpoint != "http://web-1:8080/healthz" || api.Repair != "restart" ||
			api.Channel != "ssh" || !api.Managed || api.Beacon.Status != "reported" || api.Beacon.ActiveState != "failed" || !api.Beacon.Fresh ||
			api.Beacon.AgeSeconds == nil || api.Beacon.ReportedAt == "" {
			t.Errorf("api row: %+v", api)
		}
		if db := doc.Services[0]; db.Beacon.Status != "no_beacon" || db.Managed || db.Beacon.Fresh ||
			!strings.Contains(db.Beacon.Error, "no beacon from db-1 at state/beacons/db-1.json") {
			t.Errorf("db row: %+v", db)
		}
		if w := doc.Services[2]; w.Beacon.Status != "absent" || !w.Beacon.Fresh {
			t.Errorf("worker row: %+v", w)
		}
	})
}

// TestServiceApplyConcurrentCASBinary: two operators apply different
// registries from the same version at the same moment; exactly one wins,
// and the other is told the winner's version. The same for two that both
// create the first registry.
func TestServiceApplyConcurrentCASBinary(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		race := func(expect string) (winner string) {
			t.Helper()
			var (
				cmds [2]*exec.Cmd
				outs [2]*bytes.Buffer
				errs [2]*bytes.Buffer
			)
			for i := range cmds {
				f := s.file(t, fmt.Sprintf("race-%s-%d.yaml", expect, i), fmt.Sprintf("# race from %q, contender %d\n%s", expect, i, svcRegistry))
				args := []string{"--store", s.url, "service", "apply", "-f", f}
				if expect != "" {
					args = append(args, "--expect-version", expect)
				}
				cmds[i] = exec.Command(clitest.Binary(t), args...)
				cmds[i].Env = append(clitest.BaseEnv(t), s.env...)
				cmds[i].Dir = s.dir
				outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
				cmds[i].Stdout, cmds[i].Stderr = outs[i], errs[i]
			}
			for _, c := range cmds {
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
			}
			codes := [2]int{}
			for i, c := range cmds {
				if err := c.Wait(); err != nil {
					codes[i] = c.ProcessState.ExitCode()
				}
			}
			won := -1
			for i := range cmds {
				if codes[i] == 0 {
					if won >= 0 {
						t.Fatalf("both applies from %q succeeded:\n%s\n%s", expect, outs[0], outs[1])
					}
					won = i
				}
			}
			if won < 0 {
				t.Fatalf("no apply from %q succeeded:\n%s\n%s", expect, errs[0], errs[1])
			}
			lost := 1 - won
			winner = svcVersion(t, outs[won].String())
			// A loser that read before the winner wrote gets a conflict; one
			// that read after it, when both create, is told a registry now
			// exists. Either way it names the winner's version.
			conflict := codes[lost] == 1 && strings.Contains(errs[lost].String(), "service registry version conflict")
			late := expect == "" && codes[lost] == 2 && strings.Contains(errs[lost].String(), "--expect-version is required")
			if !conflict && !late || !strings.Contains(errs[lost].String(), "--expect-version "+winner) {
				t.Errorf("loser: exit %d\n%s", codes[lost], errs[lost])
			}
			if got := s.get(t, registry.Key).ETag; got != winner {
				t.Errorf("stored version %s, winner %s", got, winner)
			}
			return winner
		}
		v1 := race("")
		race(v1)
	})
}

// TestServiceHostileStoredData: control characters in a stored registry
// (written around apply) and in a stored beacon never reach the terminal
// raw.
func TestServiceHostileStoredData(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		reg := "# \x1b]0;pwned\x07 \x1b[2J \u009b31m\nservices:\n  - name: api\n    host: web-1\n    unit: api.service\n    managed: false\n"
		v := s.put(t, registry.Key, reg)
		show := s.run(t, "", nil, "service", "show")
		svcExpect(t, "show", show, 0, []string{"version: " + v + "\n", `# \x1b]0;pwned\x07 \x1b[2J \u009b31m` + "\n"},
			[]string{"1:3: character U+001B is not allowed in YAML"})
		// YAML itself refuses control characters, so no tick runs on it.
		invalid := s.run(t, "", nil, "service", "list")
		svcExpect(t, "list of an invalid registry", invalid, 1, nil, []string{"is invalid: 1:3: character U+001B is not allowed in YAML"})

		s.put(t, registry.Key, "services:\n  - name: api\n    host: web-1\n    unit: api.service\n    managed: false\n")
		s.put(t, "state/beacons/web-1.json", `{"schema_version":1,"host":"web-1","reported_at":"2026-11-30T12:00:00Z","units":[{"unit":"api\u001b[2J","active_state":"failed","sub_state":""}]}`)
		r := s.run(t, "", nil, "service", "list")
		svcExpect(t, "list", r, 0, []string{"invalid beacon"}, []string{`warning: the beacon at state/beacons/web-1.json: invalid beacon: units[0].unit: invalid name: unit "api\x1b[2J" contains '\x1b'`})
		for _, out := range []string{show.Stdout, show.Stderr, invalid.Stderr, r.Stdout, r.Stderr} {
			if strings.ContainsAny(out, "\x1b\x07\u009b") {
				t.Errorf("raw control characters reached the terminal: %q", out)
			}
		}
	})
}

// TestServiceListBeaconFreshness: a stale beacon, one from the future, an
// invalid one and none are each shown for what they are.
func TestServiceListBeaconFreshness(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		var b strings.Builder
		b.WriteString("services:\n")
		for _, h := range []string{"stale", "future", "broken", "silent", "fresh"} {
			fmt.Fprintf(&b, "  - name: %s\n    host: %s\n    unit: api.service\n    managed: false\n", h, h)
		}
		s.put(t, registry.Key, b.String())
		now := time.Now().UTC()
		stamp := func(host string, at time.Time) string {
			return fmt.Sprintf(`{"schema_version":1,"host":%q,"reported_at":%q,"units":[{"unit":"api.service","active_state":"active","sub_state":"running"}]}`,
				host, at.Format(beacon.TimeFormat))
		}
		s.put(t, "state/beacons/stale.json", stamp("stale", now.Add(-2*time.Hour)))
		s.put(t, "state/beacons/future.json", stamp("future", now.Add(3*time.Hour)))
		s.put(t, "state/beacons/broken.json", `{"schema_version":1,"host":"broken"`)
		svcExpect(t, "publish fresh", s.run(t, "", nil, "beacon", "publish", "--host", "fresh", "--state", "api.service=active"), 0, nil, nil)

		r := s.run(t, "", nil, "service", "list")
		svcExpect(t, "list", r, 0, nil, []string{
			"warning: beacon is stale: the beacon of stale was reported at ",
			"warning: beacon is dated in the future: the beacon of future is dated ",
			"warning: the beacon at state/beacons/broken.json: invalid beacon: 1:36: the JSON ends before the object does (truncated?)",
		})
		for _, re := range []string{
			`(?m)^broken +api\.service +broken +no +invalid beacon +-$`,
			`(?m)^fresh +api\.service +fresh +no +active +[0-9]+s ago$`,
			`(?m)^future +api\.service +future +no +active/running +in (2h59m|3h0m)[0-9]+s \(future: ignored\)$`,
			`(?m)^silent +api\.service +silent +no +no beacon +-$`,
			`(?m)^stale +api\.service +stale +no +active/running +(1h59m|2h0m)[0-9]+s ago \(stale\)$`,
		} {
			if !regexp.MustCompile(re).MatchString(r.Stdout) {
				t.Errorf("list output does not match %s:\n%s", re, r.Stdout)
			}
		}
		if strings.Contains(r.Stderr, "silent") {
			t.Errorf("a host that never published is not worth a warning:\n%s", r.Stderr)
		}
	})
}

func TestServiceInvalidStoredRegistryBinary(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		v := s.put(t, registry.Key, "services:\n  - name: api\n    host: -web\n    unit: api.service\n    managed: false\n")
		svcExpect(t, "list", s.run(t, "", nil, "service", "list"), 1, nil, []string{
			"stado: the stored service registry state/services/registry.yaml (version " + v + ") is invalid: " +
				`3:11: services[0].host: host "-web" starts with "-"`,
			"apply it with `stado service apply -f FILE --expect-version " + v + "`"})
		svcExpect(t, "show", s.run(t, "", nil, "service", "show"), 0, []string{"version: " + v + "\n"},
			[]string{`state/services/registry.yaml:3:11: services[0].host: host "-web" starts with "-"`,
				"warning: this stored registry is invalid (1 problem(s), listed above), so every tick fails until it is fixed"})
		svcExpect(t, "publish from systemd", s.run(t, "", nil, "beacon", "publish", "--host", "web-1"), 1, nil,
			[]string{"the stored service registry state/services/registry.yaml (version " + v + ") is invalid"})
	})
}

func TestServiceUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"service"},
		{"service", "frobnicate"},
		{"service", "apply"},
		{"service", "apply", "-f", ""},
		{"service", "list", "extra"},
		{"beacon"},
		{"beacon", "publish"},
		{"beacon", "publish", "--host", "../etc"},
		{"beacon", "publish", "--host", "web-1", "--state", "api.service=up"},
		{"beacon", "publish", "--host", "web-1", "--state", "api.service"},
		{"beacon", "publish", "--host", "web-1", "--state", "a.service=active", "--from-file", "x.json"},
	} {
		r := clitest.Run(t, clitest.Cmd{Args: append([]string{"--store", dir}, args...)})
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "stado: ") || !strings.Contains(r.Stderr, "Run 'stado --help' for usage.") {
			t.Errorf("stado %v: exit %d, stderr %q; want 2 and a usage error", args, r.Code, r.Stderr)
		}
	}
}

package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stado/stado/lease"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// terminalDirt lists the raw control characters in s that could drive a
// terminal: C0 other than newline and tab, DEL, C1 (as characters, or as
// bytes that are not UTF-8), and bytes that are not UTF-8 at all.
func terminalDirt(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, fmt.Sprintf("byte 0x%02x at %d (not UTF-8)", s[i], i))
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r < 0xa0:
			out = append(out, fmt.Sprintf("%U at %d", r, i))
		}
		i += size
	}
	return out
}

// hostileCommands are what an operator runs; each must survive every
// hostile object.
var hostileCommands = [][]string{
	{"optimize", "run", "--json"},
	{"optimize", "run"},
	{"optimize", "status"},
	{"optimize", "status", "--all"},
	{"optimize", "status", "--json", "--all"},
	{"optimize", "history"},
	{"optimize", "history", "--json"},
	{"service", "list"},
	{"service", "list", "--json"},
	{"service", "show"},
	{"optimize", "policy", "show"},
	{"optimize", "policy", "show", "--json"},
}

type hostileCase struct {
	name string
	// file is the object's path under the store's root (it may be a name no
	// valid key has); body its content.
	file string
	body []byte
	// down: s0000.service is really down and its beacon says failed (unless
	// the case replaces that beacon), so a tick fooled by the object would
	// repair it.
	down bool
	// runCode is the exit status `optimize run` must give; class, when set,
	// the classification it must give s0000.service.
	runCode int
	class   string
	// stderr, when set, must appear in a failing run's message.
	stderr string
}

const esc = "\x1b]0;owned\x07\x1b[2J\x1b[31m\u009b1;1H\u202e"

func hostileCases(f *fleet) []hostileCase {
	now := time.Now().UTC()
	validPolicy := readStored(f, "state/autonomy/policy.yaml")
	validRegistry := readStored(f, "state/services/registry.yaml")
	beacon := func(host string, reported time.Time, units string) []byte {
		return []byte(fmt.Sprintf(`{"schema_version":1,"host":%q,"reported_at":%q,"units":[%s]}`, host, reported.Format(time.RFC3339Nano), units))
	}
	failedUnit := `{"unit":"s0000.service","active_state":"failed","sub_state":"failed"}`
	var hugeUnits strings.Builder
	for i := 0; i <= 10_000; i++ {
		fmt.Fprintf(&hugeUnits, `{"unit":"u%05d.service","active_state":"failed","sub_state":"failed"},`, i)
	}
	hugeUnits.WriteString(failedUnit)
	leaseFile := "state/autonomy/leases/" + strings.TrimPrefix(lease.Key(registry.Subject("h00", "s0000.service")), lease.Prefix)
	leaseBody := func(owner string, acquired, expires time.Time) []byte {
		b, _ := json.Marshal(lease.Record{SchemaVersion: 1, SubjectID: registry.Subject("h00", "s0000.service"), DecisionID: "d" + esc,
			Token: "t" + esc, Holder: "service-reconciler" + esc, Owner: owner, AcquiredAt: acquired, ExpiresAt: expires})
		return b
	}
	report := func(runID, detail string) []byte {
		r := &reports.Report{SchemaVersion: 1, RunID: runID, DecisionID: "d", CreatedAt: now, FinishedAt: now, Reconciler: "evil" + esc,
			Mode: "enforce-safe" + esc, PolicyVersion: "v" + esc, Breaker: "closed" + esc,
			Outcomes: []reports.Outcome{{Host: "h00" + esc, Service: "s" + esc, Unit: "s0000.service" + esc, BeaconState: "failed" + esc,
				EndpointState: esc, Classification: "repair_failed" + esc, Action: "restart" + esc, Detail: detail}}}
		r.Finalize()
		return r.Marshal()
	}
	runID := reports.RunID(now.Add(time.Hour))
	garbage := []byte("\x00\xff\xfe" + esc + "\x9b\x9b{[\"")
	return []hostileCase{
		// The policy.
		{name: "policy/truncated", file: "state/autonomy/policy.yaml", body: validPolicy[:len(validPolicy)/2], down: true, runCode: 1, stderr: "policy"},
		{name: "policy/garbage", file: "state/autonomy/policy.yaml", body: garbage, down: true, runCode: 1, stderr: "policy"},
		{name: "policy/control-characters", file: "state/autonomy/policy.yaml", body: []byte("policy_version: \"\\e]0;owned\\a\\e[2J\\x9b\"\nmode: enforce-safe\n"), down: true, runCode: 1, stderr: "policy"},
		{name: "policy/billion-laughs", file: "state/autonomy/policy.yaml", body: []byte("a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"), down: true, runCode: 1, stderr: "policy"},
		{name: "policy/huge", file: "state/autonomy/policy.yaml", body: append(append([]byte{}, validPolicy...), bytes.Repeat([]byte("# "+esc+"\n"), 100_000)...), down: true, runCode: 1, stderr: "policy"},
		// The registry.
		{name: "registry/truncated", file: "state/services/registry.yaml", body: validRegistry[:len(validRegistry)*2/3], down: true, runCode: 1, stderr: "registry"},
		{name: "registry/garbage", file: "state/services/registry.yaml", body: garbage, down: true, runCode: 1, stderr: "registry"},
		{name: "registry/ssh-option-host", file: "state/services/registry.yaml", body: []byte("services:\n  - name: evil\n    host: -oProxyCommand=touch /tmp/stado-owned\n    unit: x.service\n    repair: restart\n    channel: ssh\n"), down: true, runCode: 1, stderr: "registry"},
		{name: "registry/dash-unit", file: "state/services/registry.yaml", body: []byte("services:\n  - name: evil\n    host: h00\n    unit: --help\n    repair: restart\n    channel: exec\n"), down: true, runCode: 1, stderr: "registry"},
		{name: "registry/dotdot-host", file: "state/services/registry.yaml", body: []byte("services:\n  - name: evil\n    host: ../../etc\n    unit: x.service\n    repair: restart\n    channel: exec\n"), down: true, runCode: 1, stderr: "registry"},
		{name: "registry/control-characters", file: "state/services/registry.yaml", body: []byte("services:\n  - name: \"\\e[2J\"\n    host: \"h00\\e]0;x\\a\"\n    unit: x.service\n    repair: restart\n    channel: exec\n"), down: true, runCode: 1, stderr: "registry"},
		{name: "registry/huge", file: "state/services/registry.yaml", body: bytes.Repeat([]byte("#"+esc+"\n"), 200_000), down: true, runCode: 1, stderr: "registry"},
		// The control state: unreadable is paused (fail closed).
		{name: "control/truncated", file: "state/autonomy/control.json", body: []byte(`{"schema_version": 1, "emergency_paused": fal`), down: true, runCode: 0, class: reports.Planned},
		{name: "control/garbage", file: "state/autonomy/control.json", body: garbage, down: true, runCode: 0, class: reports.Planned},
		{name: "control/control-characters", file: "state/autonomy/control.json", body: []byte(`{"schema_version":1,"emergency_paused":true,"reason":` + jsonString(esc) + `,"changed_at":"2026-01-01T00:00:00Z","changed_by":` + jsonString("mallory"+esc) + `,"breaker":{"consecutive_failures":0,"open_until":null,"cooldown_seconds":900,"trips":0,"last_error":` + jsonString("boom"+esc) + `}}`), down: true, runCode: 0, class: reports.Planned},
		{name: "control/huge", file: "state/autonomy/control.json", body: append([]byte(`{"schema_version":1,"reason":"`), bytes.Repeat([]byte("A"), 1<<20)...), down: true, runCode: 0, class: reports.Planned},
		// The beacon of the host whose service is down: never evidence.
		{name: "beacon/truncated", file: "state/beacons/h00.json", body: beacon("h00", now, failedUnit)[:40], down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/garbage", file: "state/beacons/h00.json", body: garbage, down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/other-host", file: "state/beacons/h00.json", body: beacon("h01", now, failedUnit), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/control-characters", file: "state/beacons/h00.json", body: beacon("h00", now, failedUnit+`,{"unit":`+jsonString("x"+esc)+`,"active_state":"failed"}`), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/control-character-state", file: "state/beacons/h00.json", body: beacon("h00", now, `{"unit":"s0000.service","active_state":`+jsonString("failed"+esc)+`}`), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/huge-unit-list", file: "state/beacons/h00.json", body: beacon("h00", now, hugeUnits.String()), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/future", file: "state/beacons/h00.json", body: beacon("h00", now.Add(24*time.Hour), failedUnit), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/far-future", file: "state/beacons/h00.json", body: beacon("h00", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), failedUnit), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/dotdot-unit", file: "state/beacons/h00.json", body: beacon("h00", now, `{"unit":"../../s0000.service","active_state":"failed"}`), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/dash-unit", file: "state/beacons/h00.json", body: beacon("h00", now, failedUnit+`,{"unit":"-oProxyCommand=x","active_state":"failed"}`), down: true, runCode: 0, class: reports.Unknown},
		{name: "beacon/escaping-name", file: "state/beacons/" + esc + ".json", body: beacon(esc, now, failedUnit), down: false, runCode: 0, class: reports.Healthy},
		// The lease of the service that is down: held, or unreadable and so
		// held, never taken.
		{name: "lease/truncated", file: leaseFile, body: leaseBody("mallory", now, now.Add(time.Hour))[:50], down: true, runCode: 0, class: reports.LeaseBlocked},
		{name: "lease/garbage", file: leaseFile, body: garbage, down: true, runCode: 0, class: reports.LeaseBlocked},
		{name: "lease/control-characters", file: leaseFile, body: leaseBody("mallory"+esc, now, now.Add(time.Hour)), down: true, runCode: 0, class: reports.LeaseBlocked},
		{name: "lease/century-term", file: leaseFile, body: leaseBody("mallory", now, now.Add(100*365*24*time.Hour)), down: true, runCode: 0, class: reports.LeaseBlocked},
		{name: "lease/far-future", file: leaseFile, body: leaseBody("mallory", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 1, 0, 0, time.UTC)), down: true, runCode: 0, class: reports.LeaseBlocked},
		{name: "lease/year-10000-in-utc", file: leaseFile, body: []byte(`{"schema_version":1,"subject_id":"service:h00:s0000.service","decision_id":"d","token":"t","holder":"service-reconciler","owner":"mallory","acquired_at":"9999-12-31T23:00:00-23:59","expires_at":"9999-12-31T23:59:59-23:59"}`), down: true, runCode: 0, class: reports.LeaseBlocked},
		// The reports operators read.
		{name: "latest/year-10000-in-utc", file: reports.LatestKey, body: []byte(`{"schema_version":1,"run_id":"x","created_at":"9999-12-31T23:59:59-23:59","finished_at":"9999-12-31T23:59:59-23:59","summary":{},"outcomes":[]}`), runCode: 0, class: reports.Healthy},
		{name: "run/year-10000-in-utc", file: reports.RunKey(runID), body: []byte(`{"schema_version":1,"run_id":"` + runID + `","created_at":"9999-12-31T23:59:59-23:59","finished_at":"9999-12-31T23:59:59-23:59","summary":{},"outcomes":[]}`), runCode: 0, class: reports.Healthy},
		{name: "latest/truncated", file: reports.LatestKey, body: report(runID, "x")[:100], runCode: 0, class: reports.Healthy},
		{name: "latest/garbage", file: reports.LatestKey, body: garbage, runCode: 0, class: reports.Healthy},
		{name: "latest/control-characters", file: reports.LatestKey, body: report(runID, esc), runCode: 0, class: reports.Healthy},
		{name: "latest/huge", file: reports.LatestKey, body: report(runID, strings.Repeat(esc, 200_000)), runCode: 0, class: reports.Healthy},
		{name: "run/truncated", file: reports.RunKey(runID), body: report(runID, "x")[:100], runCode: 0, class: reports.Healthy},
		{name: "run/control-characters", file: reports.RunKey(runID), body: report(runID, esc), runCode: 0, class: reports.Healthy},
		{name: "run/escaping-name", file: reports.RunsPrefix + "2099" + esc + ".json", body: report("2099"+esc, esc), runCode: 0, class: reports.Healthy},
		{name: "run/other-run-id", file: reports.RunKey(runID), body: report(esc, esc), runCode: 0, class: reports.Healthy},
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func readStored(f *fleet, key string) []byte {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.storeURL, key))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// TestHostileStoredObjects writes corrupt, truncated, huge and hostile
// versions of every object stado reads straight into an fs store, then runs
// every command an operator would. None panics or exits other than 0, 1 or
// 3; the tick classifies what it cannot trust (unknown, lease_blocked, a
// fail-closed pause) or refuses to run with one clear sentence; no repair
// runs that the object could have tricked it into; no raw control character
// reaches the terminal, in text or JSON.
func TestHostileStoredObjects(t *testing.T) {
	f := newFleet(t, "fs")
	f.declare(4, 2)
	f.applyPolicy(reliabilityPolicy)
	f.setModes(f.svcs, "ok")
	if r, rep := f.tick(); r.Code != 0 || rep == nil || rep.Summary[reports.Healthy] != 4 {
		t.Fatalf("the clean fleet: exit %d %s", r.Code, r.Stderr)
	}
	root := f.storeURL
	originals := map[string][]byte{}
	for _, key := range []string{"state/autonomy/policy.yaml", "state/services/registry.yaml", reports.LatestKey} {
		originals[key] = readStored(f, key)
	}
	s0000 := f.svcs[0]
	for _, hc := range hostileCases(f) {
		t.Run(hc.name, func(t *testing.T) {
			f.t = t
			if hc.down {
				f.down(s0000)
			}
			path := filepath.Join(root, filepath.FromSlash(hc.file))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, hc.body, 0o644); err != nil {
				t.Fatal(err)
			}
			logBefore, _ := f.repairLog()
			for _, args := range hostileCommands {
				r := f.stado(args...)
				figures.add("hostile objects: commands run", 1)
				what := hc.name + ": stado " + strings.Join(args, " ")
				if msg := cleanStderr(what, r); msg != "" {
					t.Error(msg)
				}
				if os.Getenv("REL_DEBUG") != "" && r.Code != 0 {
					t.Logf("%s: exit %d: %s", what, r.Code, clip(lastLine(r.Stderr), 300))
				}
				if r.Code != 0 && r.Code != 1 && r.Code != 3 {
					t.Errorf("%s: exit %d\n%s", what, r.Code, r.Stderr)
				}
				for _, stream := range []struct{ name, s string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
					if dirt := terminalDirt(stream.s); len(dirt) > 0 {
						t.Errorf("%s: raw control characters reached %s: %v\n%q", what, stream.name, dirt[:min(len(dirt), 5)], clip(stream.s, 600))
						figures.add("raw control characters on a terminal", 1)
					}
				}
				// What operators read keeps working: only the registry's
				// own listing refuses an invalid registry.
				if args[1] != "run" && r.Code != 0 && !(args[0] == "service" && args[1] == "list" && strings.HasPrefix(hc.name, "registry/")) {
					t.Errorf("%s: exit %d: one hostile object must not take the command down: %s", what, r.Code, lastLine(r.Stderr))
				}
				if args[1] == "run" {
					if r.Code != hc.runCode {
						t.Errorf("%s: exit %d, want %d\n%s", what, r.Code, hc.runCode, lastLines(r.Stderr, 3))
					}
					if hc.stderr != "" && !strings.Contains(lastLine(r.Stderr), hc.stderr) {
						t.Errorf("%s: the error does not say what is wrong (%q): %s", what, hc.stderr, lastLine(r.Stderr))
					}
					if rep := parseReport(r.Stdout); hc.class != "" && rep != nil {
						for _, o := range rep.Outcomes {
							if o.Unit == s0000.Unit && o.Classification != hc.class {
								t.Errorf("%s: %s is %s (%s), want %s", what, o.Unit, o.Classification, o.Detail, hc.class)
							}
						}
					}
				}
			}
			if logAfter, _ := f.repairLog(); len(logAfter) != len(logBefore) {
				t.Errorf("%s: %d repairs ran; the hostile object must not lead to any", hc.name, len(logAfter)-len(logBefore))
				figures.add("mutations caused by hostile objects", len(logAfter)-len(logBefore))
			}
			figures.add("hostile objects", 1)
			// Put the fleet back.
			if orig, ok := originals[hc.file]; ok {
				if err := os.WriteFile(path, orig, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			f.sim.set(s0000.Unit, true)
			f.publish(f.hosts...)
		})
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

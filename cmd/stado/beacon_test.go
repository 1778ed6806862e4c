package main

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/registry"
)

// storedBeacon reads and validates host's beacon from the test's side.
func (s svcStore) beacon(t *testing.T, host string) *beacon.Beacon {
	t.Helper()
	b, err := beacon.Read(context.Background(), s.store, host)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var publishedLine = regexp.MustCompile(`^published the beacon of web-1 at (\S+) \(state/beacons/web-1\.json\): (\d+) units\n`)

func TestBeaconPublishStateBinary(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		before := time.Now()
		r := s.run(t, "", nil, "beacon", "publish", "--host", "web-1", "--state", "worker.service=activating", "--state", "api.service=failed")
		svcExpect(t, "publish", r, 0, []string{"UNIT            ACTIVE      SUB\napi.service     failed      -\nworker.service  activating  -\n"}, nil)
		m := publishedLine.FindStringSubmatch(r.Stdout)
		if m == nil || m[2] != "2" {
			t.Fatalf("publish printed %q", r.Stdout)
		}
		obj := s.get(t, "state/beacons/web-1.json")
		want := `{"schema_version":1,"host":"web-1","reported_at":"` + m[1] + `","units":[` +
			`{"unit":"api.service","active_state":"failed","sub_state":""},{"unit":"worker.service","active_state":"activating","sub_state":""}]}`
		if string(obj.Body) != want {
			t.Errorf("stored\n%s\nwant\n%s", obj.Body, want)
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || len(m[1]) != len("2026-11-30T12:00:00.123456789Z") {
			t.Fatalf("reported_at %q is not RFC 3339 with nanoseconds: %v", m[1], err)
		}
		// The store clock of a local fs store or a local S3 server is
		// this machine's, within the S3 Date header's few seconds.
		if at.Before(before.Add(-5*time.Second)) || at.After(time.Now().Add(5*time.Second)) {
			t.Errorf("reported_at %s is not the store's now (%s)", at, before)
		}

		// A second publish replaces the first, with content of its own.
		r = s.run(t, "", nil, "beacon", "publish", "--host", "web-1", "--state", "api.service=active")
		svcExpect(t, "publish again", r, 0, nil, nil)
		b := s.beacon(t, "web-1")
		if !reflect.DeepEqual(b.Units, []beacon.Unit{{Unit: "api.service", ActiveState: beacon.Active}}) {
			t.Errorf("units after republish: %+v", b.Units)
		}
	})
}

func TestBeaconPublishFromFileBinary(t *testing.T) {
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		doc := `{"units": [{"unit": "api.service", "active_state": "failed", "sub_state": "failed"},
           {"unit": "web.service", "active_state": "active", "sub_state": "running"}]}`
		f := s.file(t, "units.json", doc)
		svcExpect(t, "publish --from-file", s.run(t, "", nil, "beacon", "publish", "--host", "web-1", "--from-file", f), 0,
			[]string{"api.service  failed  failed\nweb.service  active  running\n"}, nil)
		want := []beacon.Unit{{Unit: "api.service", ActiveState: beacon.Failed, SubState: "failed"}, {Unit: "web.service", ActiveState: beacon.Active, SubState: "running"}}
		if b := s.beacon(t, "web-1"); !reflect.DeepEqual(b.Units, want) {
			t.Errorf("units %+v", b.Units)
		}

		// From standard input, in the beacon's own shape (host included).
		svcExpect(t, "publish --from-file -", s.run(t, `{"schema_version":1,"host":"web-2","units":[{"unit":"api.service","active_state":"inactive"}]}`,
			nil, "beacon", "publish", "--host", "web-2", "--from-file", "-"), 0, []string{"published the beacon of web-2 at "}, nil)
		if b := s.beacon(t, "web-2"); len(b.Units) != 1 || b.Units[0].ActiveState != beacon.Inactive {
			t.Errorf("web-2 units %+v", b.Units)
		}

		bad := s.file(t, "bad.json", "{\n  \"units\": [\n    {\"unit\": \"api.service\", \"active_state\": \"up\"}\n  ]\n}\n")
		svcExpect(t, "bad state", s.run(t, "", nil, "beacon", "publish", "--host", "web-3", "--from-file", bad), 1, nil,
			[]string{`stado: --from-file bad.json: units[0].active_state: unknown unit state "up"; use one of: active, failed, inactive, activating, deactivating, reloading; fix the file and publish again`})
		typo := s.file(t, "typo.json", "{\n  \"units\": [\n    {\"unit\": \"api.service\", \"activestate\": \"failed\"}\n  ]\n}\n")
		svcExpect(t, "unknown field", s.run(t, "", nil, "beacon", "publish", "--host", "web-3", "--from-file", typo), 1, nil,
			[]string{`stado: --from-file typo.json: 3:29: unknown field "activestate"; fix the file and publish again`})
		other := s.file(t, "other.json", `{"host":"web-1","units":[]}`)
		svcExpect(t, "another host's file", s.run(t, "", nil, "beacon", "publish", "--host", "web-3", "--from-file", other), 1, nil,
			[]string{`host: the file is for host "web-1", but --host is "web-3"`})
		svcExpect(t, "missing file", s.run(t, "", nil, "beacon", "publish", "--host", "web-3", "--from-file", "nope.json"), 1, nil,
			[]string{"read the unit state file: open nope.json: no such file or directory; check the path given to --from-file"})
		if _, err := s.store.Get(context.Background(), "state/beacons/web-3.json"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("a refused publish wrote a beacon: %v", err)
		}
	})
}

func TestBeaconPublishSystemdBinary(t *testing.T) {
	stub, err := filepath.Abs("../../reconcile/beacon/testdata/systemctl-stub")
	if err != nil {
		t.Fatal(err)
	}
	forEachSvcStore(t, func(t *testing.T, s svcStore) {
		reg := s.file(t, "reg.yaml", `services:
  - {name: api, host: web-1, unit: api.service, repair: restart, channel: local}
  - {name: ssh, host: web-1, unit: sshd.service, managed: false}
  - {name: ghost, host: web-1, unit: ghost.service, repair: start, channel: local}
  - {name: other, host: web-2, unit: web.service, repair: start, channel: local}
`)
		svcExpect(t, "apply", s.run(t, "", nil, "service", "apply", "-f", reg), 0, nil, nil)

		env := []string{"STADO_SYSTEMCTL=" + stub}
		r := s.run(t, "", env, "beacon", "publish", "--host", "web-1")
		svcExpect(t, "publish from systemd", r, 0, []string{
			"UNIT          ACTIVE  SUB\napi.service   failed  failed\nsshd.service  active  running\n",
			"not found by systemd, so left out (the reconciler counts them as down): ghost.service\n",
		}, nil)
		want := []beacon.Unit{{Unit: "api.service", ActiveState: beacon.Failed, SubState: "failed"}, {Unit: "sshd.service", ActiveState: beacon.Active, SubState: "running"}}
		b := s.beacon(t, "web-1")
		if !reflect.DeepEqual(b.Units, want) {
			t.Errorf("units %+v", b.Units)
		}
		if _, ok := b.Unit("ghost.service"); ok {
			t.Error("a unit systemd does not know must be absent from the beacon")
		}

		// The hidden flag names the binary too.
		svcExpect(t, "--systemctl", s.run(t, "", nil, "beacon", "publish", "--host", "web-2", "--systemctl", stub), 0,
			[]string{"web.service  active  running\n"}, nil)

		svcExpect(t, "systemctl fails", s.run(t, "", append(env, "STUB_MODE=fail"), "beacon", "publish", "--host", "web-1"), 1, nil,
			[]string{"stado: read the unit states from systemd: run " + stub + " show: exit status 1: \"System has not been booted with systemd",
				"check that systemctl works on this host, or pass --state or --from-file"})
		svcExpect(t, "no services on the host", s.run(t, "", env, "beacon", "publish", "--host", "web-9"), 1, nil,
			[]string{"no services are declared on host web-9 in the registry (" + registry.Key + "), so there is no unit to ask systemd about"})
		if b := s.beacon(t, "web-1"); !reflect.DeepEqual(b.Units, want) {
			t.Errorf("a failed publish changed the beacon: %+v", b.Units)
		}
		if strings.Contains(r.Stdout, "\x1b") {
			t.Error("raw escape in output")
		}
	})
}

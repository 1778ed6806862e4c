package reconcile

import (
	"testing"

	"github.com/stado/stado/reports"
)

func TestClassifyTable(t *testing.T) {
	base := evidence{managed: true, host: "web-1", unit: "api.service", beaconFresh: true, unitState: stateFailed,
		endpoint: "http://web-1:8080/healthz", probe: endpointUnreachable, probeDetail: "connection refused", allowed: true, canVerify: true}
	with := func(f func(*evidence)) evidence { e := base; f(&e); return e }
	for _, tc := range []struct {
		name    string
		e       evidence
		want    string
		detail  string
		planned bool
	}{
		{"unmanaged wins over everything", with(func(e *evidence) { e.managed = false; e.beaconFresh = false }), reports.ExternallyManaged, "declared managed: false: autonomy never repairs it", false},
		{"stale beacon", with(func(e *evidence) { e.beaconFresh = false; e.beaconReason = "beacon from web-1 is 10m0s old" }), reports.Unknown, "beacon from web-1 is 10m0s old", false},
		{"active", with(func(e *evidence) { e.unitState = stateActive; e.probe = "" }), reports.Healthy, "", false},
		{"activating", with(func(e *evidence) { e.unitState = stateActivating }), reports.Transitional, "unit is activating: not this tick", false},
		{"reloading", with(func(e *evidence) { e.unitState = stateReloading }), reports.Transitional, "unit is reloading: not this tick", false},
		{"deactivating", with(func(e *evidence) { e.unitState = stateDeactivating }), reports.Transitional, "unit is deactivating: not this tick", false},
		{"unknown state word", with(func(e *evidence) { e.unitState = "exploded" }), reports.Unknown, `beacon reports unit state "exploded", which stado does not know`, false},
		{"down but answering", with(func(e *evidence) { e.probe = endpointObserved; e.probeDetail = "HTTP 200" }), reports.EvidenceConflict, "unit is failed but its endpoint answered (HTTP 200)", false},
		{"down, probe timed out", with(func(e *evidence) { e.probe = endpointUnverified; e.probeDetail = "timeout after 5s" }), reports.EndpointUnverified, "unit is failed but its endpoint could not be verified down (timeout after 5s)", false},
		{"excluded by policy", with(func(e *evidence) { e.allowed = false }), reports.NotAllowed, "the policy's services allow/deny lists exclude web-1:api.service", false},
		{"nothing can verify", with(func(e *evidence) { e.endpoint = ""; e.probe = ""; e.canVerify = false }), reports.DeclarationIncomplete, "nothing can verify api.service on web-1: declare an endpoint or a check action", false},
		{"failed, unreachable", base, "", "", true},
		{"inactive, unreachable", with(func(e *evidence) { e.unitState = stateInactive }), "", "", true},
		{"absent from a fresh beacon", with(func(e *evidence) { e.unitState = stateAbsent }), "", "", true},
		{"failed, no endpoint, check action", with(func(e *evidence) { e.endpoint = ""; e.probe = "" }), "", "", true},
		{"conflict beats not_allowed", with(func(e *evidence) { e.probe = endpointObserved; e.probeDetail = "HTTP 404"; e.allowed = false }), reports.EvidenceConflict, "unit is failed but its endpoint answered (HTTP 404)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, d, p := classify(tc.e)
			if c != tc.want || d != tc.detail || p != tc.planned {
				t.Fatalf("classify = (%q, %q, %v), want (%q, %q, %v)", c, d, p, tc.want, tc.detail, tc.planned)
			}
		})
	}
}

func TestNeedsProbeOnlyWhereTheVerdictMatters(t *testing.T) {
	e := evidence{managed: true, beaconFresh: true, unitState: stateFailed, endpoint: "tcp://h:1"}
	if !e.needsProbe() {
		t.Fatal("a down unit with an endpoint must be probed")
	}
	for _, f := range []func(*evidence){
		func(e *evidence) { e.unitState = stateActive },
		func(e *evidence) { e.managed = false },
		func(e *evidence) { e.beaconFresh = false },
		func(e *evidence) { e.endpoint = "" },
		func(e *evidence) { e.unitState = stateActivating },
	} {
		x := e
		f(&x)
		if x.needsProbe() {
			t.Errorf("%+v must not be probed", x)
		}
	}
}

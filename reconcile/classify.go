package reconcile

import (
	"fmt"

	"github.com/stado/stado/reports"
)

// Unit states a beacon can report (systemd's ActiveState words), plus
// "absent": the unit is missing from a fresh beacon.
const (
	stateActive       = "active"
	stateFailed       = "failed"
	stateInactive     = "inactive"
	stateActivating   = "activating"
	stateDeactivating = "deactivating"
	stateReloading    = "reloading"
	stateMaintenance  = "maintenance"
	stateRefreshing   = "refreshing"
	stateAbsent       = "absent"
)

// Endpoint verdicts (DESIGN §8).
const (
	endpointUnreachable = "unreachable"
	endpointObserved    = "observed"
	endpointUnverified  = "unverified"
	endpointNotProbed   = "not-probed"
)

// evidence is what a tick knows about one declared service before the
// gates: whether the host's beacon is fresh, the unit's state in it, and
// (when the unit is down) the endpoint probe's verdict.
type evidence struct {
	managed      bool
	host, unit   string
	beaconFresh  bool
	beaconReason string // why the beacon cannot be used, when !beaconFresh
	unitState    string
	endpoint     string // declared endpoint, "" if none
	probe        string // endpoint verdict; "" when not probed
	probeDetail  string
	allowed      bool // the policy's services allow/deny admits host:unit
	canVerify    bool // an endpoint or the channel's check action
}

// down reports whether a unit state is one a repair is planned for.
func down(state string) bool {
	return state == stateFailed || state == stateInactive || state == stateAbsent
}

// needsProbe reports whether the classification of this evidence depends on
// the endpoint's verdict: only a managed service on a fresh beacon whose unit
// is down. Every other service is decided by its declaration and its beacon,
// so a tick probes no more than it must.
func (e evidence) needsProbe() bool {
	return e.managed && e.beaconFresh && down(e.unitState) && e.endpoint != ""
}

// classify applies the table of DESIGN §8, first match wins. planned is true
// when a repair is planned and the gates decide the rest; otherwise the
// classification and its detail are final.
func classify(e evidence) (classification, detail string, planned bool) {
	switch {
	case !e.managed:
		return reports.ExternallyManaged, "declared managed: false: autonomy never repairs it", false
	case !e.beaconFresh:
		return reports.Unknown, e.beaconReason, false
	}
	switch e.unitState {
	case stateActive:
		return reports.Healthy, "", false
	case stateActivating, stateDeactivating, stateReloading, stateMaintenance, stateRefreshing:
		return reports.Transitional, fmt.Sprintf("unit is %s: not this tick", e.unitState), false
	case stateFailed, stateInactive, stateAbsent:
	default:
		return reports.Unknown, fmt.Sprintf("beacon reports unit state %q, which stado does not know", e.unitState), false
	}
	verdict := e.probe
	if e.endpoint == "" {
		verdict = endpointNotProbed
	}
	switch verdict {
	case endpointObserved:
		return reports.EvidenceConflict, fmt.Sprintf("unit is %s but its endpoint answered (%s)", e.unitState, e.probeDetail), false
	case endpointUnverified:
		return reports.EndpointUnverified, fmt.Sprintf("unit is %s but its endpoint could not be verified down (%s)", e.unitState, e.probeDetail), false
	case endpointUnreachable, endpointNotProbed:
	default:
		return reports.EndpointUnverified, fmt.Sprintf("unit is %s and its endpoint was not probed", e.unitState), false
	}
	if !e.allowed {
		return reports.NotAllowed, "the policy's services allow/deny lists exclude " + e.host + ":" + e.unit, false
	}
	if !e.canVerify {
		return reports.DeclarationIncomplete, fmt.Sprintf("nothing can verify %s on %s: declare an endpoint or a check action", e.unit, e.host), false
	}
	return "", "", true
}

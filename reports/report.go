// Package reports owns the reconciliation report (DESIGN §10): its schema,
// its persistence (one immutable run report per tick, written
// create-if-absent, then latest.json), its retention, and its rendering for
// `stado optimize status` and `history`.
package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Object layout.
const (
	LatestKey  = "state/autonomy/services/latest.json"
	RunsPrefix = "state/autonomy/services/runs/"
)

// SchemaVersion is the report schema this package writes.
const SchemaVersion = 1

// The classifications of DESIGN §8, in the order the table lists them.
const (
	ExternallyManaged     = "externally_managed"
	Unknown               = "unknown"
	Healthy               = "healthy"
	Transitional          = "transitional"
	EvidenceConflict      = "evidence_conflict"
	EndpointUnverified    = "endpoint_unverified"
	NotAllowed            = "not_allowed"
	DeclarationIncomplete = "declaration_incomplete"
	Planned               = "planned"
	ActionLimit           = "action_limit"
	ControlBlocked        = "control_blocked"
	LeaseBlocked          = "lease_blocked"
	Recovered             = "recovered"
	Reconciled            = "reconciled"
	RepairFailed          = "repair_failed"
)

// Classifications lists every classification.
var Classifications = []string{ExternallyManaged, Unknown, Healthy, Transitional, EvidenceConflict, EndpointUnverified,
	NotAllowed, DeclarationIncomplete, Planned, ActionLimit, ControlBlocked, LeaseBlocked, Recovered, Reconciled, RepairFailed}

// Blocked reports whether a classification counts as blocked: never as
// failed, and not against the tick's action budget.
func Blocked(c string) bool { return c == LeaseBlocked || c == ActionLimit || c == ControlBlocked }

// Report is one tick's reconciliation report.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	RunID         string    `json:"run_id"`
	DecisionID    string    `json:"decision_id"`
	CreatedAt     time.Time `json:"created_at"`
	FinishedAt    time.Time `json:"finished_at"`
	Reconciler    string    `json:"reconciler"`
	Mode          string    `json:"mode"`
	PolicyVersion string    `json:"policy_version"`
	Paused        bool      `json:"paused"`
	Breaker       string    `json:"breaker"`
	// DryRun marks a tick that decided but executed nothing and took no
	// lease (`optimize run --dry-run`); such a report is never stored.
	DryRun   bool           `json:"dry_run,omitempty"`
	Summary  map[string]int `json:"summary"`
	Outcomes []Outcome      `json:"outcomes"`
}

// Outcome is one declared service's verdict in a tick.
type Outcome struct {
	Host           string `json:"host"`
	Service        string `json:"service"`
	Unit           string `json:"unit"`
	BeaconState    string `json:"beacon_state"`
	EndpointState  string `json:"endpoint_state"`
	Classification string `json:"classification"`
	Action         string `json:"action,omitempty"`
	Changed        bool   `json:"changed"`
	Detail         string `json:"detail,omitempty"`
	DurationMS     int64  `json:"duration_ms"`
}

// Finalize sorts the outcomes by host, then unit, and computes the summary:
// the number of outcomes per classification (absent = 0) plus "services".
func (r *Report) Finalize() {
	sort.Slice(r.Outcomes, func(i, j int) bool {
		a, b := r.Outcomes[i], r.Outcomes[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Unit < b.Unit
	})
	r.Summary = map[string]int{"services": len(r.Outcomes)}
	for _, o := range r.Outcomes {
		r.Summary[o.Classification]++
	}
}

// Count returns how many outcomes have classification c.
func (r *Report) Count(c string) int { return r.Summary[c] }

// BlockedCount and FailedCount aggregate the summary as operators read it.
func (r *Report) BlockedCount() int {
	return r.Summary[LeaseBlocked] + r.Summary[ActionLimit] + r.Summary[ControlBlocked]
}

// FailedCount is the number of repair_failed outcomes.
func (r *Report) FailedCount() int { return r.Summary[RepairFailed] }

// RunID formats a run id from the tick's start on the store clock:
// 2026-11-30T12-00-00.123456789Z. Byte order is chronological order.
func RunID(start time.Time) string {
	return start.UTC().Format("2006-01-02T15-04-05.000000000Z")
}

// DecisionID is the decision id of a run, carried by the leases it takes.
func DecisionID(runID string) string { return "service-reconcile-" + runID }

// MaxSize is the largest stored report accepted when reading.
const MaxSize = 256 << 20

// ErrCorrupt marks a stored report that is not a valid report.
var ErrCorrupt = errors.New("corrupt report")

// Parse decodes and checks a stored report; it never panics.
func Parse(b []byte) (*Report, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrCorrupt, len(b), MaxSize)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch {
	case r.SchemaVersion != SchemaVersion:
		return nil, fmt.Errorf("%w: schema_version %d, want %d", ErrCorrupt, r.SchemaVersion, SchemaVersion)
	case r.RunID == "":
		return nil, fmt.Errorf("%w: no run_id", ErrCorrupt)
	case r.CreatedAt.IsZero():
		return nil, fmt.Errorf("%w: no created_at", ErrCorrupt)
	}
	if r.Summary == nil {
		r.Summary = map[string]int{}
	}
	return &r, nil
}

// Marshal encodes a report as stored: indented JSON, for operators reading
// the store with ordinary tools. The bytes are json.MarshalIndent's with two
// spaces, plus a newline (see encode.go).
func (r *Report) Marshal() []byte {
	b, err := r.marshal()
	if err != nil {
		panic(err) // strings, ints, bools and times always marshal
	}
	return b
}

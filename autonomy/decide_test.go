package autonomy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

// loadPolicy stores doc (nil: none) and loads it as a reconciler would.
func loadPolicy(t *testing.T, doc string) *policy.Loaded {
	t.Helper()
	mem, _ := newMem()
	if doc != "" {
		if _, err := mem.Put(context.Background(), policy.Key, []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := policy.Load(context.Background(), mem)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDecide is every reason in the order the gate checks them, with the
// exact details of DESIGN §8.
func TestDecide(t *testing.T) {
	var (
		openUntil = t0.Add(15 * time.Minute)
		enforce   = loadPolicy(t, "policy_version: \"p-1\"\nmode: enforce-safe\n")
		report    = loadPolicy(t, "policy_version: \"p-1\"\nmode: report\n")
		paused    = loadPolicy(t, "policy_version: \"p-1\"\nmode: enforce-owned\npause: true\n")
		invalid   = loadPolicy(t, "policy_version: \"p-1\"\nmode: turbo\n")
		none      = loadPolicy(t, "")
	)
	ctl := func(paused bool, br breaker.State) *Stored {
		return &Stored{Exists: true, Version: "v", Control: Control{SchemaVersion: 1, EmergencyPaused: paused,
			Reason: "db migration", ChangedAt: t0, ChangedBy: "alice@ops-1", Breaker: br}}
	}
	closed := ctl(false, breaker.State{ConsecutiveFailures: 2, CooldownSeconds: 900})
	open := ctl(false, breaker.State{ConsecutiveFailures: 4, OpenUntil: &openUntil, CooldownSeconds: 900, Trips: 1})
	unreadable := &Stored{Exists: true, Version: "v", Control: failClosed(), Invalid: ErrInvalidControl}

	for _, tc := range []struct {
		name      string
		pol       *policy.Loaded
		ctl       *Stored
		now       time.Time
		allowed   bool
		trial     bool
		reason    Reason
		detail    string // for action "restart"
		explains  []string
		wantPhase breaker.Phase
	}{
		{name: "invalid policy first, even with an unreadable control state", pol: invalid, ctl: unreadable, now: t0,
			reason: ReasonPolicyInvalid, detail: DetailPolicyInvalid,
			explains: []string{"is invalid", "stado optimize policy apply -f FILE --expect-version"}},
		{name: "nil policy fails closed", pol: nil, ctl: closed, now: t0, reason: ReasonPolicyInvalid, detail: DetailPolicyInvalid},
		{name: "unreadable control before report mode", pol: report, ctl: unreadable, now: t0,
			reason: ReasonControlInvalid, detail: DetailControlInvalid, explains: []string{"unreadable", "stado optimize resume"}},
		{name: "nil control fails closed", pol: enforce, ctl: nil, now: t0, reason: ReasonControlInvalid, detail: DetailControlInvalid},
		{name: "report mode before pause", pol: report, ctl: ctl(true, open.Control.Breaker), now: t0,
			reason: ReasonReportMode, detail: "report mode: restart was planned but not executed", explains: []string{"report mode"}},
		{name: "no stored policy is the report-only default", pol: none, ctl: closed, now: t0,
			reason: ReasonReportMode, detail: "report mode: restart was planned but not executed", explains: []string{"built-in default"}},
		{name: "policy pause", pol: paused, ctl: closed, now: t0, wantPhase: breaker.Closed,
			reason: ReasonPolicyPause, detail: "mutation blocked by autonomy emergency pause", explains: []string{"pause: true"}},
		{name: "emergency pause, with the policy's pause too", pol: paused, ctl: ctl(true, breaker.State{}), now: t0,
			reason: ReasonEmergencyPause, detail: "mutation blocked by autonomy emergency pause",
			explains: []string{`reason: "db migration"`, `"alice@ops-1"`, "2026-11-30T12:00:00Z", "stado optimize resume", "pause: true"}},
		{name: "emergency pause before an open breaker", pol: enforce, ctl: ctl(true, open.Control.Breaker), now: t0, wantPhase: breaker.Open,
			reason: ReasonEmergencyPause, detail: "mutation blocked by autonomy emergency pause"},
		{name: "breaker open", pol: enforce, ctl: open, now: t0, wantPhase: breaker.Open,
			reason: ReasonBreakerOpen, detail: "mutation blocked by open circuit breaker until 2026-11-30T12:15:00Z",
			explains: []string{"open until 2026-11-30T12:15:00Z after 4 consecutive failed repairs", "stado optimize breaker reset"}},
		{name: "breaker still open at exactly open_until", pol: enforce, ctl: open, now: openUntil, wantPhase: breaker.Open,
			reason: ReasonBreakerOpen, detail: "mutation blocked by open circuit breaker until 2026-11-30T12:15:00Z"},
		{name: "half-open one nanosecond after: allowed as the trial", pol: enforce, ctl: open, now: openUntil.Add(time.Nanosecond),
			allowed: true, trial: true, reason: ReasonNone, wantPhase: breaker.HalfOpen,
			explains: []string{"one trial repair is admitted fleet-wide", "re-opens it for 30m"}},
		{name: "closed: allowed", pol: enforce, ctl: closed, now: t0, allowed: true, reason: ReasonNone, wantPhase: breaker.Closed,
			explains: []string{`policy "p-1" (mode enforce-safe)`, "2 of 4 consecutive failures"}},
		{name: "fresh fleet: allowed", pol: enforce, ctl: &Stored{Control: zeroControl()}, now: t0, allowed: true, reason: ReasonNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.pol, tc.ctl, exact(tc.now))
			if d.Allowed != tc.allowed || d.NeedsTrial != tc.trial || d.Reason != tc.reason {
				t.Fatalf("Decide = allowed %v, trial %v, reason %v; want %v, %v, %v\n%s",
					d.Allowed, d.NeedsTrial, d.Reason, tc.allowed, tc.trial, tc.reason, d.Explanation)
			}
			if got := d.Detail("restart"); got != tc.detail {
				t.Errorf("Detail = %q, want %q", got, tc.detail)
			}
			if tc.wantPhase != 0 && d.Phase != tc.wantPhase {
				t.Errorf("Phase = %v, want %v", d.Phase, tc.wantPhase)
			}
			if d.Explanation == "" {
				t.Error("no explanation")
			}
			for _, want := range tc.explains {
				if !strings.Contains(d.Explanation, want) {
					t.Errorf("explanation %q does not contain %q", d.Explanation, want)
				}
			}
		})
	}
}

func TestDecideExplanationsAreExact(t *testing.T) {
	enforce := loadPolicy(t, "policy_version: \"p-1\"\nmode: enforce-safe\n")
	openUntil := t0.Add(15 * time.Minute)
	lastErr := "ssh: connect to host web-1 port 22: \x1b[31mrefused"
	for _, tc := range []struct {
		name string
		c    Control
		want string
	}{
		{"paused", Control{EmergencyPaused: true, Reason: "db migration", ChangedBy: "alice@ops-1", ChangedAt: t0.Add(500 * time.Millisecond)},
			`autonomy is under emergency pause (reason: "db migration"; last changed by "alice@ops-1" at 2026-11-30T12:00:00.5Z), ` +
				"so no repair runs; to resume, run `stado optimize resume`"},
		{"paused with a hostile reason", Control{EmergencyPaused: true, Reason: "\x1b[2J\r"},
			`autonomy is under emergency pause (reason: "\x1b[2J\r"), so no repair runs; to resume, run ` + "`stado optimize resume`"},
		{"open", Control{Breaker: breaker.State{ConsecutiveFailures: 4, OpenUntil: &openUntil, LastError: &lastErr}},
			`the circuit breaker is open until 2026-11-30T12:15:00Z after 4 consecutive failed repairs ` +
				`(last error: "ssh: connect to host web-1 port 22: \x1b[31mrefused"), so no repair runs; ` +
				"after that one trial repair is admitted fleet-wide, whose success closes it and whose failure re-opens it for up to 4h; " +
				"to close it now, run `stado optimize breaker reset`"},
		{"half-open", Control{Breaker: breaker.State{ConsecutiveFailures: 4, OpenUntil: &openUntil, CooldownSeconds: 900}},
			`autonomy may repair under policy "p-1" (mode enforce-safe), one trial at a time: the circuit breaker's cooldown ended at ` +
				"2026-11-30T12:15:00Z, so one trial repair is admitted fleet-wide; its success closes the breaker, its failure re-opens it for 30m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.SchemaVersion = 1
			now := t0
			if tc.name == "half-open" {
				now = openUntil.Add(time.Second)
			}
			d := Decide(enforce, &Stored{Control: tc.c}, exact(now))
			if d.Explanation != tc.want {
				t.Errorf("explanation\n got %s\nwant %s", d.Explanation, tc.want)
			}
		})
	}
}

func TestReasonStrings(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonNone: "none", ReasonPolicyInvalid: "policy-invalid", ReasonControlInvalid: "control-invalid",
		ReasonReportMode: "report-mode", ReasonPolicyPause: "policy-pause", ReasonEmergencyPause: "emergency-pause",
		ReasonBreakerOpen: "breaker-open", Reason(99): "Reason(99)",
	} {
		if r.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(r), r.String(), want)
		}
	}
}

// TestDecideJudgesOnTheEarliestStoreTime: a store clock whose uncertainty
// straddles open_until keeps the breaker open.
func TestDecideJudgesOnTheEarliestStoreTime(t *testing.T) {
	openUntil := t0.Add(15 * time.Minute)
	ctl := &Stored{Control: Control{SchemaVersion: 1, Breaker: breaker.State{ConsecutiveFailures: 4, OpenUntil: &openUntil}}}
	d := Decide(enforcing(t), ctl, objstore.TimeBounds{Earliest: openUntil.Add(-time.Second), Latest: openUntil.Add(time.Second)})
	if d.Allowed || d.Reason != ReasonBreakerOpen {
		t.Fatalf("decision %+v, want the breaker still open", d)
	}
}

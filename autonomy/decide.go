package autonomy

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

// Reason is why the gate refuses a mutation.
type Reason int

// The reasons, in the order Decide checks them.
const (
	// ReasonNone: nothing refuses; the mutation may proceed (perhaps as the
	// breaker's trial, see Decision.NeedsTrial).
	ReasonNone Reason = iota
	// ReasonPolicyInvalid: the stored policy failed validation.
	ReasonPolicyInvalid
	// ReasonControlInvalid: the stored control state is unreadable.
	ReasonControlInvalid
	// ReasonReportMode: the policy (or the built-in default) is in report
	// mode: repairs are planned, never executed.
	ReasonReportMode
	// ReasonPolicyPause: the policy says pause: true.
	ReasonPolicyPause
	// ReasonEmergencyPause: an operator paused autonomy in the control state.
	ReasonEmergencyPause
	// ReasonBreakerOpen: the circuit breaker is open.
	ReasonBreakerOpen
)

func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonPolicyInvalid:
		return "policy-invalid"
	case ReasonControlInvalid:
		return "control-invalid"
	case ReasonReportMode:
		return "report-mode"
	case ReasonPolicyPause:
		return "policy-pause"
	case ReasonEmergencyPause:
		return "emergency-pause"
	case ReasonBreakerOpen:
		return "breaker-open"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Details of a planned repair the gate refused (DESIGN §8 where it gives
// them; the invalid-state ones are this package's).
const (
	// DetailPaused is the detail for both the policy's and the control
	// state's pause.
	DetailPaused = "mutation blocked by autonomy emergency pause"
	// DetailPolicyInvalid is the detail when the stored policy is invalid.
	DetailPolicyInvalid = "mutation blocked by an invalid stored policy"
	// DetailControlInvalid is the detail when the control state is
	// unreadable.
	DetailControlInvalid = "mutation blocked by an unreadable control state"
	// DetailControlBlocked is the detail of DESIGN §8's control_blocked:
	// the re-read of the control state just before a repair refused it.
	DetailControlBlocked = "autonomy pause or circuit breaker became active"
)

// ReportModeDetail is the detail of a repair planned in report mode.
func ReportModeDetail(action string) string {
	return fmt.Sprintf("report mode: %s was planned but not executed", action)
}

// BreakerOpenDetail is the detail of a repair refused by an open breaker.
func BreakerOpenDetail(openUntil time.Time) string {
	return "mutation blocked by open circuit breaker until " + formatTime(openUntil)
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Decision is the gate's answer.
type Decision struct {
	// Allowed: the caller may mutate now (under its service lease, and, when
	// NeedsTrial, only while holding the breaker's trial lease).
	Allowed bool
	// NeedsTrial: the breaker is half-open; the mutation is the one trial
	// admitted fleet-wide and needs the lease on breaker.TrialSubject
	// (breaker.TryTakeTrial). Without that lease, do not mutate.
	NeedsTrial bool
	// Reason is why not (ReasonNone when Allowed).
	Reason Reason
	// Phase is the breaker's phase at the decision's time; Closed when the
	// decision stopped before the breaker was read (an invalid policy or an
	// unreadable control state, whose breaker is unknown).
	Phase breaker.Phase
	// OpenUntil is the breaker's open_until, or nil.
	OpenUntil *time.Time
	// Explanation is one operator-facing sentence for status: what is in
	// effect, who did it and when, and what to do. Stored text in it
	// (reasons, error texts) is quoted with its control characters
	// escaped.
	Explanation string
}

// Detail is the outcome detail of a planned repair of action under this
// decision (DESIGN §8), or "" when the decision allows it.
func (d Decision) Detail(action string) string {
	switch d.Reason {
	case ReasonReportMode:
		return ReportModeDetail(action)
	case ReasonPolicyPause, ReasonEmergencyPause:
		return DetailPaused
	case ReasonBreakerOpen:
		if d.OpenUntil != nil {
			return BreakerOpenDetail(*d.OpenUntil)
		}
	case ReasonPolicyInvalid:
		return DetailPolicyInvalid
	case ReasonControlInvalid:
		return DetailControlInvalid
	}
	return ""
}

// Decide is THE gate: may autonomy mutate now, given the policy in effect,
// the control state and a reading of the store's clock. It checks, in order:
// an invalid policy, an unreadable control state, report mode, a pause (the
// policy's or the control state's), an open breaker; a half-open breaker is
// allowed with NeedsTrial. Anything it cannot read refuses (fail closed).
func Decide(pol *policy.Loaded, ctl *Stored, now objstore.TimeBounds) Decision {
	if pol == nil || pol.Policy == nil {
		return Decision{Reason: ReasonPolicyInvalid,
			Explanation: "no policy was loaded, so autonomy makes no repair (a bug in the caller: load it with policy.Load)"}
	}
	if pol.Invalid != nil {
		return Decision{Reason: ReasonPolicyInvalid, Explanation: pol.Refusal()}
	}
	if ctl == nil {
		return Decision{Reason: ReasonControlInvalid,
			Explanation: "no control state was loaded, so autonomy makes no repair (a bug in the caller: load it with autonomy.Load)"}
	}
	if ctl.Invalid != nil {
		return Decision{Reason: ReasonControlInvalid, Explanation: fmt.Sprintf(
			"the control state at %s is unreadable (%v), so autonomy makes no repair; %s", Key, ctl.Invalid, rewriteHint)}
	}
	c := ctl.Control
	d := Decision{Phase: c.Breaker.Phase(now), OpenUntil: c.Breaker.OpenUntil}
	p := pol.Policy
	set := breaker.SettingsFrom(p)
	switch {
	case pol.Default || !p.Mode.Mutates():
		d.Reason, d.Explanation = ReasonReportMode, pol.Refusal()
	case c.EmergencyPaused:
		d.Reason, d.Explanation = ReasonEmergencyPause, pauseExplanation(c, p.Pause)
	case p.Pause:
		d.Reason, d.Explanation = ReasonPolicyPause, pol.Refusal()
	case d.Phase == breaker.Open:
		d.Reason, d.Explanation = ReasonBreakerOpen, openExplanation(c.Breaker, set)
	case d.Phase == breaker.HalfOpen:
		d.Allowed, d.NeedsTrial = true, true
		reopen := c.Breaker.RecordFailure(set, now.Earliest, "").CooldownSeconds
		d.Explanation = fmt.Sprintf("autonomy may repair under policy %s (mode %s), one trial at a time: "+
			"the circuit breaker's cooldown ended at %s, so one trial repair is admitted fleet-wide; "+
			"its success closes the breaker, its failure re-opens it for %s",
			quote(p.PolicyVersion), p.Mode, formatTime(*c.Breaker.OpenUntil), seconds(reopen))
	default:
		d.Allowed = true
		d.Explanation = fmt.Sprintf("autonomy may repair under policy %s (mode %s): no pause is in effect "+
			"and the circuit breaker is closed (%d of %d consecutive failures)",
			quote(p.PolicyVersion), p.Mode, c.Breaker.ConsecutiveFailures, set.Failures)
	}
	return d
}

func pauseExplanation(c Control, policyPause bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "autonomy is under emergency pause (reason: %s", quote(c.Reason))
	if c.ChangedBy != "" {
		fmt.Fprintf(&b, "; last changed by %s", quote(c.ChangedBy))
		if !c.ChangedAt.IsZero() {
			fmt.Fprintf(&b, " at %s", formatTime(c.ChangedAt))
		}
	}
	b.WriteString("), so no repair runs; to resume, run `stado optimize resume`")
	if policyPause {
		b.WriteString("; the policy pauses autonomy too (pause: true): set pause: false and apply it to lift that")
	}
	return b.String()
}

func openExplanation(s breaker.State, set breaker.Settings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the circuit breaker is open until %s after %d consecutive failed repairs",
		formatTime(*s.OpenUntil), s.ConsecutiveFailures)
	if s.LastError != nil {
		fmt.Fprintf(&b, " (last error: %s)", quote(*s.LastError))
	}
	fmt.Fprintf(&b, ", so no repair runs; after that one trial repair is admitted fleet-wide, "+
		"whose success closes it and whose failure re-opens it for up to %s; "+
		"to close it now, run `stado optimize breaker reset`", seconds(int(set.MaxCooldown/time.Second)))
	return b.String()
}

// seconds renders a whole number of seconds the way operators read them:
// 900 → "15m", 14400 → "4h", 5400 → "1h30m".
func seconds(n int) string {
	s := (time.Duration(n) * time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// quote renders stored text for a sentence: quoted, control characters
// escaped, shortened.
func quote(s string) string {
	const maxRunes = 120
	if utf8.RuneCountInString(s) > maxRunes {
		return fmt.Sprintf("%q…", string([]rune(s)[:maxRunes]))
	}
	return fmt.Sprintf("%q", s)
}

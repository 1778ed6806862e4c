package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/breaker"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/reconcile/channel"
	"github.com/stado/stado/reconcile/probe"
	"github.com/stado/stado/reports"
)

// repair takes one planned repair through the gates that follow the tick
// start's (action budget, control state re-read, breaker trial, service
// lease), re-checks the service under the lease, runs the repair fenced by
// the lease, verifies it, releases the lease and feeds the breaker.
func (t *tick) repair(ctx context.Context, pr *plannedRepair, b *budget) reports.Outcome {
	o := pr.outcome
	svc := pr.svc
	ctx, end := t.r.cfg.Telemetry.StartSpan(ctx, "repair", "subject", svc.Subject(), "action", svc.Repair)
	defer end()
	started := t.r.cfg.Clock.Now()
	finish := func(class, detail string) reports.Outcome {
		o.Classification, o.Detail = class, detail
		o.DurationMS = t.r.cfg.Clock.Now().Sub(started).Milliseconds()
		t.r.cfg.Logger.Info("repair decided", "subject", svc.Subject(), "action", svc.Repair,
			"classification", class, "changed", o.Changed, "detail", detail, "duration_ms", o.DurationMS)
		return o
	}
	// failed ends a repair that did not run: a failure, unless the tick is
	// being stopped, which is why the step failed.
	failed := func(detail string) reports.Outcome {
		if ctx.Err() != nil {
			return finish(reports.ControlBlocked, DetailShuttingDown)
		}
		return finish(reports.RepairFailed, detail)
	}
	if ctx.Err() != nil {
		return finish(reports.ControlBlocked, DetailShuttingDown)
	}
	if !b.reserve() {
		return finish(reports.ActionLimit, DetailActionLimit)
	}
	spent := false
	defer func() {
		if !spent {
			b.giveBack()
		}
	}()

	ch, err := t.r.channel(svc.Channel)
	if err != nil {
		return failed(fmt.Sprintf("the %s channel cannot run: %v", svc.Channel, err))
	}
	store := t.r.cfg.Store
	p := t.pol.Policy
	ttl := time.Duration(p.DecisionTTLSeconds) * time.Second
	set := breaker.SettingsFrom(p)

	// Re-read the control state: a pause or an open breaker since the tick
	// began stops every repair not yet started.
	ctl, err := autonomy.Load(ctx, store)
	if err != nil {
		return failed(fmt.Sprintf("could not re-read the control state before the repair: %v", err))
	}
	now, err := store.Now(ctx)
	if err != nil {
		return failed(fmt.Sprintf("could not read the store clock before the repair: %v", err))
	}
	d := autonomy.Decide(t.pol, ctl, now)
	if !d.Allowed {
		return finish(reports.ControlBlocked, autonomy.DetailControlBlocked)
	}
	if d.NeedsTrial {
		trial, err := breaker.TryTakeTrial(ctx, t.r.leases, ttl, t.report.DecisionID)
		switch {
		case lease.IsHeld(err):
			return finish(reports.ControlBlocked, DetailTrialElsewhere)
		case err != nil:
			return failed(fmt.Sprintf("could not take the breaker's trial lease: %v", err))
		}
		defer t.release(context.WithoutCancel(ctx), trial)
		// The trial may have been decided while this one waited: re-read.
		if ctl, err = autonomy.Load(ctx, store); err != nil {
			return failed(fmt.Sprintf("could not re-read the control state before the trial repair: %v", err))
		}
		if now, err = store.Now(ctx); err != nil {
			return failed(fmt.Sprintf("could not read the store clock before the trial repair: %v", err))
		}
		if d = autonomy.Decide(t.pol, ctl, now); !d.Allowed {
			return finish(reports.ControlBlocked, autonomy.DetailControlBlocked)
		}
	}

	grant, err := t.take(ctx, svc.Subject(), ttl)
	switch {
	case lease.IsHeld(err):
		return finish(reports.LeaseBlocked, DetailLeaseBlocked)
	case err != nil:
		return failed(fmt.Sprintf("could not take the lease on %s: %v", svc.Subject(), err))
	}
	// From here the lease is ours: whatever happens, it is released by its
	// token, even if the tick is being cancelled.
	bg := context.WithoutCancel(ctx)
	released := false
	release := func() lease.ReleaseResult {
		released = true
		return t.release(bg, grant)
	}
	defer func() {
		if !released {
			release()
		}
	}()

	allowance := time.Duration(p.FenceAllowanceSeconds) * time.Second
	fence, err := t.r.leases.Fence(bg, grant, allowance)
	if err != nil {
		return failed(fmt.Sprintf("could not mint the fence for %s: %v", svc.Subject(), err))
	}
	req := channel.Request{
		Host: svc.Host, Unit: svc.Unit, Service: svc.Name, Action: svc.Repair,
		Lease:    channel.LeaseInfo{Token: grant.Token, ExpiresAt: grant.ExpiresAt, FenceInstant: fence.Instant},
		Deadline: fence.Deadline,
	}

	// Fresh evidence under the lease: another reconciler may have repaired
	// the service since this tick read its evidence.
	switch up, why := t.recheck(bg, ch, req, svc.Endpoint); up {
	case recheckUp:
		return finish(reports.Recovered, DetailRecovered)
	case recheckUnknown:
		return finish(reports.EndpointUnverified, "re-check under the lease could not prove the service still down ("+why+"); nothing ran")
	}

	if ctx.Err() != nil {
		return finish(reports.ControlBlocked, DetailShuttingDown)
	}
	// The repair runs to its fence even if the tick is cancelled: a repair
	// is never abandoned halfway by stado itself.
	b.spend()
	spent = true
	runCtx, runEnd := t.r.cfg.Telemetry.StartSpan(bg, "channel.run", "channel", ch.Name())
	res, runErr := ch.Run(runCtx, req)
	runEnd()
	executed := res.Started && (runErr == nil || errors.Is(runErr, channel.ErrFailed) || errors.Is(runErr, channel.ErrFenced))
	o.Changed = res.Started
	t.r.cfg.Telemetry.RepairDuration(svc.Repair, res.Duration, runErr == nil)

	var verified bool
	var detail string
	if runErr != nil {
		detail = runErr.Error()
	} else {
		vctx, vend := t.r.cfg.Telemetry.StartSpan(bg, "verify")
		verified, detail = t.verify(vctx, ch, req, svc.Endpoint, res.Duration, fence.Deadline)
		vend()
	}

	rel := release()
	class := reports.Reconciled
	if !verified {
		class = reports.RepairFailed
	}
	if rel == lease.OwnershipChanged {
		class, detail = reports.RepairFailed, DetailOwnershipChanged
		verified = false
		executed = true
	}
	if executed {
		if _, err := autonomy.RecordRepair(bg, store, set, verified, detail); err != nil {
			t.r.cfg.Logger.Error("recording the repair in the circuit breaker failed", "subject", svc.Subject(), "err", err)
		}
	}
	return finish(class, detail)
}

// take takes the service lease, measured.
func (t *tick) take(ctx context.Context, subject string, ttl time.Duration) (*lease.Grant, error) {
	ctx, end := t.r.cfg.Telemetry.StartSpan(ctx, "lease.take", "subject", subject)
	defer end()
	g, err := t.r.leases.TryTake(ctx, subject, ttl, t.report.DecisionID)
	switch {
	case err == nil:
		t.r.cfg.Telemetry.LeaseResult("taken")
	case lease.IsHeld(err):
		t.r.cfg.Telemetry.LeaseResult("held")
	default:
		t.r.cfg.Telemetry.LeaseResult("error")
	}
	return g, err
}

// release releases a grant by its token and reports the answer.
func (t *tick) release(ctx context.Context, g *lease.Grant) lease.ReleaseResult {
	ctx, end := t.r.cfg.Telemetry.StartSpan(ctx, "lease.release", "subject", g.SubjectID)
	defer end()
	res, err := t.r.leases.Release(ctx, g)
	if err != nil {
		t.r.cfg.Logger.Error("releasing a lease failed; it ends at its instant", "subject", g.SubjectID, "expires_at", g.ExpiresAt, "err", err)
		t.r.cfg.Telemetry.LeaseResult("release-error")
		return lease.NotHeld
	}
	t.r.cfg.Telemetry.LeaseResult(res.String())
	return res
}

type recheckResult int

const (
	recheckDown recheckResult = iota
	recheckUp
	recheckUnknown
)

// recheck looks at the service once more, under the lease: by its endpoint,
// or by the channel's check action.
func (t *tick) recheck(ctx context.Context, ch channel.Channel, req channel.Request, endpoint string) (recheckResult, string) {
	timeout := time.Duration(t.pol.Policy.Evidence.ProbeTimeoutSeconds) * time.Second
	if endpoint != "" {
		res := t.r.cfg.Prober.Probe(ctx, endpoint, timeout)
		switch res.Verdict {
		case probe.Observed:
			return recheckUp, res.Detail
		case probe.Unreachable:
			return recheckDown, res.Detail
		default:
			return recheckUnknown, res.Detail
		}
	}
	check := req
	check.Action = channel.ActionCheck
	_, err := ch.Run(ctx, check)
	switch {
	case err == nil:
		return recheckUp, "check passed"
	case errors.Is(err, channel.ErrFailed):
		return recheckDown, "check failed"
	default:
		return recheckUnknown, err.Error()
	}
}

// verify waits for the service to come back: its endpoint observed, or its
// check action passing, until verify_timeout_seconds or the fence deadline.
func (t *tick) verify(ctx context.Context, ch channel.Channel, req channel.Request, endpoint string, ran time.Duration, fence time.Time) (bool, string) {
	p := t.pol.Policy
	clk := t.r.cfg.Clock
	start := clk.Now()
	limit := time.Duration(p.Evidence.VerifyTimeoutSeconds) * time.Second
	deadline := start.Add(limit)
	if fence.Before(deadline) {
		deadline = fence
	}
	probeTimeout := time.Duration(p.Evidence.ProbeTimeoutSeconds) * time.Second
	last := ""
	for {
		if endpoint != "" {
			res := t.r.cfg.Prober.Probe(ctx, endpoint, probeTimeout)
			if res.Verdict == probe.Observed {
				return true, fmt.Sprintf("%s ran in %s; %s answered after %s (%s)", req.Action, ran.Round(time.Millisecond), endpoint,
					clk.Now().Sub(start).Round(time.Millisecond), res.Detail)
			}
			last = res.Detail
		} else {
			check := req
			check.Action = channel.ActionCheck
			if _, err := ch.Run(ctx, check); err == nil {
				return true, fmt.Sprintf("%s ran in %s; check passed after %s", req.Action, ran.Round(time.Millisecond), clk.Now().Sub(start).Round(time.Millisecond))
			} else {
				last = err.Error()
			}
		}
		wait := t.r.cfg.VerifyInterval
		if left := deadline.Sub(clk.Now()); left < wait {
			if left <= 0 {
				return false, fmt.Sprintf("%s ran in %s, but %s on %s did not come back within %s (last: %s)", req.Action, ran.Round(time.Millisecond),
					req.Unit, req.Host, clk.Now().Sub(start).Round(time.Second), last)
			}
			wait = left
		}
		if err := clk.Sleep(ctx, wait); err != nil {
			return false, fmt.Sprintf("verification of %s on %s was interrupted: %v", req.Unit, req.Host, err)
		}
	}
}

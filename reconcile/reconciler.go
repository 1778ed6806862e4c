// Package reconcile owns the reconciliation tick: it loads the policy, the
// control state and the registry, reads every host's beacon once, probes
// endpoints where the verdict matters, classifies every declared service
// (DESIGN §8), admits each planned repair through the gates in order (mode,
// pause, breaker, action budget, a re-read of the control state, the
// breaker's trial lease, the service lease), runs it through its channel
// fenced by the lease, verifies it, releases the lease, feeds the breaker,
// and writes the reconciliation report.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/channel"
	"github.com/stado/stado/reconcile/probe"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// Holder is the lease holder every reconciler shares (DESIGN §5); the
// token tells grants apart and the owner names the process.
const Holder = "service-reconciler"

// Details the tick writes beyond the gate's own (DESIGN §8 gives the exact
// ones; the rest are this implementation's, listed in docs/design.md).
const (
	DetailLeaseBlocked     = "another reconciler owns this service mutation"
	DetailActionLimit      = "service action limit reached for this autonomy tick"
	DetailRecovered        = "service answered before the repair ran"
	DetailOwnershipChanged = "service action finished, but mutation lease ownership changed before release"
	DetailTrialElsewhere   = "circuit breaker is half-open and its one trial repair is running elsewhere"
	DetailShuttingDown     = "reconciler is shutting down: repair not started"
)

// beaconReadConcurrency is how many beacons a tick reads at once at least.
// They are store reads, one per host, and cost the hosts nothing; on S3 a
// tick over 10,000 hosts is bounded by hosts ÷ concurrency × round trip.
const beaconReadConcurrency = 128

// ErrCannotRun marks a tick that could not run at all (store unreachable,
// invalid policy, invalid registry): `optimize run` exits 1.
var ErrCannotRun = errors.New("the tick could not run")

// Config is what a Reconciler needs. Store, Owner and Local are required.
type Config struct {
	Store objstore.Store
	Clock clock.Clock
	// Owner names this process in leases and reports (host/pid/random).
	Owner string
	// Local is this machine's config: the channels.
	Local *localconfig.Config
	// Hostname is this machine's name in the registry (for the local
	// channel); "" uses the OS host name.
	Hostname string
	// Prober probes endpoints; nil uses a zero probe.Prober.
	Prober *probe.Prober
	Logger *slog.Logger
	// ChannelEnv is the environment base of repair commands (nil: the
	// channel package's allowlist of the process environment).
	ChannelEnv []string
	// VerifyInterval is the pause between verification attempts (default
	// 500ms).
	VerifyInterval time.Duration
	// RetainDeletes bounds the old run reports deleted per tick (default 100).
	RetainDeletes int
	// Telemetry receives the tick's spans and measurements; nil records
	// nothing.
	Telemetry Telemetry
	// BeaconReads is how many beacons a tick reads at once; 0 means
	// max(probe_concurrency, 128). Benchmarks set 1 to measure a tick with
	// concurrency 1 everywhere.
	BeaconReads int
}

// Reconciler runs ticks. It is safe for one tick at a time.
type Reconciler struct {
	cfg    Config
	leases *lease.Manager

	mu       sync.Mutex
	channels map[string]channelOrErr
}

type channelOrErr struct {
	ch  channel.Channel
	err error
}

// New returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Store == nil || cfg.Owner == "" || cfg.Local == nil {
		return nil, errors.New("reconcile: Store, Owner and Local are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Prober == nil {
		cfg.Prober = &probe.Prober{Clock: cfg.Clock}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.VerifyInterval <= 0 {
		cfg.VerifyInterval = 500 * time.Millisecond
	}
	if cfg.RetainDeletes <= 0 {
		cfg.RetainDeletes = 100
	}
	if cfg.Telemetry == nil {
		cfg.Telemetry = nopTelemetry{}
	}
	lm, err := lease.NewManager(cfg.Store, lease.Config{Holder: Holder, Owner: cfg.Owner, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Reconciler{cfg: cfg, leases: lm, channels: map[string]channelOrErr{}}, nil
}

// channel builds a channel on first use: a kind the registry never names
// needs no configuration.
func (r *Reconciler) channel(kind registry.Channel) (channel.Channel, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.channels[string(kind)]; ok {
		return c.ch, c.err
	}
	ch, err := channel.New(string(kind), r.cfg.Local, channel.Options{
		Clock: r.cfg.Clock, Logger: r.cfg.Logger, Env: r.cfg.ChannelEnv, Hostname: r.cfg.Hostname,
	})
	r.channels[string(kind)] = channelOrErr{ch, err}
	return ch, err
}

// Options are one tick's options.
type Options struct {
	// DryRun decides everything but takes no lease, runs nothing and
	// writes nothing.
	DryRun bool
}

// tick is the state of one tick.
type tick struct {
	r        *Reconciler
	opts     Options
	pol      *policy.Loaded
	report   *reports.Report
	planned  []*plannedRepair
	outcomes []reports.Outcome
	mu       sync.Mutex
}

// plannedRepair is a service the table plans to repair, with its evidence.
type plannedRepair struct {
	svc     registry.Service
	outcome reports.Outcome
}

// Tick runs one reconciliation tick and returns its report, saved unless
// DryRun. An error wrapping ErrCannotRun means no tick ran; any other error
// with a report means the tick ran but its report could not be saved.
func (r *Reconciler) Tick(ctx context.Context, opts Options) (*reports.Report, error) {
	ctx, end := r.cfg.Telemetry.StartTick(ctx)
	rep, err := r.tick(ctx, opts)
	end(rep, err)
	return rep, err
}

func (r *Reconciler) tick(ctx context.Context, opts Options) (*reports.Report, error) {
	store := r.cfg.Store
	start, err := store.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: read the store clock of %s: %w", ErrCannotRun, store.Location(), err)
	}
	pol, err := policy.Load(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotRun, err)
	}
	if pol.Invalid != nil {
		return nil, fmt.Errorf("%w: %s", ErrCannotRun, pol.Refusal())
	}
	ctl, err := autonomy.Load(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotRun, err)
	}
	reg, err := registry.Load(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotRun, err)
	}

	p := pol.Policy
	runID := reports.RunID(start.Earliest)
	t := &tick{r: r, opts: opts, pol: pol, report: &reports.Report{
		SchemaVersion: reports.SchemaVersion,
		RunID:         runID,
		DecisionID:    reports.DecisionID(runID),
		CreatedAt:     start.Earliest.UTC(),
		Reconciler:    r.cfg.Owner,
		Mode:          string(p.Mode),
		PolicyVersion: p.PolicyVersion,
		Paused:        ctl.Control.EmergencyPaused || p.Pause,
		Breaker:       ctl.Control.Breaker.Phase(start).String(),
		DryRun:        opts.DryRun,
	}}

	t.collectEvidence(ctx, reg.Registry, start)

	gate := autonomy.Decide(pol, ctl, start)
	switch {
	case len(t.planned) == 0:
	case !gate.Allowed:
		for _, pr := range t.planned {
			pr.outcome.Classification = reports.Planned
			pr.outcome.Detail = gate.Detail(pr.svc.Repair)
			t.add(pr.outcome)
		}
	case opts.DryRun:
		for _, pr := range t.planned {
			pr.outcome.Classification = reports.Planned
			pr.outcome.Detail = fmt.Sprintf("dry run: %s would go through the remaining gates (action limit, control state, lease)", pr.svc.Repair)
			t.add(pr.outcome)
		}
	default:
		t.repairAll(ctx)
	}

	now, err := store.Now(ctx)
	if err != nil {
		now = start
	}
	t.report.FinishedAt = now.Latest.UTC()
	r.cfg.Logger.Debug("tick evidence and gates done", "run", runID, "services", len(reg.Registry.Services),
		"planned", len(t.planned), "mode", p.Mode)
	t.report.Outcomes = t.outcomes
	t.report.Finalize()
	if opts.DryRun {
		return t.report, nil
	}
	// The report is saved even when the tick's context was cancelled
	// (shutdown): what ran must be on record.
	saveCtx := context.WithoutCancel(ctx)
	if _, err := reports.Save(saveCtx, store, t.report); err != nil {
		return t.report, fmt.Errorf("the tick ran but its report could not be saved: %w", err)
	}
	if _, err := reports.Retain(saveCtx, store, p.KeepRuns, r.cfg.RetainDeletes); err != nil {
		r.cfg.Logger.Warn("retention of old run reports failed; the next tick retries", "err", err)
	}
	return t.report, nil
}

func (t *tick) add(o reports.Outcome) {
	t.mu.Lock()
	t.outcomes = append(t.outcomes, o)
	t.mu.Unlock()
	t.r.cfg.Telemetry.Outcome(o)
}

// collectEvidence reads every host's beacon once, in parallel, probes the
// endpoints whose verdict decides a classification, and classifies every
// declared service: final outcomes go to the report, planned repairs to
// t.planned.
func (t *tick) collectEvidence(ctx context.Context, reg *registry.Registry, start objstore.TimeBounds) {
	ctx, end := t.r.cfg.Telemetry.StartSpan(ctx, "evidence")
	defer end()
	p := t.pol.Policy
	store := t.r.cfg.Store
	reads := t.r.cfg.BeaconReads
	if reads <= 0 {
		reads = max(p.Evidence.ProbeConcurrency, beaconReadConcurrency)
	}
	beacons := beacon.ReadAll(ctx, store, reg.Hosts(), reads)
	// Judge freshness after the reads; should the clock fail now, the
	// tick's first reading is seconds old and still a sound lower bound.
	now, err := store.Now(ctx)
	if err != nil {
		now = start
	}
	silence := time.Duration(p.Evidence.BeaconSilenceSeconds) * time.Second

	evs := make([]evidence, len(reg.Services))
	var toProbe []string
	for i, s := range reg.Services {
		e := evidence{managed: s.Managed, host: s.Host, unit: s.Unit, endpoint: s.Endpoint, allowed: p.Allows(s.Host, s.Unit)}
		res := beacons[s.Host]
		switch {
		case res.Err != nil:
			e.beaconReason = res.Err.Error()
		case res.Beacon == nil:
			e.beaconReason = "no beacon from " + s.Host
		default:
			if ferr := res.Beacon.Freshness(now, silence); ferr != nil {
				e.beaconReason = ferr.Error()
			} else {
				e.beaconFresh = true
				if u, ok := res.Beacon.Unit(s.Unit); ok {
					e.unitState = string(u.ActiveState)
				} else {
					e.unitState = stateAbsent
				}
			}
		}
		if s.Managed && e.endpoint == "" && down(e.unitState) {
			if ch, cerr := t.r.channel(s.Channel); cerr == nil {
				e.canVerify = ch.Has(channel.ActionCheck)
			}
		} else {
			e.canVerify = true
		}
		if e.needsProbe() {
			toProbe = append(toProbe, s.Endpoint)
		}
		evs[i] = e
	}
	verdicts := map[string]probe.Result{}
	if len(toProbe) > 0 {
		timeout := time.Duration(p.Evidence.ProbeTimeoutSeconds) * time.Second
		results := t.r.cfg.Prober.ProbeAll(ctx, toProbe, p.Evidence.ProbeConcurrency, timeout)
		for i, ep := range toProbe {
			verdicts[ep] = results[i]
		}
	}
	for i, s := range reg.Services {
		e := evs[i]
		if e.needsProbe() {
			v := verdicts[s.Endpoint]
			e.probe, e.probeDetail = string(v.Verdict), v.Detail
		}
		o := reports.Outcome{Host: s.Host, Service: s.Name, Unit: s.Unit, BeaconState: beaconState(e), EndpointState: e.probe}
		if e.managed && e.beaconFresh && down(e.unitState) && e.endpoint == "" {
			o.EndpointState = endpointNotProbed
		}
		c, detail, planned := classify(e)
		if planned {
			o.Action = s.Repair
			t.planned = append(t.planned, &plannedRepair{svc: s, outcome: o})
			continue
		}
		o.Classification, o.Detail = c, detail
		t.add(o)
	}
	sort.Slice(t.planned, func(i, j int) bool {
		a, b := t.planned[i].svc, t.planned[j].svc
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Unit < b.Unit
	})
}

// beaconState is what the report's beacon_state column shows.
func beaconState(e evidence) string {
	if !e.beaconFresh {
		return ""
	}
	return e.unitState
}

// repairAll admits the planned repairs through the remaining gates, at most
// max_concurrent_mutations at once, within the action budget.
func (t *tick) repairAll(ctx context.Context) {
	p := t.pol.Policy
	if err := t.r.leases.Prime(ctx); err != nil {
		t.r.cfg.Logger.Warn("listing the leases failed; takes will cost a request more", "err", err)
	}
	b := newBudget(p.MaxActionsPerTick)
	work := make(chan *plannedRepair)
	var wg sync.WaitGroup
	workers := max(1, min(p.MaxConcurrentMutations, len(t.planned)))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pr := range work {
				t.add(t.repair(ctx, pr, b))
			}
		}()
	}
	for _, pr := range t.planned {
		work <- pr
	}
	close(work)
	wg.Wait()
}

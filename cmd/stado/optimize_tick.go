package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/breaker"
	"github.com/stado/stado/internal/telemetry"
	"github.com/stado/stado/internal/termsafe"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile"
	"github.com/stado/stado/reports"
)

// optimizeTickCmds are the commands that run ticks and show their reports:
// run, serve, status, history.
func optimizeTickCmds(a *app) []*cobra.Command {
	return []*cobra.Command{newRunCmd(a), newServeCmd(a), newStatusCmd(a), newHistoryCmd(a)}
}

// setupTelemetry configures OpenTelemetry from the OTEL_* environment and
// makes the tick report to it. The caller shuts the providers down, which
// flushes what is buffered.
func (a *app) setupTelemetry(ctx context.Context, prometheus bool) (*telemetry.Providers, *telemetry.Recorder, error) {
	version, _ := buildVersion()
	p, err := telemetry.Setup(ctx, telemetry.Options{Version: version, Prometheus: prometheus})
	if err != nil {
		return nil, nil, err
	}
	rec, err := telemetry.NewRecorder(p)
	if err != nil {
		return nil, nil, err
	}
	a.telemetry = rec
	return p, rec, nil
}

// shutdownTelemetry flushes, bounded so that an unreachable collector
// cannot hold a cron job.
func (a *app) shutdownTelemetry(p *telemetry.Providers) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		a.logger.Warn("flushing telemetry failed", "err", err)
	}
}

// newReconciler builds the reconciler from the store and the local config.
func (a *app) newReconciler(ctx context.Context) (*reconcile.Reconciler, objstore.Store, error) {
	store, err := a.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := a.config()
	if err != nil {
		return nil, nil, err
	}
	r, err := reconcile.New(reconcile.Config{
		Store:     store,
		Clock:     a.clock,
		Owner:     lease.ProcessOwner(),
		Local:     cfg,
		Hostname:  a.getenv("STADO_HOSTNAME"),
		Logger:    a.logger,
		Telemetry: a.telemetry,
	})
	return r, store, err
}

type runOptions struct {
	dryRun bool
	json   bool
}

func newRunCmd(a *app) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one reconciliation tick now",
		Long: `Run one reconciliation tick: read the policy, the control state, the registry
and every host's beacon, probe endpoints where it matters, classify every
declared service and repair what is proven down, within the gates.

Exit status: 0 when the tick completed with no repair_failed, 3 when it
completed with some, 1 when it could not run, 2 on a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runTick(cmd.Context(), o) },
	}
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "decide everything, take no lease, run nothing, write nothing")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the report as JSON")
	return cmd
}

func (a *app) runTick(ctx context.Context, o *runOptions) error {
	p, _, err := a.setupTelemetry(ctx, false)
	if err != nil {
		return err
	}
	defer a.shutdownTelemetry(p)
	r, _, err := a.newReconciler(ctx)
	if err != nil {
		return err
	}
	rep, err := r.Tick(ctx, reconcile.Options{DryRun: o.dryRun})
	if rep == nil {
		return err
	}
	a.logger.Info("tick done", "run", rep.RunID, "services", rep.Summary["services"], "reconciled", rep.Summary["reconciled"],
		"failed", rep.FailedCount(), "blocked", rep.BlockedCount(), "dry_run", o.dryRun)
	if o.json {
		if _, werr := a.streams.Out.Write(termsafe.JSON(rep.Marshal())); werr != nil {
			return werr
		}
	} else if werr := reports.WriteRunText(a.streams.Out, rep); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if rep.FailedCount() > 0 {
		return &exitError{code: exitRepairFails, err: fmt.Errorf("%d repair(s) failed: see the detail column, then `stado optimize status`", rep.FailedCount())}
	}
	return nil
}

type statusOptions struct {
	json  bool
	all   bool
	runID string
}

func newStatusCmd(a *app) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the mode, pause, breaker, active leases and the latest report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.gatherStatus(cmd.Context(), o)
			if err != nil {
				return err
			}
			if o.json {
				return reports.WriteStatusJSON(a.streams.Out, s, o.all)
			}
			return reports.WriteStatusText(a.streams.Out, s, o.all)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the status as one JSON document")
	cmd.Flags().BoolVar(&o.all, "all", false, "list every service, healthy ones included")
	cmd.Flags().StringVar(&o.runID, "run", "", "show this run's report instead of the latest (ids: `stado optimize history`)")
	return cmd
}

// gatherStatus reads what status shows. Only an unreachable store is an
// error; an unreadable object is shown as such.
func (a *app) gatherStatus(ctx context.Context, o *statusOptions) (reports.Status, error) {
	store, err := a.openStore(ctx)
	if err != nil {
		return reports.Status{}, err
	}
	now, err := store.Now(ctx)
	if err != nil {
		return reports.Status{}, fmt.Errorf("read the store clock of %s: %w", store.Location(), err)
	}
	pol, err := policy.Load(ctx, store)
	if err != nil {
		return reports.Status{}, err
	}
	ctl, err := autonomy.Load(ctx, store)
	if err != nil {
		return reports.Status{}, err
	}
	d := autonomy.Decide(pol, ctl, now)
	p := pol.Policy
	set := breaker.SettingsFrom(p)
	s := reports.Status{
		Store:               store.Location(),
		Now:                 now.Earliest.UTC(),
		Mode:                string(p.Mode),
		PolicyVersion:       p.PolicyVersion,
		PolicyStoreVersion:  pol.Version,
		MutationsAllowed:    d.Allowed,
		MutationExplanation: d.Explanation,
		Pause: reports.PauseView{
			Paused:      ctl.Control.EmergencyPaused,
			PolicyPause: p.Pause,
			Reason:      ctl.Control.Reason,
			ChangedBy:   ctl.Control.ChangedBy,
		},
		Breaker: reports.BreakerView{
			State:               d.Phase.String(),
			ConsecutiveFailures: ctl.Control.Breaker.ConsecutiveFailures,
			Threshold:           set.Failures,
			OpenUntil:           ctl.Control.Breaker.OpenUntil,
			CooldownSeconds:     ctl.Control.Breaker.CooldownSeconds,
			Trips:               ctl.Control.Breaker.Trips,
		},
	}
	if pol.Invalid != nil {
		s.PolicyProblem = pol.Refusal()
	}
	if ctl.Control.EmergencyPaused && !ctl.Control.ChangedAt.IsZero() {
		t := ctl.Control.ChangedAt
		s.Pause.ChangedAt = &t
	}
	if ctl.Control.Breaker.LastError != nil {
		s.Breaker.LastError = *ctl.Control.Breaker.LastError
	}
	listed, err := lease.List(ctx, store)
	if err != nil {
		return reports.Status{}, err
	}
	for _, l := range listed {
		if l.Err != nil {
			until := l.ModTime.Add(lease.DefaultMaxTTL)
			if until.After(now.Earliest) {
				s.Leases = append(s.Leases, reports.LeaseView{Subject: l.Key, ExpiresAt: until, Unreadable: true,
					ExpiresInSeconds: until.Sub(now.Latest).Seconds()})
			}
			continue
		}
		if !l.Record.ExpiresAt.After(now.Earliest) {
			continue // expired: free, whatever is still stored
		}
		s.Leases = append(s.Leases, reports.LeaseView{Subject: l.Record.SubjectID, Holder: l.Record.Holder, Owner: l.Record.Owner,
			ExpiresAt: l.Record.ExpiresAt, ExpiresInSeconds: l.Record.ExpiresAt.Sub(now.Latest).Seconds()})
	}
	var rep *reports.Report
	if o.runID != "" {
		rep, err = reports.Get(ctx, store, o.runID)
		if err == nil && rep == nil {
			return reports.Status{}, fmt.Errorf("no run %q is stored: list the runs with `stado optimize history`", o.runID)
		}
	} else {
		rep, err = reports.Latest(ctx, store)
	}
	switch {
	case errors.Is(err, reports.ErrCorrupt):
		s.ReportProblem = err.Error()
	case err != nil:
		return reports.Status{}, err
	}
	s.Report = rep
	return s, nil
}

type historyOptions struct {
	limit int
	json  bool
}

func newHistoryCmd(a *app) *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List past ticks, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 1 {
				return usageErrorf("--limit must be at least 1, got %d", o.limit)
			}
			return a.history(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.limit, "limit", 20, "how many runs to list")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the runs as JSON")
	return cmd
}

func (a *app) history(ctx context.Context, o *historyOptions) error {
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	ids, err := reports.RunIDs(ctx, store)
	if err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	if len(ids) > o.limit {
		ids = ids[:o.limit]
	}
	entries := make([]reports.HistoryEntry, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := reports.Get(ctx, store, id)
			switch {
			case err != nil:
				entries[i] = reports.HistoryEntry{RunID: id, Problem: err.Error()}
			case r == nil:
				entries[i] = reports.HistoryEntry{RunID: id, Problem: "deleted while listing"}
			default:
				entries[i] = reports.HistoryEntry{RunID: r.RunID, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
					Reconciler: r.Reconciler, Mode: r.Mode, Summary: r.Summary}
			}
		}()
	}
	wg.Wait()
	if o.json {
		return writeJSON(a.streams.Out, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintln(a.streams.Out, "no tick has run yet: run `stado optimize run`")
		return nil
	}
	return reports.WriteHistoryText(a.streams.Out, entries)
}

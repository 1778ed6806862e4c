package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/stado/stado/reconcile"
)

type serveOptions struct {
	schedule string
	listen   string
}

func newServeCmd(a *app) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run ticks on a schedule until SIGTERM or SIGINT",
		Long: `Run a reconciliation tick at start and then on a cron schedule: a standard
5-field spec ("*/5 * * * *") or a descriptor ("@every 1m", "@hourly").

A tick never overlaps the one before: a tick due while one runs is skipped
and counted (stado_ticks_skipped_total). SIGTERM or SIGINT stops scheduling,
lets a running repair finish inside its fence, releases its leases, writes
the tick's report and exits 0.

With --listen, serves Prometheus metrics on /metrics and /healthz, which is
healthy while the last tick started within three schedule intervals.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context(), o) },
	}
	cmd.Flags().StringVar(&o.schedule, "schedule", "@every 1m", "cron spec or descriptor of the ticks")
	cmd.Flags().StringVar(&o.listen, "listen", "", "address to serve /metrics and /healthz on, e.g. 127.0.0.1:9464")
	return cmd
}

// cronParser accepts the standard 5-field specs and the descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// interval is the spacing of a schedule's activations after now.
func interval(s cron.Schedule, now time.Time) time.Duration {
	first := s.Next(now)
	return s.Next(first).Sub(first)
}

func (a *app) serve(ctx context.Context, o *serveOptions) error {
	sched, err := cronParser.Parse(o.schedule)
	if err != nil {
		return usageErrorf("--schedule %q is not a cron spec: %v; use 5 fields (\"*/5 * * * *\") or a descriptor (\"@every 1m\")", o.schedule, err)
	}
	p, rec, err := a.setupTelemetry(ctx, o.listen != "")
	if err != nil {
		return err
	}
	defer a.shutdownTelemetry(p)
	r, _, err := a.newReconciler(ctx)
	if err != nil {
		return err
	}

	// Ticks run on a context that a signal cancels only after scheduling
	// has stopped: the running tick then starts no further repair, lets
	// the running ones finish inside their fences and releases their leases.
	tickCtx, stopTicks := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTicks()
	var running atomic.Bool
	var lastStart atomic.Int64
	started := a.clock.Now()
	tick := func() {
		if !running.CompareAndSwap(false, true) {
			rec.TickSkipped()
			a.logger.Warn("tick skipped: the previous tick is still running", "schedule", o.schedule)
			return
		}
		defer running.Store(false)
		lastStart.Store(a.clock.Now().UnixNano())
		rep, err := r.Tick(tickCtx, reconcile.Options{})
		switch {
		case rep == nil:
			a.logger.Error("tick could not run", "err", err)
		case err != nil:
			a.logger.Error("tick ran but its report could not be saved", "run", rep.RunID, "err", err)
		default:
			a.logger.Info("tick done", "run", rep.RunID, "services", rep.Summary["services"], "reconciled", rep.Summary["reconciled"],
				"failed", rep.FailedCount(), "blocked", rep.BlockedCount())
		}
	}

	var srv *http.Server
	var srvDone chan error
	if o.listen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", p.Handler)
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			now := a.clock.Now()
			limit := 3 * interval(sched, now)
			last := started
			if n := lastStart.Load(); n != 0 {
				last = time.Unix(0, n)
			}
			age := now.Sub(last)
			if age > limit {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "unhealthy: the last tick started %s ago, more than three intervals (%s)\n", age.Round(time.Second), limit)
				return
			}
			fmt.Fprintf(w, "ok: the last tick started %s ago\n", age.Round(time.Millisecond))
		})
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return fmt.Errorf("listen on %s for /metrics and /healthz: %w; choose a free address with --listen", o.listen, err)
		}
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		srvDone = make(chan error, 1)
		go func() { srvDone <- srv.Serve(ln) }()
		a.logger.Info("serving /metrics and /healthz", "addr", ln.Addr().String())
	}

	c := cron.New(cron.WithParser(cronParser), cron.WithLocation(time.UTC))
	c.Schedule(sched, cron.FuncJob(tick))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); tick() }() // the first tick at start
	c.Start()
	a.logger.Info("serving ticks", "schedule", o.schedule)

	<-ctx.Done()
	a.logger.Info("stopping: no new ticks; a running repair finishes inside its fence")
	stopped := c.Stop()
	stopTicks()
	<-stopped.Done()
	wg.Wait()
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		if err := <-srvDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

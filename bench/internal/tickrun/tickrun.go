// Package tickrun runs one reconciliation tick the way `stado optimize run`
// does (reconcile.New over the store a URL names, with the local config's
// channels, then Tick), counting every store request, and reports what it
// cost. The benchmark runs it in a child process of its own, so that the
// process's peak RSS is the tick's.
package tickrun

import (
	"context"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reconcile"
	"github.com/stado/stado/reports"
)

// Stats is what one tick cost, as the tick's own process saw it.
type Stats struct {
	// TickSeconds is reconcile.Tick's duration (the process's whole wall
	// time is measured by the parent).
	TickSeconds float64 `json:"tick_seconds"`
	// Requests: class → verb → requests through the Store interface.
	Requests map[string]map[string]int64 `json:"requests"`
	// Spans: class → when its requests ran, from the tick's start.
	Spans map[string]Span `json:"spans"`
	// HTTP is the s3 backend's own count of HTTP requests by S3 operation
	// (attempts, retries, list pages and clock reads included); nil on fs.
	HTTP        map[string]int64 `json:"http,omitempty"`
	ReportBytes int              `json:"report_bytes"`
	Summary     map[string]int   `json:"summary"`
	Error       string           `json:"error,omitempty"`
}

// Options configures Run.
type Options struct {
	StoreURL   string
	ConfigPath string
	// CPUProfile and MemProfile, when set, are written for the tick.
	CPUProfile string
	MemProfile string
	// BeaconReads is reconcile.Config.BeaconReads (0: the default).
	BeaconReads int
}

// Run runs one tick and returns its stats.
func Run(ctx context.Context, o Options) (*Stats, error) {
	loc, err := objstore.ParseURL(o.StoreURL)
	if err != nil {
		return nil, err
	}
	var (
		base objstore.Store
		s3   *objstore.S3
	)
	switch loc.Kind {
	case "fs":
		fs, err := objstore.NewFS(loc.Dir, clock.Real{})
		if err != nil {
			return nil, err
		}
		defer fs.Close()
		base = fs
	case "s3":
		so := loc.S3
		so.Clock = clock.Real{}
		if s3, err = objstore.NewS3(ctx, so); err != nil {
			return nil, err
		}
		base = s3
	}
	counter := NewCounter(objstore.Allowlist(base))
	cfg, _, err := localconfig.Load(o.ConfigPath, os.Getenv)
	if err != nil {
		return nil, err
	}
	rcfg := reconcile.Config{
		Store:  counter,
		Clock:  clock.Real{},
		Owner:  lease.ProcessOwner(),
		Local:  cfg,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if o.BeaconReads > 0 {
		// By name: the before/after comparison builds this file against
		// older commits, whose Config has no BeaconReads (and read beacons
		// probe_concurrency at a time, which the sequential policy sets to 1).
		if f := reflect.ValueOf(&rcfg).Elem().FieldByName("BeaconReads"); f.IsValid() {
			f.SetInt(int64(o.BeaconReads))
		}
	}
	r, err := reconcile.New(rcfg)
	if err != nil {
		return nil, err
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	counter.start = start
	rep, tickErr := r.Tick(ctx, reconcile.Options{})
	elapsed := time.Since(start)
	if o.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	if o.MemProfile != "" {
		f, err := os.Create(o.MemProfile)
		if err != nil {
			return nil, err
		}
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return nil, err
		}
		f.Close()
	}
	st := &Stats{TickSeconds: elapsed.Seconds(), Requests: counter.Counts(), Spans: counter.Spans()}
	if s3 != nil {
		st.HTTP = s3.Requests()
	}
	if rep != nil {
		st.Summary = rep.Summary
		// The stored run report's size, read from the store's listing
		// (after the counts were taken), not re-encoded here.
		_ = base.List(ctx, reports.RunKey(rep.RunID), func(e objstore.Entry) error {
			st.ReportBytes = int(e.Size)
			return nil
		})
	}
	if tickErr != nil {
		st.Error = tickErr.Error()
	}
	return st, nil
}

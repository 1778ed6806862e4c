// Package scale runs the tick-at-scale benchmark: for each store (fs; S3
// behind a proxy that adds latency to every request) and each fleet size, it
// seeds a synthetic fleet once, then runs ticks in child processes, in both
// concurrency variants, interleaved, and records each run's wall time, peak
// RSS, store requests and report size.
package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stado/stado/bench/internal/fleet"
	"github.com/stado/stado/bench/internal/tickrun"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/internal/s3test"
	"github.com/stado/stado/objstore"
)

// Store is one store setting a fleet is measured on.
type Store struct {
	// Name is "fs", or "s3+5ms" and the like.
	Name string
	// Kind is "fs" or "s3".
	Kind string
	// Delay is the latency the proxy adds to every S3 request.
	Delay time.Duration
}

// Config is one benchmark run.
type Config struct {
	Sizes  []int
	Stores []Store
	// Runs is the number of measured ticks per (store, size) in the
	// parallel variant; SeqRuns in the sequential one.
	Runs, SeqRuns int
	// LargeSeqRuns, when not 0, replaces SeqRuns for fleets of LargeAbove
	// services or more on S3 stores, whose sequential ticks take minutes
	// each (negative: none).
	LargeSeqRuns int
	LargeAbove   int
	// Skip lists "store/size" pairs not measured at all.
	Skip map[string]bool
	// WorkDir holds the stores, the marker directory and the configs.
	WorkDir string
	// Self is the driver binary: it runs each tick (`tick`) in a child
	// process.
	Self string
	// ProfileDir, when set, receives a CPU and a heap profile of one extra
	// tick per fs fleet of the largest size.
	ProfileDir string
	// Variants measured (default: parallel and sequential).
	Variants []fleet.Variant
	// Keep keeps the fs stores after the runs.
	Keep bool
	Log  io.Writer
}

// Run is one measured tick.
type Run struct {
	Store       string  `json:"store"`
	Services    int     `json:"services"`
	Hosts       int     `json:"hosts"`
	Down        int     `json:"down"`
	Variant     string  `json:"variant"`
	Index       int     `json:"index"`
	WallSeconds float64 `json:"wall_seconds"`
	TickSeconds float64 `json:"tick_seconds"`
	MaxRSSBytes int64   `json:"max_rss_bytes"`
	// CPUSeconds is the tick process's user plus system time.
	CPUSeconds  float64                     `json:"cpu_seconds"`
	Requests    map[string]map[string]int64 `json:"requests"`
	HTTP        map[string]int64            `json:"http,omitempty"`
	ReportBytes int                         `json:"report_bytes"`
	Summary     map[string]int              `json:"summary"`
	Spans       map[string]tickrun.Span     `json:"spans"`
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// Execute runs the benchmark and returns every measured run.
func Execute(ctx context.Context, c *Config) ([]Run, error) {
	markers := filepath.Join(c.WorkDir, "markers")
	if err := fleet.ResetMarkers(markers); err != nil {
		return nil, err
	}
	ep, err := fleet.StartEndpoints(markers)
	if err != nil {
		return nil, err
	}
	defer ep.Close()
	touch, err := exec.LookPath("touch")
	if err != nil {
		return nil, fmt.Errorf("the synthetic repair runs touch: %w", err)
	}
	if touch, err = filepath.Abs(touch); err != nil {
		return nil, err
	}
	config := filepath.Join(c.WorkDir, "config.yaml")
	if err := os.WriteFile(config, fleet.LocalConfig(touch), 0o644); err != nil {
		return nil, err
	}

	var runs []Run
	var fsStores, s3Stores []Store
	for _, s := range c.Stores {
		if s.Kind == "fs" {
			fsStores = append(fsStores, s)
		} else {
			s3Stores = append(s3Stores, s)
		}
	}
	for _, n := range c.Sizes {
		for _, s := range fsStores {
			if c.Skip[fmt.Sprintf("%s/%d", s.Name, n)] {
				continue
			}
			dir := filepath.Join(c.WorkDir, fmt.Sprintf("fs-%d", n))
			spec := fleet.Spec{Services: n, Endpoint: ep.URL}
			st, err := objstore.NewFS(dir, clock.Real{})
			if err != nil {
				return nil, err
			}
			c.logf("seeding %d services on fs", n)
			if err := spec.Seed(ctx, st, fleet.Parallel, 16); err != nil {
				return nil, err
			}
			target := tickTarget{url: dir, seed: st}
			rs, err := c.measure(ctx, s, spec, target, config, markers)
			if err == nil && c.ProfileDir != "" && n == maxInt(c.Sizes) {
				err = c.profile(ctx, s, spec, target, config, markers)
			}
			st.Close()
			if !c.Keep {
				_ = os.RemoveAll(dir)
			}
			if err != nil {
				return nil, err
			}
			runs = append(runs, rs...)
		}
	}
	if len(s3Stores) > 0 {
		srv, err := s3test.StartServer(filepath.Join(c.WorkDir, "s3"))
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		for _, n := range c.Sizes {
			var todo []Store
			for _, s := range s3Stores {
				if !c.Skip[fmt.Sprintf("%s/%d", s.Name, n)] {
					todo = append(todo, s)
				}
			}
			if len(todo) == 0 {
				continue
			}
			bucket, err := srv.CreateBucket()
			if err != nil {
				return nil, err
			}
			spec := fleet.Spec{Services: n, Endpoint: ep.URL}
			direct, err := objstore.Open(ctx, srv.URL(bucket, "fleet"), objstore.OpenOptions{S3: objstore.S3Options{Credentials: srv.Credentials()}})
			if err != nil {
				return nil, err
			}
			c.logf("seeding %d services on S3", n)
			if err := spec.Seed(ctx, direct, fleet.Parallel, 32); err != nil {
				return nil, err
			}
			for _, s := range todo {
				proxy, err := faultproxy.Start(srv.Endpoint)
				if err != nil {
					return nil, err
				}
				if s.Delay > 0 {
					proxy.Add(&faultproxy.Rule{Action: faultproxy.Delay, Delay: s.Delay})
				}
				url := strings.Replace(srv.URL(bucket, "fleet"), srv.Endpoint, proxy.URL, 1)
				rs, err := c.measure(ctx, s, spec, tickTarget{url: url, env: srv.Env(), seed: direct}, config, markers)
				proxy.Close()
				if err != nil {
					return nil, err
				}
				runs = append(runs, rs...)
			}
		}
	}
	return runs, nil
}

type tickTarget struct {
	url  string
	env  []string
	seed objstore.Store // the store without the proxy, for setting the policy
}

// measure runs one untimed warm-up tick, then the measured ticks of both
// variants, interleaved.
func (c *Config) measure(ctx context.Context, s Store, spec fleet.Spec, t tickTarget, config, markers string) ([]Run, error) {
	seqRuns := c.SeqRuns
	if c.LargeSeqRuns != 0 && c.LargeAbove > 0 && spec.Services >= c.LargeAbove && s.Kind == "s3" {
		seqRuns = max(0, c.LargeSeqRuns)
	}
	c.logf("%s, %d services: warm-up tick", s.Name, spec.Services)
	if _, err := c.tick(ctx, s, spec, fleet.Parallel, t, config, markers, 0, nil); err != nil {
		return nil, err
	}
	var runs []Run
	variants := c.Variants
	if len(variants) == 0 {
		variants = []fleet.Variant{fleet.Parallel, fleet.Sequential}
	}
	for i := 1; i <= max(c.Runs, seqRuns); i++ {
		for _, v := range variants {
			n := c.Runs
			if v.Concurrency == 1 {
				n = seqRuns
			}
			if i > n {
				continue
			}
			r, err := c.tick(ctx, s, spec, v, t, config, markers, i, nil)
			if err != nil {
				return nil, err
			}
			c.logf("%s, %d services, %s #%d: %.2fs wall, %.2fs CPU, %.0f MiB peak RSS", s.Name, spec.Services, v.Name, i, r.WallSeconds, r.CPUSeconds, float64(r.MaxRSSBytes)/(1<<20))
			runs = append(runs, *r)
		}
	}
	return runs, nil
}

// profile runs one more tick with CPU and heap profiles written.
func (c *Config) profile(ctx context.Context, s Store, spec fleet.Spec, t tickTarget, config, markers string) error {
	if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(c.ProfileDir, fmt.Sprintf("tick-%s-%d", s.Name, spec.Services))
	c.logf("%s, %d services: profiled tick", s.Name, spec.Services)
	_, err := c.tick(ctx, s, spec, fleet.Parallel, t, config, markers, 0, []string{"-cpuprofile", base + ".cpu.pprof", "-memprofile", base + ".heap.pprof"})
	return err
}

func (c *Config) tick(ctx context.Context, s Store, spec fleet.Spec, v fleet.Variant, t tickTarget, config, markers string, index int, extra []string) (*Run, error) {
	if err := fleet.ResetMarkers(markers); err != nil {
		return nil, err
	}
	if err := spec.SetPolicy(ctx, t.seed, v); err != nil {
		return nil, err
	}
	statsFile := filepath.Join(c.WorkDir, "tick-stats.json")
	_ = os.Remove(statsFile)
	args := append([]string{"tick", "-store", t.url, "-config", config, "-stats", statsFile}, extra...)
	if v.Concurrency == 1 {
		// Sequential means concurrency 1 everywhere, beacon reads included.
		args = append(args, "-beacon-reads", "1")
	}
	cmd := exec.CommandContext(ctx, c.Self, args...)
	cmd.Env = append(os.Environ(), t.env...)
	// The repair (touch {service}) runs in the reconciler's working
	// directory: the marker directory.
	cmd.Dir = markers
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("tick on %s with %d services: %w: %s", s.Name, spec.Services, err, stderr.String())
	}
	var st tickrun.Stats
	b, err := os.ReadFile(statsFile)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	down := spec.Down()
	if st.Error != "" || st.Summary["reconciled"] != down || st.Summary["healthy"] != spec.Services-down {
		return nil, fmt.Errorf("tick on %s with %d services did not reconcile every failed unit and only those: summary %v, error %q; stderr: %s",
			s.Name, spec.Services, st.Summary, st.Error, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return &Run{
		Store: s.Name, Services: spec.Services, Hosts: spec.Hosts(), Down: down, Variant: v.Name, Index: index,
		WallSeconds: wall.Seconds(), TickSeconds: st.TickSeconds, MaxRSSBytes: ru.Maxrss * 1024,
		CPUSeconds: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(),
		Requests:   st.Requests, HTTP: st.HTTP, ReportBytes: st.ReportBytes, Summary: st.Summary, Spans: st.Spans,
	}, nil
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

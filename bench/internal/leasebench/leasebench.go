// Package leasebench measures what a lease costs: take+release latency and
// throughput on one subject, uncontended and with 16 contenders, for stado's
// lease on the fs and S3 stores and, on the same machine in the same run, for
// what teams use instead for locks: etcd and Redis.
package leasebench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stado/stado/bench/internal/stats"
)

// Config is one lease benchmark run.
type Config struct {
	// Systems to measure, by key: fs, s3, etcd, redis, redis-fsync.
	Systems []string
	// Reps is how many times each (system, workload) is measured.
	Reps int
	// Duration of one measurement.
	Duration time.Duration
	// Contenders in the contended workload.
	Contenders int
	// Poll is how long a contender that found the subject held waits
	// before trying again (the same for every system).
	Poll    time.Duration
	WorkDir string
	Log     io.Writer
}

// Rep is one measurement of one workload on one system.
type Rep struct {
	System     string  `json:"system"`
	Workload   string  `json:"workload"`
	Index      int     `json:"index"`
	Ops        int     `json:"ops"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"` // take+release cycles per second
	P50        float64 `json:"p50_s"`
	P99        float64 `json:"p99_s"`
	// Attempts is how many tries took; more than Ops under contention.
	Attempts int `json:"attempts"`
}

// SystemInfo describes a measured system.
type SystemInfo struct {
	Key        string `json:"key"`
	Name       string `json:"name"`
	Durability string `json:"durability"`
	Requests   string `json:"requests"`
}

// Result is the whole run.
type Result struct {
	Systems    []SystemInfo `json:"systems"`
	Reps       []Rep        `json:"reps"`
	Contenders int          `json:"contenders"`
	Poll       float64      `json:"poll_s"`
	Duration   float64      `json:"duration_s"`
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

func start(key, dir string) (*System, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch key {
	case "fs":
		return FS(filepath.Join(dir, "store"))
	case "s3":
		return S3(dir)
	case "etcd":
		return Etcd(dir)
	case "redis":
		return Redis(dir, false)
	case "redis-fsync":
		return Redis(dir, true)
	}
	return nil, fmt.Errorf("unknown system %q (fs, s3, etcd, redis, redis-fsync)", key)
}

// Execute starts every system, then measures, repetition by repetition, each
// workload on each system in turn, each repetition starting with the next
// system, so that slow drift of the machine (page cache, the filesystem's
// recent history) spreads over all of them.
func Execute(ctx context.Context, c *Config) (*Result, error) {
	systems := make([]*System, len(c.Systems))
	res := &Result{Contenders: c.Contenders, Poll: c.Poll.Seconds(), Duration: c.Duration.Seconds()}
	defer func() {
		for _, s := range systems {
			if s != nil {
				s.Stop()
			}
		}
	}()
	for i, key := range c.Systems {
		s, err := start(key, filepath.Join(c.WorkDir, key))
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", key, err)
		}
		systems[i] = s
		res.Systems = append(res.Systems, SystemInfo{Key: key, Name: s.Name, Durability: s.Durability, Requests: s.Requests})
		c.logf("started %s", s.Name)
	}
	for rep := 1; rep <= c.Reps; rep++ {
		// Each repetition starts with another system, so that none is
		// always measured first (right after whatever ran before).
		for j := range systems {
			i := (j + rep - 1) % len(systems)
			s := systems[i]
			for _, w := range []struct {
				name string
				n    int
			}{{"uncontended", 1}, {fmt.Sprintf("%d contenders", c.Contenders), c.Contenders}} {
				r, err := c.measure(ctx, s, w.n)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", s.Name, w.name, err)
				}
				r.System, r.Workload, r.Index = c.Systems[i], w.name, rep
				c.logf("%s, %s #%d: %.0f/s, p50 %.2fms, p99 %.2fms", c.Systems[i], w.name, rep, r.Throughput, r.P50*1e3, r.P99*1e3)
				res.Reps = append(res.Reps, *r)
			}
		}
	}
	return res, nil
}

// measure runs n contenders on one subject for the configured duration.
// Each contender loops: try to take (waiting Poll between tries while it is
// held), release; the latency of a cycle runs from its first try to the end
// of its release.
func (c *Config) measure(ctx context.Context, s *System, n int) (*Rep, error) {
	lockers := make([]Locker, n)
	for i := range lockers {
		l, err := s.NewLocker(i)
		if err != nil {
			return nil, err
		}
		defer l.Close()
		lockers[i] = l
	}
	// Warm up: one cycle per contender, unmeasured.
	for _, l := range lockers {
		if err := cycle(ctx, l, c.Poll, nil); err != nil {
			return nil, err
		}
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		attempts  int
		firstErr  error
		wg        sync.WaitGroup
	)
	begin := time.Now()
	end := begin.Add(c.Duration)
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			tries := 0
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				if err := cycle(ctx, l, c.Poll, &tries); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			attempts += tries
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q := stats.DurationQuantiles(latencies, 0.5, 0.99)
	return &Rep{Ops: len(latencies), Seconds: elapsed.Seconds(), Throughput: float64(len(latencies)) / elapsed.Seconds(),
		P50: q[0], P99: q[1], Attempts: attempts}, nil
}

// cycle takes (retrying every poll while held) and releases.
func cycle(ctx context.Context, l Locker, poll time.Duration, tries *int) error {
	for {
		if tries != nil {
			*tries++
		}
		ok, err := l.TryAcquire(ctx)
		if err != nil {
			return fmt.Errorf("take: %w", err)
		}
		if ok {
			break
		}
		select {
		case <-time.After(poll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// Command stado-bench runs stado's performance benchmarks (`make bench`) and
// writes docs/benchmarks.md from their results.
//
//	stado-bench scale  -out FILE [flags]   ticks at fleet scale (fs, S3 + latency)
//	stado-bench lease  -out FILE [flags]   lease take+release vs etcd and Redis
//	stado-bench render -out docs/benchmarks.md RESULTS.json...
//
// and, as child processes of those:
//
//	stado-bench tick -store URL -config FILE -stats FILE   one tick, measured
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stado/stado/bench/internal/fleet"
	"github.com/stado/stado/bench/internal/leasebench"
	"github.com/stado/stado/bench/internal/render"
	"github.com/stado/stado/bench/internal/scale"
	"github.com/stado/stado/bench/internal/tickrun"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "tick":
		err = tickMain(ctx, os.Args[2:])
	case "scale":
		err = scaleMain(ctx, os.Args[2:])
	case "lease":
		err = leaseMain(ctx, os.Args[2:])
	case "render":
		err = renderMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stado-bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stado-bench scale|lease|render|tick [flags]; see bench/README.md")
	os.Exit(2)
}

func tickMain(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("tick", flag.ExitOnError)
	var o tickrun.Options
	statsPath := fl.String("stats", "", "write the tick's stats here as JSON")
	fl.StringVar(&o.StoreURL, "store", "", "store URL")
	fl.StringVar(&o.ConfigPath, "config", "", "local config file")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the tick")
	fl.StringVar(&o.MemProfile, "memprofile", "", "write a heap (allocs) profile after the tick")
	fl.IntVar(&o.BeaconReads, "beacon-reads", 0, "beacons read at once (0: the tick's default, max(probe_concurrency, 128))")
	_ = fl.Parse(args)
	st, err := tickrun.Run(ctx, o)
	if err != nil {
		return err
	}
	return writeJSON(*statsPath, st)
}

func scaleMain(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("scale", flag.ExitOnError)
	out := fl.String("out", "", "write the runs here as JSON")
	sizes := fl.String("sizes", "1000,10000,100000", "fleet sizes (declared services)")
	stores := fl.String("stores", "fs,s3+5ms,s3+20ms", "stores: fs, s3+<latency>")
	runs := fl.Int("runs", 5, "measured ticks per fleet, parallel variant")
	seqRuns := fl.Int("seq-runs", 5, "measured ticks per fleet, sequential variant")
	skip := fl.String("skip", "", "store/size pairs not to measure, e.g. s3+20ms/100000")
	work := fl.String("work", "", "work directory (default: a new temporary one)")
	profiles := fl.String("profiles", "", "write CPU and heap profiles of a largest fs tick here")
	keep := fl.Bool("keep", false, "keep the fs stores (with -work)")
	largeSeq := fl.Int("large-seq-runs", 0, "sequential ticks per S3 fleet of -large-above services or more (0: -seq-runs; negative: none)")
	largeAbove := fl.Int("large-above", 100000, "see -large-seq-runs")
	variants := fl.String("variants", "parallel,sequential", "policy variants: parallel, sequential, parallel-256")
	_ = fl.Parse(args)
	c := &scale.Config{Runs: *runs, SeqRuns: *seqRuns, Skip: map[string]bool{}, Log: os.Stderr, ProfileDir: *profiles, Keep: *keep,
		LargeSeqRuns: *largeSeq, LargeAbove: *largeAbove}
	for _, v := range strings.Split(*variants, ",") {
		switch strings.TrimSpace(v) {
		case "parallel":
			c.Variants = append(c.Variants, fleet.Parallel)
		case "sequential":
			c.Variants = append(c.Variants, fleet.Sequential)
		case "parallel-256":
			c.Variants = append(c.Variants, fleet.Wide)
		default:
			return fmt.Errorf("-variants: unknown variant %q", v)
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-sizes: %w", err)
		}
		c.Sizes = append(c.Sizes, n)
	}
	for _, s := range strings.Split(*stores, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "fs":
			c.Stores = append(c.Stores, scale.Store{Name: s, Kind: "fs"})
		case strings.HasPrefix(s, "s3"):
			var d time.Duration
			if lat, ok := strings.CutPrefix(s, "s3+"); ok {
				var err error
				if d, err = time.ParseDuration(lat); err != nil {
					return fmt.Errorf("-stores %s: %w", s, err)
				}
			}
			c.Stores = append(c.Stores, scale.Store{Name: s, Kind: "s3", Delay: d})
		default:
			return fmt.Errorf("-stores: unknown store %q", s)
		}
	}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Skip[s] = true
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c.Self = self
	if *work == "" {
		d, err := os.MkdirTemp("", "stado-bench-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*work = d
	}
	c.WorkDir, _ = filepath.Abs(*work)
	rs, err := scale.Execute(ctx, c)
	if err != nil {
		return err
	}
	return writeJSON(*out, map[string]any{"kind": "scale", "runs": rs, "args": append([]string{"stado-bench", "scale"}, args...)})
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if path == "" || path == "-" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func leaseMain(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("lease", flag.ExitOnError)
	out := fl.String("out", "", "write the measurements here as JSON")
	systems := fl.String("systems", "fs,s3,etcd,redis,redis-fsync", "systems to measure")
	reps := fl.Int("reps", 5, "measurements per system and workload")
	dur := fl.Duration("duration", 3*time.Second, "length of one measurement")
	contenders := fl.Int("contenders", 16, "contenders in the contended workload")
	poll := fl.Duration("poll", 2*time.Millisecond, "wait between tries while the subject is held")
	work := fl.String("work", "", "work directory (default: a new temporary one)")
	_ = fl.Parse(args)
	c := &leasebench.Config{Systems: strings.Split(*systems, ","), Reps: *reps, Duration: *dur, Contenders: *contenders, Poll: *poll, Log: os.Stderr}
	if *work == "" {
		d, err := os.MkdirTemp("", "stado-bench-lease-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*work = d
	}
	c.WorkDir, _ = filepath.Abs(*work)
	res, err := leasebench.Execute(ctx, c)
	if err != nil {
		return err
	}
	return writeJSON(*out, map[string]any{"kind": "lease", "result": res, "args": append([]string{"stado-bench", "lease"}, args...)})
}
func renderMain(args []string) error {
	fl := flag.NewFlagSet("render", flag.ExitOnError)
	out := fl.String("out", "docs/benchmarks.md", "the document to write")
	scaleF := fl.String("scale", "", "results of stado-bench scale")
	leaseF := fl.String("lease", "", "results of stado-bench lease")
	beforeF := fl.String("before", "", "scale results of the profiled fleet, code before")
	afterF := fl.String("after", "", "scale results of the profiled fleet, code after")
	wideF := fl.String("wide", "", "scale results with the parallel-256 variant")
	beforeLabel := fl.String("before-label", "before", "names the code before")
	afterLabel := fl.String("after-label", "after", "names the code after")
	profBefore := fl.String("profile-before", "", "pprof -top excerpt, before")
	profAfter := fl.String("profile-after", "", "pprof -top excerpt, after")
	microF := fl.String("micro", "", "benchstat output comparing the micro-benchmarks before and after")
	envF := fl.String("env", "", "file of 'key: value' lines describing the machine and the code")
	cmdsF := fl.String("commands", "", "file of the commands that produced the results")
	_ = fl.Parse(args)
	in := &render.Input{BeforeLabel: *beforeLabel, AfterLabel: *afterLabel}
	// readRuns reads the runs of one or more (comma-separated) result files.
	readRuns := func(paths string) ([]scale.Run, error) {
		var runs []scale.Run
		for _, path := range strings.Split(paths, ",") {
			if path == "" {
				continue
			}
			var v struct {
				Runs []scale.Run `json:"runs"`
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &v); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			runs = append(runs, v.Runs...)
		}
		return runs, nil
	}
	var err error
	if in.Scale, err = readRuns(*scaleF); err != nil {
		return err
	}
	if in.Before, err = readRuns(*beforeF); err != nil {
		return err
	}
	if in.After, err = readRuns(*afterF); err != nil {
		return err
	}
	if in.Wide, err = readRuns(*wideF); err != nil {
		return err
	}
	if *leaseF != "" {
		var v struct {
			Result *leasebench.Result `json:"result"`
		}
		b, err := os.ReadFile(*leaseF)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		in.Lease = v.Result
	}
	text := func(path string) (string, error) {
		if path == "" {
			return "", nil
		}
		b, err := os.ReadFile(path)
		return string(b), err
	}
	if in.ProfileBefore, err = text(*profBefore); err != nil {
		return err
	}
	if in.ProfileAfter, err = text(*profAfter); err != nil {
		return err
	}
	if in.Micro, err = text(*microF); err != nil {
		return err
	}
	env, err := text(*envF)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(env, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			in.Env = append(in.Env, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	cmds, err := text(*cmdsF)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimSpace(cmds), "\n") {
		if l != "" {
			in.Commands = append(in.Commands, l)
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := render.Write(f, in); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package autonomy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/objstore"
)

// The environment a child process reads.
const (
	childEnv         = "STADO_AUTONOMY_CHILD"    // "failures" or "pauses"
	childStoreEnv    = "STADO_AUTONOMY_STORE"    // store URL
	childFailuresEnv = "STADO_AUTONOMY_FAILURES" // the breaker's failures threshold
	childWorkers     = 8                         // goroutines per child
	childPauses      = 3                         // pause/resume rounds per goroutine
)

// write is one control-state write a child made, for the parent to check
// that the writes form one unbroken chain of compare-and-swaps.
type write struct {
	Op      string `json:"op"`
	Changed bool   `json:"changed"`
	Before  string `json:"before"` // the version the write replaced ("" = none)
	After   string `json:"after"`
	Reason  string `json:"reason"`
}

// childMain runs in a child process. It waits for its standard input to
// close (the parent closes every child's at once, so they start together),
// then runs childWorkers goroutines against the store.
func childMain() int {
	ctx := context.Background()
	store, err := objstore.Open(ctx, os.Getenv(childStoreEnv), objstore.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	// Failures at least as high as the count must stay closed; the
	// cooldown is long enough that an open breaker cannot half-open within
	// the test.
	failures, _ := strconv.Atoi(os.Getenv(childFailuresEnv))
	set := breaker.Settings{Failures: failures, Cooldown: time.Hour, MaxCooldown: 4 * time.Hour}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed bool
		enc    = json.NewEncoder(os.Stdout)
	)
	report := func(w write, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			return
		}
		_ = enc.Encode(w)
	}
	for g := 0; g < childWorkers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch os.Getenv(childEnv) {
			case "failures":
				_, err := RecordRepair(ctx, store, set, false, fmt.Sprintf("repair failed in %d/%d", os.Getpid(), g))
				report(write{Op: "failure", Changed: true}, err)
			case "pauses":
				for i := 0; i < childPauses; i++ {
					reason := fmt.Sprintf("pause %d/%d/%d", os.Getpid(), g, i)
					o, err := Pause(ctx, store, reason, "child")
					report(outcomeWrite("pause", reason, o, err))
					o, err = Resume(ctx, store, "child")
					report(outcomeWrite("resume", "", o, err))
				}
			}
		}()
	}
	wg.Wait()
	if failed {
		return 1
	}
	return 0
}

func outcomeWrite(op, reason string, o *Outcome, err error) (write, error) {
	if err != nil {
		return write{}, err
	}
	return write{Op: op, Changed: o.Changed, Before: o.Before.Version, After: o.After.Version, Reason: reason}, nil
}

// runChildren starts n children of the given kind on loc together and
// returns every write they report.
func runChildren(t *testing.T, b backend, loc, kind string, n, failures int) []write {
	t.Helper()
	type child struct {
		cmd       *exec.Cmd
		stdin     io.WriteCloser
		out, errb bytes.Buffer
	}
	children := make([]*child, n)
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		c.cmd.Env = append(append(os.Environ(), b.env()...),
			childEnv+"="+kind, childStoreEnv+"="+loc, childFailuresEnv+"="+strconv.Itoa(failures))
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.errb
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
	}
	for _, c := range children {
		c.stdin.Close() // go
	}
	var writes []write
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.errb.String())
		}
		sc := bufio.NewScanner(&c.out)
		for sc.Scan() {
			var w write
			if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
				t.Fatalf("child %d wrote %q: %v", i, sc.Text(), err)
			}
			writes = append(writes, w)
		}
	}
	return writes
}

// TestConcurrentFailuresAcrossProcesses: 3 processes × 8 goroutines each
// record one failed repair at once, on the fs store and on S3. No update is
// lost: the count is exactly 24. With a threshold above 24 the breaker stays
// closed; with one reached midway it opens exactly once, and the failures
// that land while it is open count without re-tripping it.
func TestConcurrentFailuresAcrossProcesses(t *testing.T) {
	const procs = 3
	total := procs * childWorkers
	for _, b := range sharedBackends() {
		for _, tc := range []struct {
			name      string
			failures  int
			wantTrips int
			wantPhase breaker.Phase
		}{
			{"stays-closed", total + 1, 0, breaker.Closed},
			{"opens-midway", total / 2, 1, breaker.Open},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				loc := b.newLocation(t)
				writes := runChildren(t, b, loc, "failures", procs, tc.failures)
				if len(writes) != total {
					t.Fatalf("%d failures were recorded without error, want %d", len(writes), total)
				}
				store := b.open(t, loc)
				st := mustLoad(t, store)
				if st.Invalid != nil {
					t.Fatalf("the final control state is invalid: %v", st.Invalid)
				}
				br := st.Control.Breaker
				now, err := store.Now(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if br.ConsecutiveFailures != total || br.Trips != tc.wantTrips || br.Phase(now) != tc.wantPhase {
					t.Fatalf("breaker after %d concurrent failures: %+v (phase %v); want %d failures, %d trips, %v",
						total, br, br.Phase(now), total, tc.wantTrips, tc.wantPhase)
				}
			})
		}
	}
}

// TestConcurrentPauseResumeAcrossProcesses: 3 processes × 8 goroutines each
// pause (with a unique reason) and resume three times at once. Every pause is
// written, and every write is a compare-and-swap against the exact version
// before it: the writes, as (replaced version → new version) edges, form one
// unbroken chain from "no object" to the version stored at the end, so no
// write was lost or overwrote another unseen.
func TestConcurrentPauseResumeAcrossProcesses(t *testing.T) {
	const procs = 3
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			loc := b.newLocation(t)
			writes := runChildren(t, b, loc, "pauses", procs, 4)
			pauses, next := 0, map[string]write{}
			for _, w := range writes {
				if w.Op == "pause" {
					if !w.Changed {
						t.Errorf("pause %q wrote nothing, though its reason was unique", w.Reason)
					}
					pauses++
				}
				if !w.Changed {
					if w.Before != w.After {
						t.Errorf("a write that changed nothing reports versions %s → %s", w.Before, w.After)
					}
					continue
				}
				if prev, dup := next[w.Before]; dup {
					t.Fatalf("two writes replaced version %q: %+v and %+v (one overwrote the other unseen)", w.Before, prev, w)
				}
				next[w.Before] = w
			}
			if want := procs * childWorkers * childPauses; pauses != want {
				t.Fatalf("%d pauses reported, want %d", pauses, want)
			}
			st := mustLoad(t, b.open(t, loc))
			if st.Invalid != nil {
				t.Fatalf("the final control state is invalid: %v", st.Invalid)
			}
			v, steps, last := "", 0, write{}
			for {
				w, ok := next[v]
				if !ok {
					break
				}
				v, last = w.After, w
				steps++
				if steps > len(next) {
					t.Fatal("the chain of versions has a cycle")
				}
			}
			if steps != len(next) || v != st.Version {
				t.Fatalf("the chain from no object covers %d of %d writes and ends at %q; the store holds %q", steps, len(next), v, st.Version)
			}
			if last.Op == "pause" && (!st.Control.EmergencyPaused || st.Control.Reason != last.Reason) ||
				last.Op == "resume" && st.Control.EmergencyPaused {
				t.Fatalf("the final state %+v is not the last write's (%+v)", st.Control, last)
			}
			if !strings.HasPrefix(st.Control.ChangedBy, "child") {
				t.Errorf("changed_by %q, want the children's actor", st.Control.ChangedBy)
			}
		})
	}
}

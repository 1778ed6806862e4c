// Package reliability attacks stado the way production does: a flaky S3
// store (5xx, SlowDown, resets, delays past the client timeout, responses
// lost after the request committed), reconcilers killed with SIGKILL at the
// worst moments, a crowd of reconcilers ticking over a large fleet while
// services fail at random, hostile objects in the store, and attempts to
// leak credentials or reach ssh unsafely. Every test checks the same
// invariants: never repair without a held lease, never repair one service
// twice at once (or twice within one TTL for one failure), never lose or
// corrupt a report or the control state, never let stored data reach the
// operator's terminal raw.
//
// `go test ./reliability/` runs the CI-sized suite. STADO_RELIABILITY=full
// (`make reliability`) scales it up: every fault kind against every target,
// 100+ crashes, the 2-minute soak of 8 reconcilers over 500 services.
//
// The test binary doubles as the repair and check commands the exec channel
// runs (TestMain dispatches on its first argument), as e2e's does.
package reliability

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stado/stado/internal/s3test"
)

var s3srv *s3test.Server

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "rel-repair":
			os.Exit(repairMain(os.Args[2], os.Args[3], os.Args[4]))
		case "rel-check":
			os.Exit(checkMain(os.Args[2], os.Args[3], os.Args[4]))
		case "rel-fake-ssh":
			os.Exit(fakeSSHMain(os.Args[2], os.Args[3:]))
		}
	}
	code := s3test.RunTests(m, &s3srv)
	figures.write()
	os.Exit(code)
}

// full reports whether the full-size suite was asked for.
func full() bool { return os.Getenv("STADO_RELIABILITY") == "full" }

// scale picks the CI size or the full size.
func scale(ci, fullSize int) int {
	if full() {
		return fullSize
	}
	return ci
}

// figures collects what the issue note must show: faults injected per kind,
// crashes per point, soak operations, and the counts of the invariants'
// violations (all zero on a pass). TestMain prints them at the end, and
// writes them as JSON to $STADO_RELIABILITY_SUMMARY when it is set.
var figures = &tally{counts: map[string]int{}}

type tally struct {
	mu     sync.Mutex
	counts map[string]int
}

// add counts n under key; n may be 0, so that a check that found nothing
// shows as a zero.
func (t *tally) add(key string, n int) {
	t.mu.Lock()
	t.counts[key] += n
	t.mu.Unlock()
}

func (t *tally) write() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.counts) == 0 {
		return
	}
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("reliability figures:\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-50s %d\n", k, t.counts[k])
	}
	fmt.Print(b.String())
	if p := os.Getenv("STADO_RELIABILITY_SUMMARY"); p != "" {
		// Several test binaries may run: merge with what is there.
		merged := map[string]int{}
		if old, err := os.ReadFile(p); err == nil {
			_ = json.Unmarshal(old, &merged)
		}
		for k, v := range t.counts {
			merged[k] += v
		}
		out, _ := json.MarshalIndent(merged, "", "  ")
		_ = os.WriteFile(p, append(out, '\n'), 0o644)
	}
}

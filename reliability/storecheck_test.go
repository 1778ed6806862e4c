package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// storeState is what checkStore found.
type storeState struct {
	Runs   map[string]*reports.Report // by run id
	Latest *reports.Report
	Leases []lease.Record
}

// checkStore reads every object of the fleet's store with a clean client
// (no proxy) and fails the test on any that is not what it must be: every
// run report parses and is stored under its own run id, latest.json and
// control.json parse, every lease parses, is stored under its subject's key
// and claims no longer term than ttl, and the policy, the registry and the
// beacons parse.
func (f *fleet) checkStore(what string, ttl time.Duration) storeState {
	f.t.Helper()
	ctx := context.Background()
	st := storeState{Runs: map[string]*reports.Report{}}
	var keys []string
	if err := f.store.List(ctx, "state/", func(e objstore.Entry) error { keys = append(keys, e.Key); return nil }); err != nil {
		f.t.Fatalf("%s: list the store: %v", what, err)
	}
	figures.add("corrupt or lost objects", 0)
	figures.add("objects re-read with a clean client", len(keys))
	bad := func(key, format string, args ...any) {
		f.t.Errorf("%s: %s: %s", what, key, fmt.Sprintf(format, args...))
		figures.add("corrupt or lost objects", 1)
	}
	for _, key := range keys {
		obj, err := f.store.Get(ctx, key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // deleted since listed (retention)
		}
		if err != nil {
			f.t.Fatalf("%s: read %s: %v", what, key, err)
		}
		switch {
		case strings.HasPrefix(key, reports.RunsPrefix):
			r, err := reports.Parse(obj.Body)
			if err != nil {
				bad(key, "%v", err)
				continue
			}
			if reports.RunKey(r.RunID) != key {
				bad(key, "holds the report of run %s", r.RunID)
			}
			st.Runs[r.RunID] = r
		case key == reports.LatestKey:
			r, err := reports.Parse(obj.Body)
			if err != nil {
				bad(key, "%v", err)
				continue
			}
			st.Latest = r
		case key == autonomy.Key:
			if _, err := autonomy.Parse(obj.Body); err != nil {
				bad(key, "%v", err)
			}
		case strings.HasPrefix(key, lease.Prefix):
			rec, err := lease.ParseRecord(obj.Body)
			if err != nil {
				bad(key, "%v", err)
				continue
			}
			if lease.Key(rec.SubjectID) != key {
				bad(key, "holds the lease of %s", rec.SubjectID)
			}
			if term := rec.ExpiresAt.Sub(rec.AcquiredAt); term > ttl {
				bad(key, "claims a term of %v, longer than the TTL %v", term, ttl)
			}
			st.Leases = append(st.Leases, rec)
		case key == policy.Key:
			if _, err := policy.Parse(obj.Body); err != nil {
				bad(key, "%v", err)
			}
		case key == registry.Key:
			if _, err := registry.Parse(obj.Body); err != nil {
				bad(key, "%v", err)
			}
		case strings.HasPrefix(key, beacon.Prefix):
			host := strings.TrimSuffix(strings.TrimPrefix(key, beacon.Prefix), ".json")
			if _, err := beacon.Decode(obj.Body, host); err != nil {
				bad(key, "%v", err)
			}
		default:
			bad(key, "an object stado does not write")
		}
	}
	if st.Latest != nil && st.Runs[st.Latest.RunID] == nil && len(st.Runs) > 0 {
		// Retention may have removed it only if it is older than every
		// stored run.
		oldest := ""
		for id := range st.Runs {
			if oldest == "" || id < oldest {
				oldest = id
			}
		}
		if st.Latest.RunID > oldest {
			bad(reports.LatestKey, "names run %s, which is not stored", st.Latest.RunID)
		}
	}
	return st
}

// checkReportsStored fails the test unless every report a tick printed
// (ticks that exited 0 or 3) is stored, byte for byte the same document.
func (f *fleet) checkReportsStored(what string, st storeState, printed []*reports.Report) {
	f.t.Helper()
	for _, r := range printed {
		got := st.Runs[r.RunID]
		if got == nil {
			f.t.Errorf("%s: the report of run %s was printed but is not stored", what, r.RunID)
			figures.add("corrupt or lost objects", 1)
			continue
		}
		if string(got.Marshal()) != string(r.Marshal()) {
			f.t.Errorf("%s: the stored report of run %s differs from the one printed:\n%s\n---\n%s", what, r.RunID, got.Marshal(), r.Marshal())
			figures.add("corrupt or lost objects", 1)
		}
	}
}

// checkLeasesEnd waits until every lease in st has passed its instant on
// the store's clock, then takes each subject with a fresh manager: none is
// stuck beyond its TTL. It releases what it took.
func (f *fleet) checkLeasesEnd(what string, st storeState) {
	f.t.Helper()
	if len(st.Leases) == 0 {
		return
	}
	ctx := context.Background()
	m, err := lease.NewManager(f.store, lease.Config{Holder: "reliability-check", Owner: "reliability/check"})
	if err != nil {
		f.t.Fatal(err)
	}
	var last time.Time
	for _, rec := range st.Leases {
		if rec.ExpiresAt.After(last) {
			last = rec.ExpiresAt
		}
	}
	for {
		now, err := f.store.Now(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		if now.Earliest.After(last) {
			break
		}
		time.Sleep(min(last.Sub(now.Earliest)+50*time.Millisecond, time.Second))
	}
	for _, rec := range st.Leases {
		g, err := m.TryTake(ctx, rec.SubjectID, time.Minute, "reliability-check")
		if err != nil {
			f.t.Errorf("%s: the lease on %s (expired at %s) cannot be taken after its instant: %v", what, rec.SubjectID, rec.ExpiresAt, err)
			figures.add("leases stuck beyond their TTL", 1)
			continue
		}
		figures.add("leases stuck beyond their TTL", 0)
		if _, err := m.Release(ctx, g); err != nil {
			f.t.Errorf("%s: release %s: %v", what, rec.SubjectID, err)
		}
	}
}

// cleanStderr fails the test when a stado process's stderr shows a panic,
// or, for a failed command, is not one clear sentence prefixed "stado: ".
func cleanStderr(what string, r result) (msg string) {
	figures.add("stado processes checked for panics and unclear errors", 1)
	defer func() {
		figures.add("panics or unclear failures", map[bool]int{true: 1}[msg != ""])
	}()
	switch {
	case strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine "):
		return fmt.Sprintf("%s: stado panicked:\n%s", what, r.Stderr)
	case r.Code == 1 || r.Code == 2:
		last := lastLine(r.Stderr)
		if !strings.HasPrefix(last, "stado: ") && !strings.HasPrefix(last, "Run 'stado --help'") {
			return fmt.Sprintf("%s: exit %d without a clear message on stderr:\n%s", what, r.Code, r.Stderr)
		}
	}
	return ""
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "stado: ") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

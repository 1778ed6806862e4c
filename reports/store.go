package reports

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/stado/stado/objstore"
)

// RunKey is where a run's immutable report lives.
func RunKey(runID string) string { return RunsPrefix + runID + ".json" }

// Save stores a finished report: first the immutable run report,
// create-if-absent (on the rare collision of two ticks starting in the same
// nanosecond the run id gets a suffix, so no report is lost), then
// latest.json, unless a report of a later tick is already there. It returns
// the run id used.
func Save(ctx context.Context, store objstore.Store, r *Report) (string, error) {
	base := r.RunID
	// One encoding serves the run report, the read-back comparison and
	// latest.json (at fleet scale it is tens of megabytes); it is redone
	// only when a collision changes the run id.
	body := r.Marshal()
	for attempt := 0; ; attempt++ {
		_, err := store.Create(ctx, RunKey(r.RunID), body)
		if err == nil {
			break
		}
		if errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrPrecondition) {
			// Ambiguous, or an SDK retry of a create that committed: the
			// report may be ours already. The body names this reconciler
			// and the tick's instants, so equal bytes mean ours.
			if o, gerr := store.Get(ctx, RunKey(r.RunID)); gerr == nil && bytes.Equal(o.Body, body) {
				break
			}
		}
		if !errors.Is(err, objstore.ErrPrecondition) || attempt == 5 {
			return "", fmt.Errorf("save run report %s: %w", r.RunID, err)
		}
		var b [3]byte
		_, _ = rand.Read(b[:])
		r.RunID = base + "-" + hex.EncodeToString(b[:])
		r.DecisionID = DecisionID(r.RunID)
		body = r.Marshal()
	}
	if err := updateLatest(ctx, store, r, body); err != nil {
		return r.RunID, err
	}
	return r.RunID, nil
}

// updateLatest points latest.json at r: the report of the tick that finished
// last. Ticks of several reconcilers finish in any order, and their store
// clocks agree only to within a second or two, so "latest" means latest
// written, which is what an operator reading status after a tick expects.
func updateLatest(ctx context.Context, store objstore.Store, r *Report, body []byte) error {
	if _, err := store.Put(ctx, LatestKey, body); err != nil {
		return fmt.Errorf("write %s (the run report %s is saved): %w", LatestKey, r.RunID, err)
	}
	return nil
}

// Latest reads latest.json; (nil, nil) when no tick has written one.
func Latest(ctx context.Context, store objstore.Store) (*Report, error) {
	return read(ctx, store, LatestKey)
}

// Get reads one run's report; (nil, nil) when it does not exist.
func Get(ctx context.Context, store objstore.Store, runID string) (*Report, error) {
	if err := objstore.ValidKey(RunKey(runID)); err != nil || strings.Contains(runID, "/") {
		return nil, fmt.Errorf("run id %q is not valid: copy it from `stado optimize history`", runID)
	}
	return read(ctx, store, RunKey(runID))
}

func read(ctx context.Context, store objstore.Store, key string) (*Report, error) {
	o, err := store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	r, err := Parse(o.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return r, nil
}

// RunIDs lists the stored run ids, oldest first.
func RunIDs(ctx context.Context, store objstore.Store) ([]string, error) {
	var ids []string
	err := store.List(ctx, RunsPrefix, func(e objstore.Entry) error {
		name := strings.TrimPrefix(e.Key, RunsPrefix)
		if strings.HasSuffix(name, ".json") && !strings.Contains(name, "/") {
			ids = append(ids, strings.TrimSuffix(name, ".json"))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list run reports: %w", err)
	}
	return ids, nil
}

// Retain deletes the oldest run reports beyond keep, at most maxDeletes of
// them, so that one tick never spends long on housekeeping; the next tick
// continues. It returns how many it deleted.
func Retain(ctx context.Context, store objstore.Store, keep, maxDeletes int) (int, error) {
	ids, err := RunIDs(ctx, store)
	if err != nil {
		return 0, err
	}
	excess := len(ids) - keep
	if excess <= 0 {
		return 0, nil
	}
	if excess > maxDeletes {
		excess = maxDeletes
	}
	for i := 0; i < excess; i++ {
		if err := store.Delete(ctx, RunKey(ids[i])); err != nil {
			return i, fmt.Errorf("delete old run report %s: %w", ids[i], err)
		}
	}
	return excess, nil
}

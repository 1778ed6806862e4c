package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lossyStore performs a write, then reports `answer` instead of success for
// the next `times` writes of the selected kind: the write committed, its
// answer was lost.
type lossyStore struct {
	objstore.Store
	mu     sync.Mutex
	kind   string // "create", "put-if-match", "delete-if-match"
	times  int
	commit bool
	answer error
}

func (l *lossyStore) fire(kind string) (fire, commit bool, answer error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kind != kind || l.times == 0 {
		return false, true, nil
	}
	l.times--
	return true, l.commit, l.answer
}

func (l *lossyStore) Create(ctx context.Context, key string, body []byte) (string, error) {
	fire, commit, answer := l.fire("create")
	if !fire {
		return l.Store.Create(ctx, key, body)
	}
	if commit {
		if _, err := l.Store.Create(ctx, key, body); err != nil {
			return "", err
		}
	}
	return "", answer
}

func (l *lossyStore) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	fire, commit, answer := l.fire("put-if-match")
	if !fire {
		return l.Store.PutIfMatch(ctx, key, body, etag)
	}
	if commit {
		if _, err := l.Store.PutIfMatch(ctx, key, body, etag); err != nil {
			return "", err
		}
	}
	return "", answer
}

func (l *lossyStore) DeleteIfMatch(ctx context.Context, key, etag string) error {
	fire, commit, answer := l.fire("delete-if-match")
	if !fire {
		return l.Store.DeleteIfMatch(ctx, key, etag)
	}
	if commit {
		if err := l.Store.DeleteIfMatch(ctx, key, etag); err != nil {
			return err
		}
	}
	return answer
}

var (
	errRetried412 = errors.New("store create: " + objstore.ErrPrecondition.Error())
	errLost       = errors.New("timeout")
)

func wrapPrecondition() error { return errors.Join(objstore.ErrPrecondition, errRetried412) }
func wrapUnavailable() error  { return errors.Join(objstore.ErrUnavailable, errLost) }

// An ambiguous write is resolved by reading back: the stored token is ours →
// we hold it; otherwise we do not act.
func TestAmbiguousWritesResolvedByReadingBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kind     string
		commit   bool
		answer   error
		wantHeld bool // false: wantGrant, or an error if !commit
	}{
		{"create retried after commit (412)", "create", true, wrapPrecondition(), false},
		{"create timed out after commit", "create", true, wrapUnavailable(), false},
		{"create timed out before commit", "create", false, wrapUnavailable(), false},
		{"takeover retried after commit (412)", "put-if-match", true, wrapPrecondition(), false},
		{"takeover timed out after commit", "put-if-match", true, wrapUnavailable(), false},
		{"takeover timed out before commit", "put-if-match", false, wrapUnavailable(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(t0)
			mem := objstore.NewMem(f)
			if tc.kind == "put-if-match" {
				mustTake(t, newManager(t, mem, f), "s", time.Second)
				f.Advance(2 * time.Second)
			}
			ls := &lossyStore{Store: mem, kind: tc.kind, times: 1, commit: tc.commit, answer: tc.answer}
			m := newManager(t, ls, f)
			if tc.kind == "put-if-match" {
				if err := m.Prime(bg(t)); err != nil {
					t.Fatal(err)
				}
			}
			g, err := m.TryTake(bg(t), "s", time.Minute, "d")
			if !tc.commit {
				if err == nil || errors.Is(err, lease.ErrHeld) {
					t.Fatalf("a write that did not commit answered %v, %v; want a store error (do not act)", g, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("TryTake: %v; the committed write must be recognised as ours", err)
			}
			if res, err := m.Release(bg(t), g); err != nil || res != lease.Released {
				t.Fatalf("releasing the recognised grant: %v %v", res, err)
			}
		})
	}
}

func TestAmbiguousReleaseResolvedByReadingBack(t *testing.T) {
	f := clock.NewFake(t0)
	ls := &lossyStore{Store: objstore.NewMem(f), kind: "delete-if-match", times: 1, commit: true, answer: wrapUnavailable()}
	m := newManager(t, ls, f)
	g := mustTake(t, m, "s", time.Minute)
	if res, err := m.Release(bg(t), g); err != nil || res != lease.Released {
		t.Fatalf("release whose answer was lost: %v %v", res, err)
	}
	ls.kind, ls.times, ls.commit = "delete-if-match", 1, false
	g2 := mustTake(t, m, "s", time.Minute)
	if res, err := m.Release(bg(t), g2); err != nil || res != lease.Released {
		t.Fatalf("release whose first attempt did not land: %v %v", res, err)
	}
	if _, err := ls.Get(bg(t), g2.Key()); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("lease still stored after release: %v", err)
	}
}

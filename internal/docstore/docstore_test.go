package docstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

// These tests hold the compare-and-swap mechanism every applied document
// shares; the policy and registry packages test their own wording of it.

var testKind = &Kind{
	Key:                      "state/test/doc.yaml",
	What:                     "test document",
	Noun:                     "document",
	ShowCmd:                  "stado test show",
	Review:                   "review it with `stado test show`",
	ExpectReview:             "review it with `stado test diff -f FILE`",
	ErrExpectVersionRequired: errors.New("a document is already stored: --expect-version is required"),
	ErrVersionConflict:       errors.New("document version conflict"),
	ErrNoChange:              errors.New("document unchanged"),
}

func newStore() *objstore.Mem {
	return objstore.NewMem(clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)))
}

func doc(name string) []byte { return []byte("# applied by a test\nname: " + name + "\n") }

func apply(s objstore.Store, raw []byte, expect string) (string, error) {
	return testKind.Apply(context.Background(), s, raw, expect)
}

func stored(t *testing.T, s objstore.Store) objstore.Object {
	t.Helper()
	obj, err := s.Get(context.Background(), testKind.Key)
	if err != nil {
		t.Fatalf("reading the stored document: %v", err)
	}
	return obj
}

// barrierStore holds the first n reads until all n have happened, so that n
// concurrent applies all pass their version check before any of them
// writes, and race on the conditional write itself.
type barrierStore struct {
	objstore.Store
	mu      sync.Mutex
	waiting int
	release chan struct{}
}

func newBarrierStore(s objstore.Store, n int) *barrierStore {
	return &barrierStore{Store: s, waiting: n, release: make(chan struct{})}
}

func (b *barrierStore) Get(ctx context.Context, key string) (objstore.Object, error) {
	obj, err := b.Store.Get(ctx, key)
	b.mu.Lock()
	if b.waiting > 0 {
		b.waiting--
		if b.waiting == 0 {
			close(b.release)
		}
		b.mu.Unlock()
		<-b.release
	} else {
		b.mu.Unlock()
	}
	return obj, err
}

type result struct {
	doc     []byte
	version string
	err     error
}

func applyConcurrently(s objstore.Store, expect string, docs ...[]byte) []result {
	results := make([]result, len(docs))
	var wg sync.WaitGroup
	for i, d := range docs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := apply(s, d, expect)
			results[i] = result{d, v, err}
		}()
	}
	wg.Wait()
	return results
}

// checkOneWinner: exactly one apply won, every loser got a conflict naming
// the winner's version, and the store holds the winner's bytes.
func checkOneWinner(t *testing.T, s objstore.Store, expect string, results []result) {
	t.Helper()
	var winners, losers []result
	for _, r := range results {
		if r.err == nil {
			winners = append(winners, r)
		} else {
			losers = append(losers, r)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d winners, want exactly 1: %+v", len(winners), results)
	}
	w := winners[0]
	for _, l := range losers {
		var ce *ConflictError
		if !errors.As(l.err, &ce) || !errors.Is(l.err, testKind.ErrVersionConflict) {
			t.Fatalf("loser got %v, want a ConflictError", l.err)
		}
		if ce.Current != w.version || ce.Expected != expect {
			t.Fatalf("loser's conflict %+v, want current %s (the winner's) expected %q", ce, w.version, expect)
		}
		if !strings.Contains(l.err.Error(), "--expect-version "+w.version) {
			t.Fatalf("loser's message does not say what to re-apply with: %v", l.err)
		}
	}
	obj := stored(t, s)
	if obj.ETag != w.version || string(obj.Body) != string(w.doc) {
		t.Fatalf("stored %q at %s, want the winner's %q at %s", obj.Body, obj.ETag, w.doc, w.version)
	}
}

// TestApplyRaceOnConditionalWrite: both appliers pass the version check and
// the conditional write decides.
func TestApplyRaceOnConditionalWrite(t *testing.T) {
	for i := 0; i < 50; i++ {
		mem := newStore()
		v1, err := apply(mem, doc("base"), "")
		if err != nil {
			t.Fatal(err)
		}
		results := applyConcurrently(newBarrierStore(mem, 2), v1, doc("alice"), doc("bob"))
		checkOneWinner(t, mem, v1, results)
	}
}

// TestApplyRaceFree: eight appliers and no barrier; whichever check catches
// a loser, the outcome is the same.
func TestApplyRaceFree(t *testing.T) {
	for i := 0; i < 200; i++ {
		s := newStore()
		v1, err := apply(s, doc("base"), "")
		if err != nil {
			t.Fatal(err)
		}
		docs := make([][]byte, 8)
		for j := range docs {
			docs[j] = doc(fmt.Sprintf("operator-%d", j))
		}
		checkOneWinner(t, s, v1, applyConcurrently(s, v1, docs...))
	}
}

// TestApplyRaceToCreate: two first applies on an empty store;
// create-if-absent decides.
func TestApplyRaceToCreate(t *testing.T) {
	for i := 0; i < 50; i++ {
		mem := newStore()
		results := applyConcurrently(newBarrierStore(mem, 2), "", doc("alice"), doc("bob"))
		checkOneWinner(t, mem, "", results)
	}
}

// ambiguousStore fails conditional writes with ErrUnavailable, after
// committing them when commit is set: a timeout whose write may have landed.
type ambiguousStore struct {
	objstore.Store
	commit bool
}

func (a *ambiguousStore) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	if a.commit {
		if _, err := a.Store.PutIfMatch(ctx, key, body, etag); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("store put-if-match %s: %w: i/o timeout", key, objstore.ErrUnavailable)
}

func (a *ambiguousStore) Create(ctx context.Context, key string, body []byte) (string, error) {
	if a.commit {
		if _, err := a.Store.Create(ctx, key, body); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("store create %s: %w: i/o timeout", key, objstore.ErrUnavailable)
}

func TestApplyResolvesAmbiguousWrite(t *testing.T) {
	mem := newStore()
	if _, err := apply(&ambiguousStore{Store: mem}, doc("a"), ""); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("create that did not land: %v, want ErrUnavailable", err)
	}
	v, err := apply(&ambiguousStore{Store: mem, commit: true}, doc("a"), "")
	if err != nil || v != stored(t, mem).ETag {
		t.Fatalf("create that landed: %q %v", v, err)
	}
	v2, err := apply(&ambiguousStore{Store: mem, commit: true}, doc("b"), v)
	if err != nil || v2 != stored(t, mem).ETag || v2 == v {
		t.Fatalf("put that landed: %q %v", v2, err)
	}
	_, err = apply(&ambiguousStore{Store: mem}, doc("c"), v2)
	if !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "write the test document to mem:") {
		t.Fatalf("put that did not land: %v, want ErrUnavailable naming the document and the store", err)
	}
	if stored(t, mem).ETag != v2 {
		t.Error("the stored document must be unchanged")
	}
}

// retriedStore commits every conditional write, then answers as the S3
// SDK's retry of it does once the first attempt's answer was lost: the
// retry's condition fails against the write that just landed.
type retriedStore struct{ objstore.Store }

func (r retriedStore) Create(ctx context.Context, key string, body []byte) (string, error) {
	if _, err := r.Store.Create(ctx, key, body); err != nil {
		return "", err
	}
	return "", fmt.Errorf("store create %s: %w", key, objstore.ErrPrecondition)
}

func (r retriedStore) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	if _, err := r.Store.PutIfMatch(ctx, key, body, etag); err != nil {
		return "", err
	}
	return "", fmt.Errorf("store put-if-match %s: %w", key, objstore.ErrPrecondition)
}

// TestApplyOwnWriteRetriedIsNotAConflict is the regression test of a bug the
// reliability suite found (commit-then-503 and commit-then-reset on PUT of
// policy.yaml and registry.yaml): an apply whose write landed, but whose
// answer was lost and whose SDK retry then answered 412, was reported as a
// version conflict with a change "someone" applied: the operator's own.
func TestApplyOwnWriteRetriedIsNotAConflict(t *testing.T) {
	mem := newStore()
	v, err := apply(retriedStore{mem}, doc("a"), "")
	if err != nil || v != stored(t, mem).ETag {
		t.Fatalf("create that landed: %q %v, want the stored version", v, err)
	}
	v2, err := apply(retriedStore{mem}, doc("b"), v)
	if err != nil || v2 != stored(t, mem).ETag || v2 == v {
		t.Fatalf("put that landed: %q %v, want the new stored version", v2, err)
	}
	// A real conflict is still one.
	if _, err := apply(mem, doc("c"), v2); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(retriedStore{mem}, doc("d"), v2); !errors.Is(err, testKind.ErrVersionConflict) {
		t.Fatalf("apply against a version replaced meanwhile: %v, want a conflict", err)
	}
}

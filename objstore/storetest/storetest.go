// Package storetest is the conformance suite every objstore backend must
// pass: the same tests, run against mem, fs and a real S3 server, so that the
// lease and everything above it can rely on one contract.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/objstore"
)

// Options describe what a backend may legitimately do differently.
type Options struct {
	// DeleteIfMatchMissingMaySucceed: DeleteIfMatch on an absent key may
	// succeed instead of failing with ErrNotFound (some S3 servers).
	DeleteIfMatchMissingMaySucceed bool
	// Rounds of the concurrent-writer tests (default 100).
	Rounds int
	// Writers per round (default 32).
	Writers int
	// DeleteIfMatchRacesPut: the server checks DeleteIfMatch's condition and
	// deletes without excluding a concurrent PutIfMatch, so both can succeed
	// against one version (Versity Gateway v1.8.0's posix backend evaluates
	// the delete precondition outside its object publish lock). The suite
	// then still requires at most one PutIfMatch winner; the lease package
	// never sends a release that could meet a takeover (see lease.Release).
	DeleteIfMatchRacesPut bool
}

// Run runs the suite. newStore returns an empty store for one subtest.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store, o Options) {
	if o.Rounds == 0 {
		o.Rounds = 100
	}
	if o.Writers == 0 {
		o.Writers = 32
	}
	tests := []struct {
		name string
		fn   func(*testing.T, objstore.Store)
	}{
		{"GetMissingIsNotFound", testGetMissing},
		{"CreateThenGet", testCreateThenGet},
		{"CreateExistingFailsPrecondition", testCreateExisting},
		{"PutIfMatch", testPutIfMatch},
		{"PutIfMatchMissingFailsPrecondition", testPutIfMatchMissing},
		{"PutUnconditional", testPut},
		{"DeleteIfMatchRefusesStaleETag", testDeleteIfMatchStale},
		{"DeleteIfMatchMissing", func(t *testing.T, s objstore.Store) { testDeleteIfMatchMissing(t, s, o) }},
		{"DeleteIsIdempotent", testDelete},
		{"EqualBodiesHaveEqualETags", testEqualBodies},
		{"InvalidKeysRefused", testInvalidKeys},
		{"ErrorsAreDistinct", testErrorsDistinct},
		{"ListPrefixAndOrder", testListPrefix},
		{"ListCompletePast1000Keys", testListPast1000},
		{"ListStopsOnCallbackError", testListStop},
		{"ClockIsSane", testClock},
		{"ConcurrentCreateHasOneWinner", func(t *testing.T, s objstore.Store) { testConcurrentCreate(t, s, o) }},
		{"ConcurrentPutIfMatchHasOneWinner", func(t *testing.T, s objstore.Store) { testConcurrentPutIfMatch(t, s, o) }},
		{"ConcurrentDeleteIfMatchHasOneWinner", func(t *testing.T, s objstore.Store) { testConcurrentDeleteIfMatch(t, s, o) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func mustCreate(t *testing.T, s objstore.Store, key string, body []byte) string {
	t.Helper()
	etag, err := s.Create(ctx(t), key, body)
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	if etag == "" {
		t.Fatalf("Create(%q) returned an empty ETag", key)
	}
	return etag
}

func mustGet(t *testing.T, s objstore.Store, key string) objstore.Object {
	t.Helper()
	o, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return o
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func testGetMissing(t *testing.T, s objstore.Store) {
	_, err := s.Get(ctx(t), "state/missing.json")
	wantErr(t, "Get of a missing key", err, objstore.ErrNotFound)
}

func testCreateThenGet(t *testing.T, s objstore.Store) {
	body := []byte(`{"a":1}`)
	etag := mustCreate(t, s, "state/a/b.json", body)
	o := mustGet(t, s, "state/a/b.json")
	if !bytes.Equal(o.Body, body) {
		t.Fatalf("Get body = %q, want %q", o.Body, body)
	}
	if o.ETag != etag {
		t.Fatalf("Get ETag = %q, Create returned %q", o.ETag, etag)
	}
	if o.Key != "state/a/b.json" {
		t.Fatalf("Get Key = %q", o.Key)
	}
	if o.ModTime.IsZero() {
		t.Fatal("Get returned a zero ModTime")
	}
}

func testCreateExisting(t *testing.T, s objstore.Store) {
	mustCreate(t, s, "state/k", []byte("first"))
	_, err := s.Create(ctx(t), "state/k", []byte("second"))
	wantErr(t, "second Create", err, objstore.ErrPrecondition)
	if o := mustGet(t, s, "state/k"); string(o.Body) != "first" {
		t.Fatalf("a failed Create changed the object to %q", o.Body)
	}
}

func testPutIfMatch(t *testing.T, s objstore.Store) {
	e1 := mustCreate(t, s, "state/k", []byte("v1"))
	e2, err := s.PutIfMatch(ctx(t), "state/k", []byte("v2"), e1)
	if err != nil {
		t.Fatalf("PutIfMatch with the current ETag: %v", err)
	}
	if e2 == e1 || e2 == "" {
		t.Fatalf("PutIfMatch returned ETag %q (previous %q)", e2, e1)
	}
	_, err = s.PutIfMatch(ctx(t), "state/k", []byte("v3"), e1)
	wantErr(t, "PutIfMatch with a stale ETag", err, objstore.ErrPrecondition)
	o := mustGet(t, s, "state/k")
	if string(o.Body) != "v2" || o.ETag != e2 {
		t.Fatalf("after a refused PutIfMatch: body %q etag %q, want v2 %q", o.Body, o.ETag, e2)
	}
}

func testPutIfMatchMissing(t *testing.T, s objstore.Store) {
	e := mustCreate(t, s, "state/other", []byte("x"))
	_, err := s.PutIfMatch(ctx(t), "state/missing", []byte("v"), e)
	wantErr(t, "PutIfMatch on a missing key", err, objstore.ErrPrecondition)
	_, err = s.Get(ctx(t), "state/missing")
	wantErr(t, "Get after refused PutIfMatch", err, objstore.ErrNotFound)
}

func testPut(t *testing.T, s objstore.Store) {
	if _, err := s.Put(ctx(t), "state/p", []byte("one")); err != nil {
		t.Fatal(err)
	}
	e2, err := s.Put(ctx(t), "state/p", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if o := mustGet(t, s, "state/p"); string(o.Body) != "two" || o.ETag != e2 {
		t.Fatalf("after Put: %q %q", o.Body, o.ETag)
	}
}

func testDeleteIfMatchStale(t *testing.T, s objstore.Store) {
	e1 := mustCreate(t, s, "state/d", []byte("v1"))
	e2, err := s.PutIfMatch(ctx(t), "state/d", []byte("v2"), e1)
	if err != nil {
		t.Fatal(err)
	}
	err = s.DeleteIfMatch(ctx(t), "state/d", e1)
	wantErr(t, "DeleteIfMatch with a stale ETag", err, objstore.ErrPrecondition)
	if o := mustGet(t, s, "state/d"); string(o.Body) != "v2" {
		t.Fatalf("refused DeleteIfMatch changed the object: %q", o.Body)
	}
	if err := s.DeleteIfMatch(ctx(t), "state/d", e2); err != nil {
		t.Fatalf("DeleteIfMatch with the current ETag: %v", err)
	}
	_, err = s.Get(ctx(t), "state/d")
	wantErr(t, "Get after DeleteIfMatch", err, objstore.ErrNotFound)
}

func testDeleteIfMatchMissing(t *testing.T, s objstore.Store, o Options) {
	e := mustCreate(t, s, "state/x", []byte("x"))
	err := s.DeleteIfMatch(ctx(t), "state/missing", e)
	if err == nil && o.DeleteIfMatchMissingMaySucceed {
		return
	}
	wantErr(t, "DeleteIfMatch on a missing key", err, objstore.ErrNotFound)
}

func testDelete(t *testing.T, s objstore.Store) {
	mustCreate(t, s, "state/del", []byte("x"))
	for i := 0; i < 2; i++ {
		if err := s.Delete(ctx(t), "state/del"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	_, err := s.Get(ctx(t), "state/del")
	wantErr(t, "Get after Delete", err, objstore.ErrNotFound)
}

// testEqualBodies pins down why every compare-and-swapped object must carry
// content unique to its write: ETags are content hashes.
func testEqualBodies(t *testing.T, s objstore.Store) {
	e1 := mustCreate(t, s, "state/e1", []byte("same"))
	e2 := mustCreate(t, s, "state/e2", []byte("same"))
	if e1 != e2 {
		t.Fatalf("equal bodies gave ETags %q and %q; the ABA note in DESIGN §3 assumes content hashes", e1, e2)
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	for _, k := range []string{"", "/state/a", "state//a", "state/a/", "state/../a", "state/./a", "state/.hidden", "state/a\x00b", "state/a\nb", strings.Repeat("k", objstore.MaxKeyLen+1)} {
		_, err := s.Create(ctx(t), k, []byte("x"))
		wantErr(t, fmt.Sprintf("Create(%q)", k), err, objstore.ErrInvalidKey)
		_, err = s.Get(ctx(t), k)
		wantErr(t, fmt.Sprintf("Get(%q)", k), err, objstore.ErrInvalidKey)
	}
}

func testErrorsDistinct(t *testing.T, s objstore.Store) {
	_, nf := s.Get(ctx(t), "state/none")
	mustCreate(t, s, "state/one", []byte("1"))
	_, pf := s.Create(ctx(t), "state/one", []byte("2"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, tr := s.Get(cancelled, "state/one")
	sentinels := []error{objstore.ErrNotFound, objstore.ErrPrecondition, objstore.ErrUnavailable}
	for i, err := range []error{nf, pf, tr} {
		for j, sen := range sentinels {
			if errors.Is(err, sen) != (i == j) {
				t.Errorf("error %v: errors.Is(%v) = %v, want %v", err, sen, errors.Is(err, sen), i == j)
			}
		}
	}
}

func testListPrefix(t *testing.T, s objstore.Store) {
	keys := []string{"state/a-c", "state/a/b", "state/a/c/d", "state/ab", "state/b", "other/x"}
	for _, k := range keys {
		mustCreate(t, s, k, []byte(k))
	}
	cases := map[string][]string{
		"state/a":   {"state/a-c", "state/a/b", "state/a/c/d", "state/ab"},
		"state/a/":  {"state/a/b", "state/a/c/d"},
		"state/":    {"state/a-c", "state/a/b", "state/a/c/d", "state/ab", "state/b"},
		"state/zz":  nil,
		"nothing/":  nil,
		"state/a/c": {"state/a/c/d"},
	}
	for prefix, want := range cases {
		var got []string
		err := s.List(ctx(t), prefix, func(e objstore.Entry) error {
			got = append(got, e.Key)
			if e.Size != int64(len(e.Key)) {
				t.Errorf("List entry %q size %d, want %d", e.Key, e.Size, len(e.Key))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("List(%q) = %v, want %v (byte order)", prefix, got, want)
		}
	}
}

func testListPast1000(t *testing.T, s objstore.Store) {
	const n = 1100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := s.Create(ctx(t), fmt.Sprintf("state/many/%05d", i), []byte("x")); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var got []string
	if err := s.List(ctx(t), "state/many/", func(e objstore.Entry) error { got = append(got, e.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("List returned %d keys, want %d", len(got), n)
	}
	if !sort.StringsAreSorted(got) {
		t.Fatal("List is not in byte order")
	}
	for i, k := range got {
		if want := fmt.Sprintf("state/many/%05d", i); k != want {
			t.Fatalf("List[%d] = %q, want %q", i, k, want)
		}
	}
}

func testListStop(t *testing.T, s objstore.Store) {
	for i := 0; i < 3; i++ {
		mustCreate(t, s, fmt.Sprintf("state/s/%d", i), []byte("x"))
	}
	stop := errors.New("stop")
	calls := 0
	err := s.List(ctx(t), "state/s/", func(objstore.Entry) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("List with a failing callback: err %v after %d calls", err, calls)
	}
}

func testClock(t *testing.T, s objstore.Store) {
	mustCreate(t, s, "state/clock", []byte("x"))
	b, err := s.Now(ctx(t))
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	if b.Latest.Before(b.Earliest) {
		t.Fatalf("Now: Latest %v before Earliest %v", b.Latest, b.Earliest)
	}
	if b.Uncertainty() > 5*time.Second {
		t.Fatalf("Now: uncertainty %v is larger than a loopback store can explain", b.Uncertainty())
	}
	o := mustGet(t, s, "state/clock")
	// ModTime is on the store's clock: not after the store's Latest now
	// (plus S3's one-second truncation), and not long before.
	if o.ModTime.After(b.Latest.Add(time.Second)) || o.ModTime.Before(b.Earliest.Add(-time.Minute)) {
		t.Fatalf("ModTime %v is not near store time [%v, %v]", o.ModTime, b.Earliest, b.Latest)
	}
	b2, err := s.Now(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if b2.Latest.Before(b.Earliest) {
		t.Fatalf("store clock went backwards: %v then %v", b, b2)
	}
}

// race runs writers goroutines that start together and returns each one's
// error.
func race(writers int, fn func(i int) error) []error {
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}(i)
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one error is nil and every other is
// ErrPrecondition, and returns the winner.
func oneWinner(t *testing.T, round int, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
			}
			winner = i
		case errors.Is(err, objstore.ErrPrecondition):
		default:
			t.Fatalf("round %d: writer %d: unexpected error %v", round, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("round %d: no writer won", round)
	}
	return winner
}

func testConcurrentCreate(t *testing.T, s objstore.Store, o Options) {
	for round := 0; round < o.Rounds; round++ {
		key := fmt.Sprintf("state/race/create-%03d", round)
		errs := race(o.Writers, func(i int) error {
			_, err := s.Create(ctx(t), key, []byte(fmt.Sprintf("writer %d", i)))
			return err
		})
		w := oneWinner(t, round, errs)
		if got := mustGet(t, s, key); string(got.Body) != fmt.Sprintf("writer %d", w) {
			t.Fatalf("round %d: stored %q, but writer %d won", round, got.Body, w)
		}
	}
}

func testConcurrentPutIfMatch(t *testing.T, s objstore.Store, o Options) {
	key := "state/race/cas"
	etag := mustCreate(t, s, key, []byte("round -1"))
	for round := 0; round < o.Rounds; round++ {
		newTags := make([]string, o.Writers)
		errs := race(o.Writers, func(i int) error {
			e, err := s.PutIfMatch(ctx(t), key, []byte(fmt.Sprintf("round %d writer %d", round, i)), etag)
			newTags[i] = e
			return err
		})
		w := oneWinner(t, round, errs)
		got := mustGet(t, s, key)
		if string(got.Body) != fmt.Sprintf("round %d writer %d", round, w) || got.ETag != newTags[w] {
			t.Fatalf("round %d: stored %q (etag %s), but writer %d won (etag %s)", round, got.Body, got.ETag, w, newTags[w])
		}
		etag = got.ETag
	}
}

func testConcurrentDeleteIfMatch(t *testing.T, s objstore.Store, o Options) {
	rounds := o.Rounds / 4
	if rounds < 1 {
		rounds = 1
	}
	raced := 0
	defer func() {
		if raced > 0 {
			t.Logf("known server defect: in %d of %d rounds a DeleteIfMatch and a PutIfMatch both succeeded against one version", raced, rounds)
		}
	}()
	for round := 0; round < rounds; round++ {
		key := fmt.Sprintf("state/race/del-%03d", round)
		etag := mustCreate(t, s, key, []byte(fmt.Sprintf("victim %d", round)))
		// Half the writers delete with the current ETag, half replace it:
		// at most one CAS of either kind may succeed.
		errs := race(o.Writers, func(i int) error {
			if i%2 == 0 {
				return s.DeleteIfMatch(ctx(t), key, etag)
			}
			_, err := s.PutIfMatch(ctx(t), key, []byte(fmt.Sprintf("round %d writer %d", round, i)), etag)
			return err
		})
		puts, deletes := 0, 0
		for i, err := range errs {
			switch {
			case err == nil && i%2 == 0:
				deletes++
			case err == nil:
				puts++
			case errors.Is(err, objstore.ErrPrecondition), errors.Is(err, objstore.ErrNotFound):
			default:
				t.Fatalf("round %d writer %d: %v", round, i, err)
			}
		}
		if puts > 1 || puts+deletes == 0 {
			t.Fatalf("round %d: %d puts and %d deletes succeeded against one version", round, puts, deletes)
		}
		if o.DeleteIfMatchRacesPut {
			if puts == 1 && deletes > 0 {
				raced++
			}
			continue
		}
		if puts+deletes != 1 {
			t.Fatalf("round %d: %d puts and %d deletes succeeded against one version; exactly one may", round, puts, deletes)
		}
	}
}

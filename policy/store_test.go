package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/yamlstrict"
	"github.com/stado/stado/objstore"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newStore() *objstore.Mem { return objstore.NewMem(clock.NewFake(t0)) }

func doc(version, mode string) []byte {
	return []byte(fmt.Sprintf("# applied by a test\npolicy_version: %q\nmode: %s\n", version, mode))
}

func stored(t *testing.T, s objstore.Store) objstore.Object {
	t.Helper()
	obj, err := s.Get(context.Background(), Key)
	if err != nil {
		t.Fatalf("reading the stored policy: %v", err)
	}
	return obj
}

func TestLoadDefaultWhenNothingStored(t *testing.T) {
	l, err := Load(context.Background(), newStore())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Default || l.Raw != nil || l.Version != "" || l.Invalid != nil {
		t.Errorf("Loaded = %+v, want the default", l)
	}
	if l.Policy.PolicyVersion != DefaultVersion || l.Policy.Mode != ModeReport {
		t.Errorf("effective policy %+v, want the default", l.Policy)
	}
	if l.MutationsAllowed() {
		t.Error("the default policy must not allow mutations")
	}
	want := "no policy is stored, so the built-in default (report mode) is in effect and repairs are only planned; " +
		"to let autonomy repair, apply a policy with `stado optimize policy apply -f FILE`"
	if got := l.Refusal(); got != want {
		t.Errorf("Refusal() = %q", got)
	}
}

func TestApplyCreateThenLoad(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	raw, err := os.ReadFile("testdata/valid/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Apply(ctx, s, raw, "")
	if err != nil {
		t.Fatal(err)
	}
	obj := stored(t, s)
	if v == "" || v != obj.ETag {
		t.Errorf("Apply returned version %q, store has %q", v, obj.ETag)
	}
	if string(obj.Body) != string(raw) {
		t.Error("the stored document must be the applied bytes, comments and all")
	}
	l, err := Load(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if l.Default || l.Invalid != nil || l.Version != v || string(l.Raw) != string(raw) || !l.ModTime.Equal(t0) {
		t.Errorf("Loaded = %+v", l)
	}
	if l.Policy.PolicyVersion != "2026-11-30-a" || l.Policy.Mode != ModeEnforceSafe || l.Policy.KeepRuns != 500 {
		t.Errorf("effective policy %+v", l.Policy)
	}
	if !l.MutationsAllowed() || l.Refusal() != "" {
		t.Errorf("a valid enforce-safe policy must allow mutations; refusal %q", l.Refusal())
	}
}

func TestApplyCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v1, err := Apply(ctx, s, doc("a", "report"), "")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := Apply(ctx, s, doc("b", "enforce-safe"), v1)
	if err != nil {
		t.Fatal(err)
	}
	if v2 == v1 || stored(t, s).ETag != v2 || string(stored(t, s).Body) != string(doc("b", "enforce-safe")) {
		t.Errorf("after CAS: v1 %s v2 %s stored %+v", v1, v2, stored(t, s))
	}
}

func TestApplyRequiresExpectVersionOnceStored(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v1, err := Apply(ctx, s, doc("a", "report"), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ctx, s, doc("b", "report"), "")
	if !errors.Is(err, ErrExpectVersionRequired) {
		t.Fatalf("got %v, want ErrExpectVersionRequired", err)
	}
	want := "a policy is already stored: --expect-version is required: it is at version " + v1 +
		"; review it with `stado optimize policy diff -f FILE`, then pass --expect-version " + v1
	if err.Error() != want {
		t.Errorf("error text\n got: %s\nwant: %s", err, want)
	}
	if stored(t, s).ETag != v1 {
		t.Error("the stored policy must be unchanged")
	}
}

func TestApplyConflict(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v1, _ := Apply(ctx, s, doc("a", "report"), "")
	v2, err := Apply(ctx, s, doc("b", "report"), v1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ctx, s, doc("c", "report"), v1) // stale: read before b
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("got %v, want a ConflictError", err)
	}
	if ce.Current != v2 || ce.Expected != v1 {
		t.Errorf("ConflictError %+v, want current %s expected %s", ce, v2, v1)
	}
	want := "policy version conflict: the stored policy is at version " + v2 + ", not " + v1 +
		": someone applied a change since you read it; review it with `stado optimize policy show` and " +
		"`stado optimize policy diff -f FILE`, then re-apply with --expect-version " + v2
	if err.Error() != want {
		t.Errorf("error text\n got: %s\nwant: %s", err, want)
	}
	if stored(t, s).ETag != v2 {
		t.Error("the stored policy must be unchanged")
	}
}

func TestApplyExpectVersionWithNothingStored(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	_, err := Apply(ctx, s, doc("a", "report"), "0123")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Current != "" || ce.Expected != "0123" {
		t.Fatalf("got %v, want a ConflictError with nothing current", err)
	}
	if !strings.Contains(err.Error(), "no policy is stored") || !strings.Contains(err.Error(), "apply without --expect-version") {
		t.Errorf("error text %q", err)
	}
	if _, err := s.Get(ctx, Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Error("nothing may be created")
	}
}

func TestApplyInvalidWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	bad := []byte("policy_version: x\nmode: enforce\n")
	_, err := Apply(ctx, s, bad, "")
	var es yamlstrict.Errors
	if !errors.As(err, &es) || err.Error() != `2:7: mode: unknown mode "enforce"; use one of: report, enforce-safe, enforce-owned` {
		t.Fatalf("got %v, want the Parse error unchanged", err)
	}
	if _, err := s.Get(ctx, Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Error("an invalid policy must not be created")
	}
	v1, _ := Apply(ctx, s, doc("a", "report"), "")
	if _, err := Apply(ctx, s, bad, v1); err == nil {
		t.Fatal("an invalid policy must be refused")
	}
	if stored(t, s).ETag != v1 {
		t.Error("an invalid policy must not replace a stored one")
	}
}

// TestApplyIdenticalIsNoChange: versions are content hashes, so re-applying
// the same bytes is refused as ErrNoChange rather than reported as a new
// version; a change in a comment alone is a change.
func TestApplyIdenticalIsNoChange(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	raw := doc("a", "report")
	v1, _ := Apply(ctx, s, raw, "")
	_, err := Apply(ctx, s, raw, v1)
	if !errors.Is(err, ErrNoChange) || !strings.Contains(err.Error(), v1) {
		t.Fatalf("got %v, want ErrNoChange naming %s", err, v1)
	}
	if errors.Is(err, ErrVersionConflict) {
		t.Error("no change is not a conflict")
	}
	commented := append([]byte("# reviewed by bob\n"), raw...)
	v2, err := Apply(ctx, s, commented, v1)
	if err != nil || v2 == v1 {
		t.Fatalf("a comment change must be applied: %v %v", v2, err)
	}
	// Stale expect-version with identical content: still a conflict.
	if _, err := Apply(ctx, s, commented, v1); !errors.Is(err, ErrVersionConflict) {
		t.Errorf("got %v, want a conflict", err)
	}
}

// failingStore fails every read.
type failingStore struct{ objstore.Store }

func (failingStore) Get(_ context.Context, key string) (objstore.Object, error) {
	return objstore.Object{}, fmt.Errorf("store get %s: %w: connection refused", key, objstore.ErrUnavailable)
}

func TestStoreErrorsAreWrapped(t *testing.T) {
	ctx := context.Background()
	s := failingStore{newStore()}
	if _, err := Load(ctx, s); !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "read policy from mem:") {
		t.Errorf("Load: %v", err)
	}
	if _, err := Apply(ctx, s, doc("a", "report"), ""); !errors.Is(err, objstore.ErrUnavailable) {
		t.Errorf("Apply: %v", err)
	}
}

// TestLoadInvalidFailsClosed: a stored policy that fails validation (written
// around Apply, or valid under an older stado) does not fail Load; it puts
// in effect a policy that refuses every mutation, and says why.
func TestLoadInvalidFailsClosed(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	bad := []byte("policy_version: x\nmode: enforce\nkeep_runs: 0\n")
	v, err := s.Put(ctx, Key, bad)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load(ctx, s)
	if err != nil {
		t.Fatalf("Load must not fail on an invalid stored policy: %v", err)
	}
	var es yamlstrict.Errors
	if !errors.As(l.Invalid, &es) || len(es) != 2 {
		t.Fatalf("Invalid = %v, want the two Parse problems", l.Invalid)
	}
	if l.Default || l.Version != v || string(l.Raw) != string(bad) {
		t.Errorf("Loaded = %+v", l)
	}
	p := l.Policy
	if p == nil || p.Mode.Mutates() || !p.Pause || p.MaxActionsPerTick != 0 || p.Allows("web-1", "api.service") ||
		p.PolicyVersion != InvalidVersion {
		t.Errorf("effective policy is not fail-closed: %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the fail-closed policy must itself be valid: %v", err)
	}
	if l.MutationsAllowed() {
		t.Error("an invalid stored policy must refuse mutations")
	}
	want := "stored policy state/autonomy/policy.yaml (version " + v + ") is invalid, so autonomy makes no repair: " +
		`2:7: mode: unknown mode "enforce"; use one of: report, enforce-safe, enforce-owned | ` +
		"3:12: keep_runs: must be between 1 and 1000000; got 0; " +
		"fix it with `stado optimize policy apply -f FILE --expect-version " + v + "`"
	if got := l.Refusal(); got != want {
		t.Errorf("Refusal()\n got: %s\nwant: %s", got, want)
	}

	// The way out named in the refusal works.
	if _, err := Apply(ctx, s, doc("fixed", "enforce-safe"), v); err != nil {
		t.Fatal(err)
	}
	if l, _ := Load(ctx, s); l.Invalid != nil || !l.MutationsAllowed() {
		t.Errorf("after the fix: %+v", l)
	}
}

func TestRefusalSummarizesManyProblems(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v, _ := s.Put(ctx, Key, []byte("a: 1\nb: 2\nc: 3\nd: 4\npolicy_version: x\n"))
	l, _ := Load(ctx, s)
	r := l.Refusal()
	if !strings.Contains(r, `3:1: c: unknown key "c"`) || strings.Contains(r, `4:1: d:`) ||
		!strings.HasSuffix(r, " | and 1 more; fix it with `stado optimize policy apply -f FILE --expect-version "+v+"`") {
		t.Errorf("Refusal() = %s", r)
	}
}

func TestRefusalForValidPolicies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{"policy_version: r1\nmode: report\n",
			"policy \"r1\" is in report mode, so repairs are only planned; to let autonomy repair, " +
				"set mode: enforce-safe or enforce-owned and apply it with `stado optimize policy apply -f FILE --expect-version V`"},
		{"policy_version: p1\nmode: enforce-owned\npause: true\n",
			"policy \"p1\" pauses autonomy (pause: true), so no repair runs; to resume, set pause: false and " +
				"apply it with `stado optimize policy apply -f FILE --expect-version V`"},
		{"policy_version: e1\nmode: enforce-owned\n", ""},
	} {
		s := newStore()
		v, err := Apply(ctx, s, []byte(tc.doc), "")
		if err != nil {
			t.Fatal(err)
		}
		l, err := Load(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(tc.want, "--expect-version V", "--expect-version "+v)
		if got := l.Refusal(); got != want {
			t.Errorf("%q: Refusal()\n got: %s\nwant: %s", tc.doc, got, want)
		}
		if l.MutationsAllowed() != (want == "") {
			t.Errorf("%q: MutationsAllowed %v", tc.doc, l.MutationsAllowed())
		}
	}
}

func TestDiff(t *testing.T) {
	old := []byte("policy_version: \"a\"\nmode: report   # for now\nkeep_runs: 10\n")
	proposed := []byte("policy_version: \"b\"\nmode: enforce-safe\nkeep_runs: 10\n")
	want := "--- stored (version 0f3a)\n+++ new.yaml\n@@ -1,3 +1,3 @@\n" +
		"-policy_version: \"a\"\n-mode: report   # for now\n+policy_version: \"b\"\n+mode: enforce-safe\n keep_runs: 10\n"
	if got := Diff("0f3a", old, "new.yaml", proposed); got != want {
		t.Errorf("Diff:\n%s\nwant:\n%s", got, want)
	}
	if got := Diff("0f3a", old, "same.yaml", old); got != "" {
		t.Errorf("identical documents must give no diff, got:\n%s", got)
	}
	want = "--- stored (none: the built-in default is in effect)\n+++ new.yaml\n@@ -0,0 +1,3 @@\n" +
		"+policy_version: \"b\"\n+mode: enforce-safe\n+keep_runs: 10\n"
	if got := Diff("", nil, "new.yaml", proposed); got != want {
		t.Errorf("Diff against nothing stored:\n%s\nwant:\n%s", got, want)
	}
}

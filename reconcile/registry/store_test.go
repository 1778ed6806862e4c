package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/yamlstrict"
	"github.com/stado/stado/objstore"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newStore() *objstore.Mem { return objstore.NewMem(clock.NewFake(t0)) }

func doc(hosts ...string) []byte {
	var b strings.Builder
	b.WriteString("# applied by a test\nservices:\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "  - name: api\n    host: %s\n    unit: api.service\n    repair: restart\n    channel: ssh\n", h)
	}
	if len(hosts) == 0 {
		b.WriteString("  []\n")
	}
	return []byte(b.String())
}

func stored(t *testing.T, s objstore.Store) objstore.Object {
	t.Helper()
	obj, err := s.Get(context.Background(), Key)
	if err != nil {
		t.Fatalf("reading the stored registry: %v", err)
	}
	return obj
}

func TestLoadNothingStored(t *testing.T) {
	l, err := Load(context.Background(), newStore())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Missing || l.Raw != nil || l.Version != "" || l.Registry == nil || l.Registry.Services == nil || len(l.Registry.Services) != 0 {
		t.Errorf("Loaded = %+v, want an empty registry marked missing", l)
	}
}

func TestApplyCreateThenLoad(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	raw := doc("web-1", "web-2")
	v, r, err := Apply(ctx, s, raw, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Services) != 2 {
		t.Errorf("Apply returned %d services", len(r.Services))
	}
	obj := stored(t, s)
	if v == "" || v != obj.ETag || string(obj.Body) != string(raw) {
		t.Errorf("Apply returned version %q; store has %q with body %q", v, obj.ETag, obj.Body)
	}
	l, err := Load(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if l.Missing || l.Version != v || string(l.Raw) != string(raw) || !l.ModTime.Equal(t0) || len(l.Registry.Services) != 2 {
		t.Errorf("Loaded = %+v", l)
	}
}

func TestApplyCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v1, _, err := Apply(ctx, s, doc("web-1"), "")
	if err != nil {
		t.Fatal(err)
	}
	v2, _, err := Apply(ctx, s, doc("web-1", "web-2"), v1)
	if err != nil {
		t.Fatal(err)
	}
	if v2 == v1 || stored(t, s).ETag != v2 {
		t.Errorf("after CAS: v1 %s v2 %s stored %s", v1, v2, stored(t, s).ETag)
	}
}

func TestApplyRequiresExpectVersionOnceStored(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v1, _, _ := Apply(ctx, s, doc("web-1"), "")
	_, _, err := Apply(ctx, s, doc("web-2"), "")
	if !errors.Is(err, ErrExpectVersionRequired) {
		t.Fatalf("got %v, want ErrExpectVersionRequired", err)
	}
	want := "a service registry is already stored: --expect-version is required: it is at version " + v1 +
		"; review it with `stado service show`, then pass --expect-version " + v1
	if err.Error() != want {
		t.Errorf("error text\n got: %s\nwant: %s", err, want)
	}
	if stored(t, s).ETag != v1 {
		t.Error("the stored registry must be unchanged")
	}
}

func TestApplyConflict(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	v1, _, _ := Apply(ctx, s, doc("web-1"), "")
	v2, _, err := Apply(ctx, s, doc("web-2"), v1)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Apply(ctx, s, doc("web-3"), v1) // stale: read before web-2
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrVersionConflict) || ce.Current != v2 || ce.Expected != v1 {
		t.Fatalf("got %v, want a ConflictError from %s to %s", err, v1, v2)
	}
	want := "service registry version conflict: the stored registry is at version " + v2 + ", not " + v1 +
		": someone applied a change since you read it; review it with `stado service show`, then re-apply with --expect-version " + v2
	if err.Error() != want {
		t.Errorf("error text\n got: %s\nwant: %s", err, want)
	}
	if stored(t, s).ETag != v2 {
		t.Error("the stored registry must be unchanged")
	}
}

func TestApplyExpectVersionWithNothingStored(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	_, _, err := Apply(ctx, s, doc("web-1"), "0123")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Current != "" || ce.Expected != "0123" || !strings.Contains(err.Error(), "apply without --expect-version") {
		t.Fatalf("got %v, want a ConflictError with nothing current", err)
	}
	if _, err := s.Get(ctx, Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Error("nothing may be created")
	}
}

func TestApplyInvalidWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	bad := []byte("services:\n  - name: api\n    host: web 1\n    unit: api.service\n    managed: false\n")
	_, _, err := Apply(ctx, s, bad, "")
	var es yamlstrict.Errors
	if !errors.As(err, &es) || !strings.HasPrefix(err.Error(), `3:11: services[0].host: host "web 1" contains ' '`) {
		t.Fatalf("got %v, want the Parse error unchanged", err)
	}
	if _, err := s.Get(ctx, Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Error("an invalid registry must not be created")
	}
}

func TestApplyIdenticalIsNoChange(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	raw := doc("web-1")
	v1, _, _ := Apply(ctx, s, raw, "")
	_, _, err := Apply(ctx, s, raw, v1)
	if !errors.Is(err, ErrNoChange) || !strings.Contains(err.Error(), v1) {
		t.Fatalf("got %v, want ErrNoChange naming %s", err, v1)
	}
}

func TestLoadInvalidStoredRegistry(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	// Written behind Apply's back, as a hand edit of the store would.
	bad := "services:\n  - name: api\n    host: -web\n    unit: api.service\n    managed: false\n  - nme: x\n"
	v, err := s.Put(ctx, Key, []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(ctx, s)
	var ie *InvalidError
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) || ie.Version != v {
		t.Fatalf("got %v, want an InvalidError at %s", err, v)
	}
	msg := err.Error()
	for _, want := range []string{
		"the stored service registry state/services/registry.yaml (version " + v + ") is invalid: ",
		`3:11: services[0].host: host "-web" starts with "-"`,
		` | 6:5: services[1].nme: unknown key "nme"`,
		" | and 4 more; fix it and apply it with `stado service apply -f FILE --expect-version " + v + "`",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the error must be one line: %q", msg)
	}
	doc, err := Fetch(ctx, s)
	if err != nil || string(doc.Raw) != bad || doc.Version != v {
		t.Errorf("Fetch = %+v, %v; show must still see an invalid registry", doc, err)
	}
}

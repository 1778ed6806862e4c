package autonomy

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/s3test"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

// s3srv is the package's S3 server, started once in TestMain.
var s3srv *s3test.Server

func TestMain(m *testing.M) {
	// A child process of the multi-process tests runs one worker, not tests.
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(s3test.RunTests(m, &s3srv))
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// backend is one store implementation: newLocation makes a fresh, empty
// location; open returns a new client of it, as another process would have;
// env is what a child process needs to reach it.
type backend struct {
	name        string
	newLocation func(t testing.TB) string
	open        func(t testing.TB, loc string) objstore.Store
	env         func() []string
}

func fsBackend() backend {
	return backend{
		name:        "fs",
		newLocation: func(t testing.TB) string { return t.TempDir() },
		open: func(t testing.TB, loc string) objstore.Store {
			t.Helper()
			s, err := objstore.NewFS(loc, clock.Real{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		env: func() []string { return nil },
	}
}

func s3Backend() backend {
	return backend{
		name:        "s3",
		newLocation: func(t testing.TB) string { return s3srv.URL(s3srv.Bucket(t), "fleet") },
		open: func(t testing.TB, loc string) objstore.Store {
			t.Helper()
			s, err := objstore.Open(context.Background(), loc, objstore.OpenOptions{
				S3: objstore.S3Options{Credentials: s3srv.Credentials()},
			})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		env: func() []string { return s3srv.Env() },
	}
}

// sharedBackends are the stores several processes can share.
func sharedBackends() []backend { return []backend{fsBackend(), s3Backend()} }

// newMem is a mem store on a fake clock reading t0.
func newMem() (*objstore.Mem, *clock.Fake) {
	c := clock.NewFake(t0)
	return objstore.NewMem(c), c
}

// enforcing is a stored, valid policy in enforce-safe mode.
func enforcing(t testing.TB) *policy.Loaded {
	t.Helper()
	p, err := policy.Parse([]byte("policy_version: \"test-1\"\nmode: enforce-safe\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &policy.Loaded{Policy: p, Raw: []byte("…"), Version: "v-enforce"}
}

// putControl stores body as the control object, unconditionally.
func putControl(t testing.TB, s objstore.Store, body string) {
	t.Helper()
	if _, err := s.Put(context.Background(), Key, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t testing.TB, s objstore.Store) *Stored {
	t.Helper()
	st, err := Load(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func exact(t time.Time) objstore.TimeBounds { return objstore.TimeBounds{Earliest: t, Latest: t} }

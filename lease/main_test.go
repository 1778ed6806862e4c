package lease_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/s3test"
	"github.com/stado/stado/objstore"
)

// s3srv is the package's S3 server, started once in TestMain.
var s3srv *s3test.Server

func TestMain(m *testing.M) {
	// A child process of the multi-process tests runs the racer, not tests.
	if os.Getenv(racerEnv) != "" {
		os.Exit(racerMain())
	}
	os.Exit(s3test.RunTests(m, &s3srv))
}

// backend is one store implementation under test. newLocation makes a fresh,
// empty location; open returns a new client of it with the given local clock,
// as a separate process would have.
type backend struct {
	name        string
	newLocation func(t testing.TB) string
	open        func(t testing.TB, loc string, local clock.Clock) objstore.Store
	// slack is how late, beyond the store clock's own uncertainty, a take
	// may succeed after an instant on this backend (request latency).
	slack time.Duration
}

func backends() []backend {
	mems := map[string]*objstore.Mem{}
	return []backend{
		{
			name: "mem",
			newLocation: func(t testing.TB) string {
				loc := t.Name()
				mems[loc] = objstore.NewMem(clock.Real{})
				return loc
			},
			open:  func(t testing.TB, loc string, _ clock.Clock) objstore.Store { return mems[loc] },
			slack: 200 * time.Millisecond,
		},
		{
			name:        "fs",
			newLocation: func(t testing.TB) string { return t.TempDir() },
			open: func(t testing.TB, loc string, _ clock.Clock) objstore.Store {
				// The fs store's clock is the host's, whatever the process's
				// local clock says: every process on the host shares it.
				s, err := objstore.NewFS(loc, clock.Real{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			},
			slack: 300 * time.Millisecond,
		},
		{
			name:        "s3",
			newLocation: func(t testing.TB) string { return s3srv.URL(s3srv.Bucket(t), "fleet") },
			open: func(t testing.TB, loc string, local clock.Clock) objstore.Store {
				s, err := objstore.Open(context.Background(), loc, objstore.OpenOptions{
					Clock: local,
					S3:    objstore.S3Options{Credentials: s3srv.Credentials()},
				})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			slack: 500 * time.Millisecond,
		},
	}
}

// forEachBackend runs fn as a subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

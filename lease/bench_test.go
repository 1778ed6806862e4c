package lease_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
)

// BenchmarkTakeRelease measures one uncontended try-take plus release, the
// lease cost of every repair, on each backend.
func BenchmarkTakeRelease(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b, be.newLocation(b), clock.Real{})
			m := newManager(b, s, clock.Real{})
			ctx := bg(b)
			if _, err := s.Now(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				g, err := m.TryTake(ctx, "service:web-1:api.service", time.Minute, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if res, err := m.Release(ctx, g); err != nil || res != lease.Released {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkTakeReleaseContended has 16 goroutines contend for one subject
// with the blocking take (polling every 2ms while the subject is held); an
// op is one take and its release, so ns/op is the subject's hand-over time.
func BenchmarkTakeReleaseContended(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			loc := be.newLocation(b)
			ctx := bg(b)
			// 16 contenders in all: RunParallel starts parallelism × GOMAXPROCS.
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				m, err := lease.NewManager(be.open(b, loc, clock.Real{}), lease.Config{
					Holder: "service-reconciler", Owner: fmt.Sprintf("bench/%p", pb), PollInterval: 2 * time.Millisecond,
				})
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					g, err := m.Take(ctx, "service:web-1:api.service", time.Minute, "bench")
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := m.Release(ctx, g); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

package objstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

// BenchmarkFSGetLarge reads a 16 MB object, the size of a registry of some
// 100,000 services, which every tick reads once.
func BenchmarkFSGetLarge(b *testing.B) {
	s, err := objstore.NewFS(b.TempDir(), clock.Real{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<20)
	if _, err := s.Put(ctx, "state/services/registry.yaml", body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		o, err := s.Get(ctx, "state/services/registry.yaml")
		if err != nil || len(o.Body) != len(body) {
			b.Fatal(len(o.Body), err)
		}
	}
}

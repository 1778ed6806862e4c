package beacon_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stado/stado/reconcile/beacon"
)

// BenchmarkDecode decodes one host's beacon of ten units, as a tick does for
// every host (10,000 times for a fleet of 100,000 services).
func BenchmarkDecode(b *testing.B) {
	bc := &beacon.Beacon{Host: "h00001", ReportedAt: time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)}
	for i := 0; i < 10; i++ {
		bc.Units = append(bc.Units, beacon.Unit{Unit: fmt.Sprintf("u%d.service", i), ActiveState: beacon.Active, SubState: "running"})
	}
	data, err := bc.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := beacon.Decode(data, "h00001"); err != nil {
			b.Fatal(err)
		}
	}
}

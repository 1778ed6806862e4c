package tickrun_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stado/stado/bench/internal/fleet"
	"github.com/stado/stado/bench/internal/tickrun"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

// TestSyntheticFleetReconciles checks the benchmark's fleet on a small
// scale: the tick reconciles exactly its failed units, by the route the
// documentation describes (re-checked down, repaired, verified up), with the
// store requests it documents. It asserts no time.
func TestSyntheticFleetReconciles(t *testing.T) {
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Skip("no touch program")
	}
	dir := t.TempDir()
	markers := filepath.Join(dir, "markers")
	if err := fleet.ResetMarkers(markers); err != nil {
		t.Fatal(err)
	}
	ep, err := fleet.StartEndpoints(markers)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, fleet.LocalConfig(touch), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fleet.Spec{Services: 300, Endpoint: ep.URL}
	storeDir := filepath.Join(dir, "store")
	st, err := objstore.NewFS(storeDir, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := spec.Seed(ctx, st, fleet.Parallel, 4); err != nil {
		t.Fatal(err)
	}
	t.Chdir(markers) // the repair runs touch {service} in the reconciler's directory
	stats, err := tickrun.Run(ctx, tickrun.Options{StoreURL: storeDir, ConfigPath: config})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Error != "" || stats.Summary["reconciled"] != spec.Down() || stats.Summary["healthy"] != spec.Services-spec.Down() || spec.Down() != 3 {
		t.Fatalf("summary %v, error %q", stats.Summary, stats.Error)
	}
	if got := stats.Requests["beacon"]["get"]; got != int64(spec.Hosts()) {
		t.Fatalf("beacon reads %d, want one per host (%d)", got, spec.Hosts())
	}
	lease := stats.Requests["lease"]
	if lease["create"] != 3 || lease["delete-if-match"] != 3 || lease["get"] != 0 {
		t.Fatalf("lease requests %v", lease)
	}
	if stats.ReportBytes == 0 {
		t.Fatal("no report size")
	}
	for i := 0; i < spec.Services; i++ {
		_, err := os.Stat(filepath.Join(markers, fleet.Name(i)))
		if fleet.IsDown(i) != (err == nil) {
			t.Fatalf("service %d: down %v, marker %v", i, fleet.IsDown(i), err)
		}
	}
}

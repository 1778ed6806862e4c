// Package configs holds the example configuration files; its test keeps
// them valid as the schemas change.
package configs

import (
	"os"
	"testing"

	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile/registry"
)

func TestExamplesAreValid(t *testing.T) {
	for file, parse := range map[string]func([]byte) error{
		"policy.yaml":   func(b []byte) error { _, err := policy.Parse(b); return err },
		"registry.yaml": func(b []byte) error { _, err := registry.Parse(b); return err },
		"config.yaml":   func(b []byte) error { _, err := localconfig.Parse(b); return err },
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := parse(b); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
	p, _ := policy.Parse(mustRead(t, "policy.yaml"))
	if d := policy.Default(); p.Mode != d.Mode || p.DecisionTTLSeconds != d.DecisionTTLSeconds || p.KeepRuns != d.KeepRuns ||
		p.Evidence != d.Evidence || p.CircuitBreaker != d.CircuitBreaker || p.MaxActionsPerTick != d.MaxActionsPerTick {
		t.Errorf("configs/policy.yaml says its values are the defaults, but they differ: %+v vs %+v", p, d)
	}
}

func mustRead(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

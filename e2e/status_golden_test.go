package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// `stado optimize status` for a fixed store (policy, control state, latest
// report) as golden files, text and JSON: the exact operator-facing output,
// control characters from stored data escaped.
func TestStatusGolden(t *testing.T) {
	f := newFleet(t, "fs")
	for src, key := range map[string]string{
		"policy.yaml":  "state/autonomy/policy.yaml",
		"control.json": "state/autonomy/control.json",
		"report.json":  "state/autonomy/services/latest.json",
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "status", src))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(f.store, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	now := regexp.MustCompile(`"now": "[^"]*"`)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"status.txt", []string{"optimize", "status"}},
		{"status_all.txt", []string{"optimize", "status", "--all"}},
		{"status.json", []string{"optimize", "status", "--json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out := f.must(tc.args...).Stdout
			out = strings.ReplaceAll(out, f.store, "STORE")
			out = now.ReplaceAllString(out, `"now": "NOW"`)
			for _, r := range out {
				if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) {
					t.Fatalf("status wrote a raw control character %U:\n%q", r, out)
				}
			}
			path := filepath.Join("testdata", "status", tc.golden+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if out != string(want) {
				t.Errorf("status differs from %s:\n--- got ---\n%s\n--- want ---\n%s", path, out, want)
			}
		})
	}
}

// Package yamlstricttest owns the golden-file test every strict YAML
// document kind shares: a directory of malformed documents, each with the
// exact error text its parser must give.
package yamlstricttest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stado/stado/internal/yamlstrict"
)

// positioned matches an error line that names its line and column.
var positioned = regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*: `)

// CheckRefusal says what is wrong with a parser's refusal err, or returns
// "": it must be yamlstrict.Errors, and every line of it must name its line
// and column, which is what lets an operator find the problem.
func CheckRefusal(err error) string {
	var es yamlstrict.Errors
	if !errors.As(err, &es) {
		return fmt.Sprintf("error of type %T, want yamlstrict.Errors: %v", err, err)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !positioned.MatchString(line) {
			return fmt.Sprintf("problem without line:column: %q", line)
		}
	}
	return ""
}

// AddSeeds adds every file matching the patterns to f's seed corpus, so
// that each new golden or valid document is a fuzz seed without further
// work.
func AddSeeds(f *testing.F, patterns ...string) {
	f.Helper()
	for _, pattern := range patterns {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// Golden parses every dir/*.yaml with parse and compares the whole error
// text with dir/NAME.golden. Every input must fail with yamlstrict.Errors,
// every error line must name its line and column, and parse must return no
// document along with its error. With update set the .golden files are
// rewritten from the current output instead, for review in the diff.
// minInputs guards against a testdata directory gone missing.
func Golden[T any](t *testing.T, dir string, minInputs int, update bool, parse func([]byte) (*T, error)) {
	t.Helper()
	inputs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < minInputs {
		t.Fatalf("found %d golden inputs in %s, want at least %d; the testdata is missing", len(inputs), dir, minInputs)
	}
	for _, in := range inputs {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := parse(data)
			if err == nil {
				t.Fatalf("parsed without error: %+v", doc)
			}
			if doc != nil {
				t.Error("the parser returned a document along with an error")
			}
			if problem := CheckRefusal(err); problem != "" {
				t.Error(problem)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(in, ".yaml") + ".golden"
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run this package's TestGolden with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("error text differs from %s\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

package policy

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stado/stado/internal/yamlstrict/yamlstricttest"
)

// FuzzParse: whatever the input, Parse must not panic or hang; a refusal
// places every problem at a line and column; an accepted policy is valid
// and survives a round trip through YAML unchanged. The committed corpus in
// testdata/fuzz/FuzzParse holds the golden and valid inputs; they are also
// added here so that a new golden file is a seed without further work.
func FuzzParse(f *testing.F) {
	yamlstricttest.AddSeeds(f, "testdata/golden/*.yaml", "testdata/valid/*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		// The fuzzer has no per-input timeout; turn a hang into a crash that
		// names the input.
		timer := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Parse hung on %q", truncate(data, 200))) })
		p, err := Parse(data)
		timer.Stop()

		if err != nil {
			if p != nil {
				t.Fatal("a policy returned along with an error")
			}
			if problem := yamlstricttest.CheckRefusal(err); problem != "" {
				t.Fatal(problem)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a policy that Validate refuses: %v", err)
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parsing the marshalled policy failed: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, q)
		}
		p.Allows("web-1", "api.service")
	})
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

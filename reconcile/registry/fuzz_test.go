package registry

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stado/stado/internal/yamlstrict/yamlstricttest"
	"github.com/stado/stado/reconcile/probe"
)

// rtService is a Service as yaml.v3 would write it, for the round trip.
type rtService struct {
	Name     string `yaml:"name"`
	Host     string `yaml:"host"`
	Unit     string `yaml:"unit"`
	Endpoint string `yaml:"endpoint,omitempty"`
	Repair   string `yaml:"repair,omitempty"`
	Channel  string `yaml:"channel,omitempty"`
	Managed  bool   `yaml:"managed"`
}

// FuzzParse: whatever the input, Parse must not panic or hang; it must give
// exactly the strict decoder's answer (the fast path may only ever agree with
// it); a refusal places every problem at a line and column; an accepted
// registry holds only valid services and survives a round trip through YAML
// unchanged. The committed corpus in testdata/fuzz/FuzzParse holds edge
// cases of the fast path; the golden and valid inputs are added here too.
func FuzzParse(f *testing.F) {
	yamlstricttest.AddSeeds(f, "testdata/golden/*.yaml", "testdata/valid/*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		timer := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Parse hung on %q", truncate(data, 200))) })
		r, err := Parse(data)
		timer.Stop()

		var strict *Registry
		entries, serr := strictDecode(data)
		if serr == nil {
			strict = build(entries)
		}
		if len(data) <= MaxDocumentSize && (err == nil) != (serr == nil) {
			t.Fatalf("Parse and the strict path disagree: Parse %v, strict %v", err, serr)
		}
		if err != nil {
			if r != nil {
				t.Fatal("a registry returned along with an error")
			}
			if problem := yamlstricttest.CheckRefusal(err); problem != "" {
				t.Fatal(problem)
			}
			if serr != nil && err.Error() != serr.Error() {
				t.Fatalf("Parse's errors are not the strict path's:\n%v\n---\n%v", err, serr)
			}
			return
		}
		if !reflect.DeepEqual(r, strict) {
			t.Fatalf("the fast path decoded differently:\nfast   %+v\nstrict %+v", r, strict)
		}
		checkValid(t, r)

		rt := make([]rtService, len(r.Services))
		for i, s := range r.Services {
			rt[i] = rtService{s.Name, s.Host, s.Unit, s.Endpoint, s.Repair, string(s.Channel), s.Managed}
		}
		out, err := yaml.Marshal(map[string][]rtService{"services": rt})
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parsing the marshalled registry failed: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("round trip changed the registry:\n%+v\n%+v", r, again)
		}
	})
}

// checkValid asserts what a consumer of a Registry relies on.
func checkValid(t *testing.T, r *Registry) {
	t.Helper()
	if r.Services == nil {
		t.Fatal("Services is nil")
	}
	seen := map[string]bool{}
	for _, s := range r.Services {
		if err := CheckHost(s.Host); err != nil {
			t.Fatalf("accepted host: %v", err)
		}
		if err := CheckUnit(s.Unit); err != nil {
			t.Fatalf("accepted unit: %v", err)
		}
		if s.Name == "" || checkName(s.Name, true) != "" {
			t.Fatalf("accepted name %q", s.Name)
		}
		if s.Endpoint != "" {
			if _, err := probe.ParseEndpoint(s.Endpoint); err != nil {
				t.Fatalf("accepted endpoint: %v", err)
			}
		}
		if s.Managed && (s.Repair == "" || !s.Channel.Valid()) {
			t.Fatalf("managed service without repair or channel: %+v", s)
		}
		if s.Channel != "" && !s.Channel.Valid() {
			t.Fatalf("accepted channel %q", s.Channel)
		}
		if seen[s.Subject()] {
			t.Fatalf("subject %s twice", s.Subject())
		}
		seen[s.Subject()] = true
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

package registry

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stado/stado/internal/yamlstrict"
	"github.com/stado/stado/internal/yamlstrict/yamlstricttest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current output")

// TestGolden parses every malformed registry in testdata/golden and compares
// the whole error text with its .golden file. Run with -update to rewrite
// the .golden files, then review the diff.
func TestGolden(t *testing.T) {
	yamlstricttest.Golden(t, "testdata/golden", 15, *update, Parse)
}

// TestGoldenEssentials: each listed malformed registry is
// reported with the place and words an operator needs, whatever else the
// golden files hold.
func TestGoldenEssentials(t *testing.T) {
	cases := map[string][]string{
		"unknown_key":       {`4:5: services[0].unti: unknown key "unti" (did you mean "unit"?)`},
		"duplicate_service": {`12:5: services[2]: duplicate service: host "web-1", unit "api.service" is already declared at 2:5 (services[0])`},
		"bad_host_chars":    {`3:11: services[0].host: host "web 1" contains ' ' (U+0020)`, `8:11: services[1].host: host "../../etc" contains '/'`, `9:11: services[1].unit: unit "api\x1b[2J.service" contains '\x1b' (U+001B)`},
		"leading_dash":      {`3:11: services[0].host: host "-web-1" starts with "-"`, `4:11: services[0].unit: unit "--now" starts with "-"`, `8:11: services[1].host: host ".web-1" starts with "."`},
		"bad_endpoint":      {`5:15: services[0].endpoint: endpoint "ftp://web-1/healthz": scheme "ftp" is not supported`, `11:15: services[1].endpoint: endpoint "tcp://db-1" names no port`},
		"unknown_channel":   {`6:14: services[0].channel: unknown channel "telnet"; use one of: exec, ssh, local`},
		"missing_repair":    {`2:5: services[0].repair: is required for a managed service`, `9:13: services[1].repair: must not be empty for a managed service`},
	}
	for name, wants := range cases {
		data, err := os.ReadFile("testdata/golden/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(data)
		if err == nil {
			t.Errorf("%s: parsed without error", name)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not contain %q:\n%s", name, w, err)
			}
		}
	}
}

func TestParseDesignExample(t *testing.T) {
	data, err := os.ReadFile("testdata/valid/design.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Service{{Name: "api", Host: "web-1", Unit: "api.service", Endpoint: "http://web-1:8080/healthz",
		Repair: "restart", Channel: ChannelSSH, Managed: true}}
	if !reflect.DeepEqual(r.Services, want) {
		t.Errorf("got %+v\nwant %+v", r.Services, want)
	}
	if got := r.Services[0].Subject(); got != "service:web-1:api.service" {
		t.Errorf("Subject() = %q", got)
	}
}

func TestParseFull(t *testing.T) {
	data, err := os.ReadFile("testdata/valid/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Service{
		{Name: "api", Host: "web-1", Unit: "api.service", Endpoint: "http://web-1:8080/healthz", Repair: "restart", Channel: ChannelSSH, Managed: true},
		{Name: "postgres primary", Host: "db-1.eu-west.example", Unit: "postgresql@16-main.service", Endpoint: "tcp://db-1.eu-west.example:5432", Repair: "restart", Channel: ChannelExec, Managed: true},
		{Name: "cron", Host: "web-1", Unit: "cron.service", Managed: false},
		{Name: "nginx", Host: "web-1", Unit: "nginx.service", Endpoint: "https://web-1/status?full=1&x=%20", Repair: "start", Channel: ChannelLocal, Managed: true},
		{Name: "ipv6 box", Host: "fe80::1", Unit: "sshd.service", Endpoint: "tcp://[fe80::1]:22", Repair: "restart", Channel: ChannelSSH, Managed: true},
	}
	if !reflect.DeepEqual(r.Services, want) {
		t.Errorf("got  %+v\nwant %+v", r.Services, want)
	}
	if got := r.Hosts(); !reflect.DeepEqual(got, []string{"db-1.eu-west.example", "fe80::1", "web-1"}) {
		t.Errorf("Hosts() = %v", got)
	}
	if got := r.OnHost("web-1"); len(got) != 3 || got[0].Unit != "api.service" || got[2].Unit != "nginx.service" {
		t.Errorf("OnHost(web-1) = %+v", got)
	}
}

// TestFastPathAgreesWithStrict: every valid document decodes to the same
// services on both paths, and the documents written in the plain shape do
// take the fast path (or the benchmark measures nothing).
func TestFastPathAgreesWithStrict(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	fast := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		strict, err := strictDecode(data)
		if err != nil {
			t.Errorf("%s: strict: %v", f, err)
			continue
		}
		entries, ok := fastDecode(data)
		fast[filepath.Base(f)] = ok
		if ok && !reflect.DeepEqual(build(entries), build(strict)) {
			t.Errorf("%s: the paths disagree:\nfast   %+v\nstrict %+v", f, build(entries), build(strict))
		}
	}
	for _, name := range []string{"design.yaml", "full.yaml", "empty.yaml"} {
		if !fast[name] {
			t.Errorf("%s did not take the fast path", name)
		}
	}
	for _, name := range []string{"flow.yaml", "block_scalars.yaml"} {
		if fast[name] {
			t.Errorf("%s took the fast path, which does not read flow or block scalars", name)
		}
	}
	if _, ok := fastDecode(generate(1000)); !ok {
		t.Error("a generated registry did not take the fast path")
	}
}

// TestFastPathRefusesEdgeCases: lines whose YAML meaning differs from a
// naive reading go to the strict path.
func TestFastPathRefusesEdgeCases(t *testing.T) {
	head := "services:\n  - name: api\n    host: web-1\n    unit: api.service\n    channel: ssh\n"
	for _, tail := range []string{
		"    repair: restart # ok\n    repair: start\n", // duplicate key
		"    repair: null\n",
		"    repair: ~\n",
		"    repair:\n",
		"    repair: restart\n      more\n", // a multi-line plain scalar
		"    repair: restart\n    managed: \"true\"\n",
		"    repair: restart\n    managed: yes\n",
		"    repair: 'it''s'\n",
		"    repair: \"a\\tb\"\n",
		"    repair: a#b\n",
		"    repair: a: b\n",
		"    repair: restart:\n",
		"    repair: *alias\n",
		"    repair: !!str x\n",
		"    repair:\trestart\n",
		"    repair: restart\r\n",
		"    repair: restart\n# NEL\u0085 in a comment\n",
		"    repair: restart\n---\n",
		"    repair: restart\nother: 1\n",
		"   repair: restart\n",
	} {
		if _, ok := fastDecode([]byte(head + tail)); ok {
			t.Errorf("fast path accepted %q", tail)
		}
	}
}

func TestCheckHostAndUnit(t *testing.T) {
	for _, ok := range []string{"web-1", "db-1.eu-west.example", "fe80::1", "getty@tty1.service", "_x", "a"} {
		if err := CheckHost(ok); err != nil {
			t.Errorf("CheckHost(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", ".x", "..", "a/b", "../x", "a b", "a\x00", "ü", strings.Repeat("a", 254)} {
		if err := CheckHost(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CheckHost(%q) = %v, want ErrInvalidName", bad, err)
		}
		if err := CheckUnit(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CheckUnit(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
}

func TestTooManyServices(t *testing.T) {
	var es yamlstrict.Errors
	entries := make([]entry, MaxServices+1)
	for i := range entries {
		entries[i] = entry{Name: "s", Host: fmt.Sprintf("h%d", i), Unit: "u", Managed: &valFalse}
	}
	es = validate(entries, nil)
	if len(es) != 1 || !strings.Contains(es[0].Msg, "declares 200001 services, more than the 200000 allowed") {
		t.Errorf("got %v", es)
	}
	if _, err := Parse(make([]byte, MaxDocumentSize+1)); err == nil || !strings.Contains(err.Error(), "more than the 67108864 allowed") {
		t.Errorf("an oversized document: %v", err)
	}
}

// generate writes a registry of n services in the plain shape.
func generate(n int) []byte {
	var b strings.Builder
	b.WriteString("# generated\nservices:\n")
	for i := 0; i < n; i++ {
		unit := [2]string{"api.service", "worker@1.service"}[i%2]
		fmt.Fprintf(&b, "  - name: svc-%d\n    host: web-%d\n    unit: %s\n    endpoint: http://web-%d:8080/healthz\n    repair: restart\n    channel: ssh\n", i, i/2, unit, i)
	}
	return []byte(b.String())
}

// BenchmarkParse100k measures what a tick pays to load a registry of
// 100,000 services written in the plain shape.
func BenchmarkParse100k(b *testing.B) {
	data := generate(100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := Parse(data)
		if err != nil || len(r.Services) != 100_000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse100kStrict is the same registry on the strict path, which
// any document outside the plain shape (or with a problem) takes.
func BenchmarkParse100kStrict(b *testing.B) {
	data := generate(100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		entries, err := strictDecode(data)
		if err != nil || len(entries) != 100_000 {
			b.Fatal(err)
		}
	}
}

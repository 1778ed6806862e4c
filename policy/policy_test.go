package policy

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stado/stado/internal/yamlstrict/yamlstricttest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current output")

// TestGolden parses every malformed policy in testdata/golden and compares
// the whole error text with its .golden file. Run with -update to rewrite
// the .golden files, then review the diff.
func TestGolden(t *testing.T) {
	yamlstricttest.Golden(t, "testdata/golden", 20, *update, Parse)
}

func TestDefault(t *testing.T) {
	p := Default()
	want := &Policy{
		PolicyVersion: "default-report-only", Mode: ModeReport, Pause: false,
		DecisionTTLSeconds: 360, MaxActionsPerTick: 10, MaxConcurrentMutations: 2,
		CircuitBreaker: CircuitBreaker{Failures: 4, CooldownSeconds: 900, MaxCooldownSeconds: 14400},
		Evidence: Evidence{BeaconSilenceSeconds: 300, ProbeTimeoutSeconds: 5, ProbeConcurrency: 32,
			VerifyTimeoutSeconds: 60},
		FenceAllowanceSeconds: 5, KeepRuns: 1000,
		Services: Services{Allow: []string{"*"}, Deny: []string{}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Default() =\n%+v\nwant\n%+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the default policy must be valid: %v", err)
	}
	if p.Mode.Mutates() {
		t.Error("the default policy must not mutate")
	}
	p.Services.Allow[0] = "changed"
	if Default().Services.Allow[0] != "*" {
		t.Error("Default must return a fresh value each time")
	}
}

// TestDesignExampleIsTheDefault: the example of DESIGN §6, copied verbatim
// into testdata, states the defaults; Default must agree with it.
func TestDesignExampleIsTheDefault(t *testing.T) {
	data, err := os.ReadFile("testdata/valid/design.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.PolicyVersion = "2026-11-30-a"
	if !reflect.DeepEqual(p, want) {
		t.Errorf("DESIGN §6 example parses to\n%+v\nDefault() is\n%+v", p, want)
	}
}

func TestParseFull(t *testing.T) {
	data, err := os.ReadFile("testdata/valid/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := &Policy{
		PolicyVersion: "2026-11-30-a", Mode: ModeEnforceSafe, Pause: false,
		DecisionTTLSeconds: 420, MaxActionsPerTick: 5, MaxConcurrentMutations: 3,
		CircuitBreaker: CircuitBreaker{Failures: 6, CooldownSeconds: 600, MaxCooldownSeconds: 7200},
		Evidence: Evidence{BeaconSilenceSeconds: 240, ProbeTimeoutSeconds: 3, ProbeConcurrency: 16,
			VerifyTimeoutSeconds: 90},
		FenceAllowanceSeconds: 10, KeepRuns: 500,
		Services: Services{Allow: []string{"web-*:*", "db-1:postgres@*.service"}, Deny: []string{"*:sshd.service"}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", p, want)
	}
	if got := p.DecisionTTL().String(); got != "7m0s" {
		t.Errorf("DecisionTTL = %s", got)
	}
}

// TestParseDefaults: every omitted key takes its default, including in a
// section that is present but partial.
func TestParseDefaults(t *testing.T) {
	p, err := Parse([]byte("policy_version: minimal\ncircuit_breaker:\n  failures: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.PolicyVersion = "minimal"
	want.CircuitBreaker.Failures = 9
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", p, want)
	}
}

// TestParseListReplacesDefault: a list written in the policy replaces the
// default list; it is not appended to it.
func TestParseListReplacesDefault(t *testing.T) {
	p, err := Parse([]byte("policy_version: x\nservices:\n  allow: [\"web-1:*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Services.Allow, []string{"web-1:*"}) {
		t.Errorf("allow = %q", p.Services.Allow)
	}
	p, err = Parse([]byte("policy_version: x\nservices:\n  allow: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Services.Allow) != 0 || p.Allows("web-1", "api.service") {
		t.Errorf("an empty allow list must allow nothing: %q", p.Services.Allow)
	}
}

func TestParseBoundsInclusive(t *testing.T) {
	doc := "policy_version: x\ndecision_ttl_seconds: 86400\nmax_actions_per_tick: 0\nmax_concurrent_mutations: 256\n" +
		"circuit_breaker:\n  failures: 1000\n  cooldown_seconds: 604800\n  max_cooldown_seconds: 604800\n" +
		"evidence:\n  beacon_silence_seconds: 10\n  probe_timeout_seconds: 300\n  probe_concurrency: 1024\n  verify_timeout_seconds: 3600\n" +
		"fence_allowance_seconds: 0\nkeep_runs: 1000000\n"
	if _, err := Parse([]byte(doc)); err != nil {
		t.Errorf("upper bounds must be accepted: %v", err)
	}
	doc = "policy_version: x\ndecision_ttl_seconds: 10\nmax_concurrent_mutations: 1\n" +
		"circuit_breaker:\n  failures: 1\n  cooldown_seconds: 1\n  max_cooldown_seconds: 1\n" +
		"evidence:\n  probe_timeout_seconds: 1\n  probe_concurrency: 1\n  verify_timeout_seconds: 4\n" +
		"fence_allowance_seconds: 5\nkeep_runs: 1\n"
	if _, err := Parse([]byte(doc)); err != nil {
		t.Errorf("lower bounds must be accepted (ttl 10 > verify 4 + fence 5): %v", err)
	}
	// decision_ttl_seconds must be strictly greater than verify + fence.
	_, err := Parse([]byte("policy_version: x\ndecision_ttl_seconds: 65\n"))
	if err == nil || !strings.Contains(err.Error(), "(60 + 5 = 65)") {
		t.Errorf("ttl equal to verify + fence must be refused: %v", err)
	}
	if _, err := Parse([]byte("policy_version: x\ndecision_ttl_seconds: 66\n")); err != nil {
		t.Errorf("ttl one above verify + fence must be accepted: %v", err)
	}
}

func TestParseVersionText(t *testing.T) {
	// A date is text, not a timestamp; a number is its digits.
	for in, want := range map[string]string{
		"policy_version: 2026-11-30\n":     "2026-11-30",
		"policy_version: 42\n":             "42",
		"policy_version: \"  spaced  \"\n": "  spaced  ",
		"policy_version: é-ü\n":            "é-ü",
	} {
		p, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if p.PolicyVersion != want {
			t.Errorf("%q: version %q, want %q", in, p.PolicyVersion, want)
		}
	}
	long := strings.Repeat("é", MaxVersionLen)
	if _, err := Parse([]byte("policy_version: " + long + "\n")); err != nil {
		t.Errorf("%d characters must be accepted whatever their byte length: %v", MaxVersionLen, err)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := []byte("policy_version: x\n" + strings.Repeat("# padding\n", MaxDocumentSize/10+1))
	_, err := Parse(data)
	if err == nil || !strings.HasPrefix(err.Error(), "1:1: the policy is ") {
		t.Errorf("got %v", err)
	}
}

func TestValidateWithoutPositions(t *testing.T) {
	p := Default()
	p.PolicyVersion = ""
	p.KeepRuns = 0
	p.Mode = "auto"
	err := p.Validate()
	want := "policy_version: must not be empty: set a label for this policy, e.g. policy_version: \"2026-11-30-a\"\n" +
		"mode: unknown mode \"auto\"; use one of: report, enforce-safe, enforce-owned\n" +
		"keep_runs: must be between 1 and 1000000; got 0"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestModes(t *testing.T) {
	for _, tc := range []struct {
		mode           Mode
		valid, mutates bool
	}{
		{ModeReport, true, false},
		{ModeEnforceSafe, true, true},
		{ModeEnforceOwned, true, true},
		{"enforce", false, false},
		{"", false, false},
		{"REPORT", false, false},
	} {
		if tc.mode.Valid() != tc.valid || tc.mode.Mutates() != tc.mutates {
			t.Errorf("%q: Valid %v Mutates %v, want %v %v", tc.mode, tc.mode.Valid(), tc.mode.Mutates(), tc.valid, tc.mutates)
		}
	}
}

func TestAllows(t *testing.T) {
	tests := []struct {
		allow, deny []string
		host, unit  string
		want        bool
	}{
		{[]string{"*"}, nil, "web-1", "api.service", true},
		{[]string{"*"}, []string{}, "h", "u", true},
		{nil, nil, "web-1", "api.service", false},
		{[]string{}, nil, "web-1", "api.service", false},
		{[]string{"web-*:*"}, nil, "web-1", "api.service", true},
		{[]string{"web-*:*"}, nil, "db-1", "api.service", false},
		{[]string{"web-?:api.service"}, nil, "web-12", "api.service", false},
		{[]string{"web-[0-9]:api.*"}, nil, "web-7", "api.service", true},
		{[]string{"*"}, []string{"*:sshd.service"}, "web-1", "sshd.service", false},
		{[]string{"*"}, []string{"*:sshd.service"}, "web-1", "api.service", true},
		{[]string{"web-*:*"}, []string{"web-2:*"}, "web-2", "api.service", false},
		{[]string{"web-*:*"}, []string{"web-2:*"}, "web-3", "api.service", true},
		// "*" spans the colon: a glob without one matches whole names.
		{[]string{"web-*"}, nil, "web-1", "api.service", true},
		{[]string{"db-1:postgres@*.service"}, nil, "db-1", "postgres@16.service", true},
		{[]string{"a:b"}, nil, "a", "b", true},
		{[]string{"a:b"}, nil, "a", "bc", false},
		// Unvalidated policies with malformed globs fail closed.
		{[]string{"["}, nil, "a", "b", false},
		{[]string{"*"}, []string{"["}, "a", "b", false},
	}
	for _, tc := range tests {
		p := Default()
		p.Services = Services{Allow: tc.allow, Deny: tc.deny}
		if got := p.Allows(tc.host, tc.unit); got != tc.want {
			t.Errorf("allow %q deny %q: Allows(%q, %q) = %v, want %v", tc.allow, tc.deny, tc.host, tc.unit, got, tc.want)
		}
	}
}

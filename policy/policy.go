// Package policy owns the autonomy policy (DESIGN §6): its schema and
// defaults, strict decoding and validation of the YAML an operator writes, and
// its versioned storage at state/autonomy/policy.yaml, applied with
// compare-and-swap so that two operators cannot silently overwrite each other.
//
// A stored policy that fails validation is not an error that stops a reader:
// Load answers with a fail-closed policy that refuses every mutation and a
// sentence saying why, which `stado optimize status` shows.
package policy

import (
	"fmt"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stado/stado/internal/yamlstrict"
)

// Mode says what autonomy may do with a planned repair.
type Mode string

// The modes of DESIGN §6.
const (
	// ModeReport plans repairs and reports them; nothing is executed.
	ModeReport Mode = "report"
	// ModeEnforceSafe executes planned repairs through the gates.
	ModeEnforceSafe Mode = "enforce-safe"
	// ModeEnforceOwned executes planned repairs through the gates.
	ModeEnforceOwned Mode = "enforce-owned"
)

// Modes lists every valid mode, in the order messages list them.
var Modes = []Mode{ModeReport, ModeEnforceSafe, ModeEnforceOwned}

// Valid reports whether m is one of Modes.
func (m Mode) Valid() bool {
	for _, v := range Modes {
		if m == v {
			return true
		}
	}
	return false
}

// Mutates reports whether the mode lets autonomy execute repairs. Report
// mode and any invalid mode do not: a mode nobody defined must not act.
func (m Mode) Mutates() bool { return m == ModeEnforceSafe || m == ModeEnforceOwned }

// Key is where the policy is stored.
const Key = "state/autonomy/policy.yaml"

// DefaultVersion is the policy_version of the built-in default policy, in
// effect while no policy is stored.
const DefaultVersion = "default-report-only"

// MaxVersionLen is the longest policy_version accepted, in characters.
const MaxVersionLen = 128

// MaxDocumentSize is the largest policy document accepted. A real policy is a
// few hundred bytes; the limit keeps a mistaken `apply -f` of a large file
// from being parsed, stored and shown in every status.
const MaxDocumentSize = 64 << 10

// Policy is the autonomy policy of DESIGN §6. Durations are whole seconds, as
// operators write them.
type Policy struct {
	// PolicyVersion is the operator's label, shown in status and reports.
	// It is not the store's version of the object.
	PolicyVersion          string         `yaml:"policy_version" json:"policy_version"`
	Mode                   Mode           `yaml:"mode" json:"mode"`
	Pause                  bool           `yaml:"pause" json:"pause"`
	DecisionTTLSeconds     int            `yaml:"decision_ttl_seconds" json:"decision_ttl_seconds"`
	MaxActionsPerTick      int            `yaml:"max_actions_per_tick" json:"max_actions_per_tick"`
	MaxConcurrentMutations int            `yaml:"max_concurrent_mutations" json:"max_concurrent_mutations"`
	CircuitBreaker         CircuitBreaker `yaml:"circuit_breaker" json:"circuit_breaker"`
	Evidence               Evidence       `yaml:"evidence" json:"evidence"`
	FenceAllowanceSeconds  int            `yaml:"fence_allowance_seconds" json:"fence_allowance_seconds"`
	KeepRuns               int            `yaml:"keep_runs" json:"keep_runs"`
	Services               Services       `yaml:"services" json:"services"`
}

// CircuitBreaker configures the fleet-wide circuit breaker (DESIGN §7).
type CircuitBreaker struct {
	// Failures is how many consecutive executed-repair failures open it.
	Failures        int `yaml:"failures" json:"failures"`
	CooldownSeconds int `yaml:"cooldown_seconds" json:"cooldown_seconds"`
	// MaxCooldownSeconds caps the cooldown, which doubles at each re-trip
	// from half-open.
	MaxCooldownSeconds int `yaml:"max_cooldown_seconds" json:"max_cooldown_seconds"`
}

// Evidence configures how fresh evidence must be and how it is gathered.
type Evidence struct {
	// BeaconSilenceSeconds: an older beacon makes every unit on its host
	// unknown.
	BeaconSilenceSeconds int `yaml:"beacon_silence_seconds" json:"beacon_silence_seconds"`
	ProbeTimeoutSeconds  int `yaml:"probe_timeout_seconds" json:"probe_timeout_seconds"`
	ProbeConcurrency     int `yaml:"probe_concurrency" json:"probe_concurrency"`
	VerifyTimeoutSeconds int `yaml:"verify_timeout_seconds" json:"verify_timeout_seconds"`
}

// Services selects the services autonomy may repair: host:unit globs, matched
// with path.Match.
type Services struct {
	Allow []string `yaml:"allow" json:"allow"`
	Deny  []string `yaml:"deny" json:"deny"`
}

// Default returns the built-in policy in effect while no policy is stored:
// report mode, with the defaults of DESIGN §6. Each call returns a fresh
// value the caller may modify.
func Default() *Policy {
	return &Policy{
		PolicyVersion:          DefaultVersion,
		Mode:                   ModeReport,
		Pause:                  false,
		DecisionTTLSeconds:     360,
		MaxActionsPerTick:      10,
		MaxConcurrentMutations: 2,
		CircuitBreaker: CircuitBreaker{
			Failures:           4,
			CooldownSeconds:    900,
			MaxCooldownSeconds: 14400,
		},
		Evidence: Evidence{
			BeaconSilenceSeconds: 300,
			ProbeTimeoutSeconds:  5,
			ProbeConcurrency:     32,
			VerifyTimeoutSeconds: 60,
		},
		FenceAllowanceSeconds: 5,
		KeepRuns:              1000,
		Services: Services{
			Allow: []string{"*"},
			Deny:  []string{},
		},
	}
}

// DecisionTTL is the lease TTL per service mutation.
func (p *Policy) DecisionTTL() time.Duration { return seconds(p.DecisionTTLSeconds) }

// FenceAllowance is how long before its lease expires a repair must be done.
func (p *Policy) FenceAllowance() time.Duration { return seconds(p.FenceAllowanceSeconds) }

// BeaconSilence is the age past which a beacon no longer counts as evidence.
func (p *Policy) BeaconSilence() time.Duration { return seconds(p.Evidence.BeaconSilenceSeconds) }

// ProbeTimeout bounds one endpoint probe.
func (p *Policy) ProbeTimeout() time.Duration { return seconds(p.Evidence.ProbeTimeoutSeconds) }

// VerifyTimeout bounds the verification of one repair.
func (p *Policy) VerifyTimeout() time.Duration { return seconds(p.Evidence.VerifyTimeoutSeconds) }

// Cooldown is how long the circuit breaker stays open after its first trip.
func (p *Policy) Cooldown() time.Duration { return seconds(p.CircuitBreaker.CooldownSeconds) }

// MaxCooldown caps the doubled cooldown.
func (p *Policy) MaxCooldown() time.Duration { return seconds(p.CircuitBreaker.MaxCooldownSeconds) }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// Allows reports whether autonomy may repair unit on host: host:unit matches
// some allow glob and no deny glob. A malformed glob (only possible in a
// policy that was never validated) never allows and always denies.
func (p *Policy) Allows(host, unit string) bool {
	name := host + ":" + unit
	allowed := false
	for _, g := range p.Services.Allow {
		if ok, err := path.Match(g, name); ok && err == nil {
			allowed = true
			break
		}
	}
	if !allowed {
		return false
	}
	for _, g := range p.Services.Deny {
		if ok, err := path.Match(g, name); ok || err != nil {
			return false
		}
	}
	return true
}

// Parse decodes a policy document strictly and validates it. Omitted keys
// take the defaults of Default; policy_version is required. The error, when
// there is one, is a yamlstrict.Errors holding every problem found, decoding
// and validation alike, each with its line and column, one per line of its
// text: callers prefix each line with the file name.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxDocumentSize {
		return nil, yamlstrict.Errors{{Line: 1, Column: 1, Msg: fmt.Sprintf(
			"the policy is %d bytes, more than the %d allowed; a policy is a short settings file: check that this is the right file",
			len(data), MaxDocumentSize)}}.Err()
	}
	p := Default()
	p.PolicyVersion = "" // required: not defaulted in a stored document
	pos, errs := yamlstrict.Decode(data, p)
	if pos == nil {
		// The document could not be read at all; validating the defaults
		// would only add noise.
		return nil, errs.Err()
	}
	errs = append(errs, p.validate(pos)...)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Validate checks every bound and rule of DESIGN §6 and returns every
// problem at once, as a yamlstrict.Errors without positions (the policy was
// not necessarily decoded from a document), or nil.
func (p *Policy) Validate() error { return p.validate(nil).Err() }

// bound is one inclusive numeric bound of DESIGN §6.
type bound struct {
	path    string
	value   int
	lo, hi  int
	seconds bool
}

func (p *Policy) bounds() []bound {
	return []bound{
		{"decision_ttl_seconds", p.DecisionTTLSeconds, 10, 86400, true},
		{"max_actions_per_tick", p.MaxActionsPerTick, 0, 10000, false},
		{"max_concurrent_mutations", p.MaxConcurrentMutations, 1, 256, false},
		{"circuit_breaker.failures", p.CircuitBreaker.Failures, 1, 1000, false},
		{"circuit_breaker.cooldown_seconds", p.CircuitBreaker.CooldownSeconds, 1, 604800, true},
		{"circuit_breaker.max_cooldown_seconds", p.CircuitBreaker.MaxCooldownSeconds, 1, 604800, true},
		{"evidence.beacon_silence_seconds", p.Evidence.BeaconSilenceSeconds, 10, 604800, true},
		{"evidence.probe_timeout_seconds", p.Evidence.ProbeTimeoutSeconds, 1, 300, true},
		{"evidence.probe_concurrency", p.Evidence.ProbeConcurrency, 1, 1024, false},
		{"evidence.verify_timeout_seconds", p.Evidence.VerifyTimeoutSeconds, 1, 3600, true},
		{"fence_allowance_seconds", p.FenceAllowanceSeconds, 0, 3600, true},
		{"keep_runs", p.KeepRuns, 1, 1000000, false},
	}
}

// validate checks p, placing each problem with pos (nil: no positions).
func (p *Policy) validate(pos *yamlstrict.Positions) yamlstrict.Errors {
	var errs yamlstrict.Errors
	add := func(path, format string, args ...any) {
		errs = append(errs, pos.Errorf(path, format, args...))
	}

	p.validateVersion(pos, &errs)

	if !p.Mode.Valid() {
		add("mode", "unknown mode %s; use one of: %s", quote(string(p.Mode)), joinModes())
	}

	inBounds := map[string]bool{}
	for _, b := range p.bounds() {
		if b.value >= b.lo && b.value <= b.hi {
			inBounds[b.path] = true
			continue
		}
		unit := ""
		if b.seconds {
			unit = " seconds"
		}
		add(b.path, "must be between %d and %d%s; got %d", b.lo, b.hi, unit, b.value)
	}

	// The cross-field rules are checked only between values that are each in
	// bounds: a rule restated about a value already reported as out of
	// bounds tells the operator nothing new.
	if inBounds["decision_ttl_seconds"] && inBounds["evidence.verify_timeout_seconds"] && inBounds["fence_allowance_seconds"] {
		ttl, verify, fence := p.DecisionTTLSeconds, p.Evidence.VerifyTimeoutSeconds, p.FenceAllowanceSeconds
		if ttl <= verify+fence {
			add("decision_ttl_seconds",
				"must be greater than evidence.verify_timeout_seconds + fence_allowance_seconds (%d + %d = %d), "+
					"or a repair's lease can end before the repair is verified; got %d: "+
					"raise decision_ttl_seconds to at least %d, or lower verify_timeout_seconds or fence_allowance_seconds",
				verify, fence, verify+fence, ttl, verify+fence+1)
		}
	}
	if inBounds["circuit_breaker.cooldown_seconds"] && inBounds["circuit_breaker.max_cooldown_seconds"] {
		cd, maxCD := p.CircuitBreaker.CooldownSeconds, p.CircuitBreaker.MaxCooldownSeconds
		if maxCD < cd {
			add("circuit_breaker.max_cooldown_seconds",
				"must be at least circuit_breaker.cooldown_seconds (%d), since the cooldown doubles up to it; got %d: "+
					"raise max_cooldown_seconds to %d or more, or lower cooldown_seconds",
				cd, maxCD, cd)
		}
	}

	for _, list := range []struct {
		path  string
		globs []string
	}{{"services.allow", p.Services.Allow}, {"services.deny", p.Services.Deny}} {
		for i, g := range list.globs {
			if msg := checkGlob(g); msg != "" {
				add(fmt.Sprintf("%s[%d]", list.path, i), "%s", msg)
			}
		}
	}
	return errs
}

func (p *Policy) validateVersion(pos *yamlstrict.Positions, errs *yamlstrict.Errors) {
	const example = `policy_version: "2026-11-30-a"`
	v := p.PolicyVersion
	var msg string
	switch {
	case v == "" && !pos.Has("policy_version") && pos != nil:
		msg = "is required: add a label for this policy, e.g. " + example
	case strings.TrimSpace(v) == "":
		msg = "must not be empty: set a label for this policy, e.g. " + example
	case utf8.RuneCountInString(v) > MaxVersionLen:
		msg = fmt.Sprintf("is %d characters long, more than the %d allowed; shorten it", utf8.RuneCountInString(v), MaxVersionLen)
	default:
		for i, r := range v {
			if !unicode.IsPrint(r) {
				msg = fmt.Sprintf("contains the non-printable character %U at byte %d; use printable text only", r, i)
				break
			}
		}
	}
	if msg != "" {
		*errs = append(*errs, pos.Errorf("policy_version", "%s", msg))
	}
}

// checkGlob returns why g is not a usable host:unit glob, or "".
func checkGlob(g string) string {
	const example = `write a host:unit pattern such as "web-*:*.service" (*, ?, [a-z] and \ escapes, as in path.Match)`
	switch {
	case g == "":
		return "empty glob, which matches nothing; remove it, or " + example
	case strings.Contains(g, "/"):
		return fmt.Sprintf("glob %s contains \"/\", which no host:unit name contains, so it can never match; remove it, or %s", quote(g), example)
	}
	// path.Match checks the whole pattern even when the name does not match.
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Sprintf("invalid glob %s: %v (an unclosed [ or a trailing \\); close the bracket, or escape a literal [ or \\ with \\", quote(g), err)
	}
	return ""
}

func joinModes() string {
	s := make([]string, len(Modes))
	for i, m := range Modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// quote renders an operator-supplied value for a message: quoted, control
// characters escaped, shortened.
func quote(s string) string {
	const maxRunes = 60
	if utf8.RuneCountInString(s) > maxRunes {
		return fmt.Sprintf("%q…", string([]rune(s)[:maxRunes]))
	}
	return fmt.Sprintf("%q", s)
}

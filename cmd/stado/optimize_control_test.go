package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/internal/clitest"
	"github.com/stado/stado/policy"
)

const (
	policyA = "# production policy, reviewed by alice\npolicy_version: \"2026-11-30-a\"\nmode: report\n"
	policyB = "# production policy, reviewed by alice\npolicy_version: \"2026-11-30-b\"\nmode: enforce-safe\n"
	// policyBad has three problems, each on a known line and column.
	policyBad = "policy_version: \"x\"\nmode: turbo\ncircuit_breaker:\n  failures: 0\n  colldown_seconds: 5\n"
)

func TestPolicyShowDefaultBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		r := s.run(t, "", "optimize", "policy", "show")
		expectResult(t, "policy show", r, 0)
		first, rest, _ := strings.Cut(r.Stdout, "\n")
		if first != "version: default-report-only" {
			t.Errorf("first line %q, want the default's version", first)
		}
		mustContain(t, "policy show", rest, "No policy is stored: the built-in default below is in effect")
		p, err := policy.Parse([]byte(rest))
		if err != nil {
			t.Fatalf("the printed default does not parse: %v\n%s", err, rest)
		}
		if !reflect.DeepEqual(p, policy.Default()) {
			t.Errorf("the printed default is %+v, want policy.Default()", p)
		}

		r = s.run(t, "", "optimize", "policy", "show", "--json")
		expectResult(t, "policy show --json", r, 0)
		var got struct {
			Version       string         `json:"version"`
			PolicyVersion string         `json:"policy_version"`
			Default       bool           `json:"default"`
			Invalid       *string        `json:"invalid"`
			Document      string         `json:"document"`
			Policy        *policy.Policy `json:"policy"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
			t.Fatalf("--json output is not one JSON object: %v\n%s", err, r.Stdout)
		}
		if got.Version != policy.DefaultVersion || got.PolicyVersion != policy.DefaultVersion || !got.Default || got.Invalid != nil ||
			!reflect.DeepEqual(got.Policy, policy.Default()) {
			t.Errorf("--json = %+v", got)
		}
		if p, err := policy.Parse([]byte(got.Document)); err != nil || !reflect.DeepEqual(p, policy.Default()) {
			t.Errorf("--json document does not parse to the default: %v", err)
		}
	})
}

func TestPolicyValidateBinary(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "good.yaml", policyB)
	writeFile(t, dir, "bad.yaml", policyBad)
	writeFile(t, dir, "huge.yaml", "policy_version: \"x\"\n"+strings.Repeat("# padding\n", policy.MaxDocumentSize/10))
	store := t.TempDir() // validate needs no store; name one so nothing leaks
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr []string // exact lines, in order; a line ending in "…" is a prefix
	}{
		{name: "valid", args: []string{"-f", "good.yaml"}, code: 0,
			stdout: "ok: good.yaml is a valid policy (policy_version \"2026-11-30-b\", mode enforce-safe)\n"},
		{name: "valid from stdin", args: []string{"-f", "-"}, stdin: policyB, code: 0,
			stdout: "ok: <stdin> is a valid policy (policy_version \"2026-11-30-b\", mode enforce-safe)\n"},
		{name: "every problem at FILE:LINE:COL", args: []string{"-f", "bad.yaml"}, code: 1, stderr: []string{
			`bad.yaml:2:7: mode: unknown mode "turbo"; use one of: report, enforce-safe, enforce-owned`,
			`bad.yaml:4:13: circuit_breaker.failures: must be between 1 and 1000; got 0`,
			`bad.yaml:5:3: circuit_breaker.colldown_seconds: unknown key "colldown_seconds" (did you mean "cooldown_seconds"?)…`,
			"stado: bad.yaml is not a valid policy: 3 problem(s), listed above; fix them and check again with `stado optimize policy validate -f bad.yaml`",
		}},
		{name: "missing file", args: []string{"-f", "nope.yaml"}, code: 1, stderr: []string{
			"stado: read the policy file: open nope.yaml: no such file or directory; check the path given to -f"}},
		{name: "too large", args: []string{"-f", "huge.yaml"}, code: 1, stderr: []string{
			"stado: the policy file huge.yaml is more than 65536 bytes; check that it is the right file"}},
		{name: "no -f", args: nil, code: 2, stderr: []string{`stado: required flag(s) "file" not set`, "Run 'stado --help' for usage."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clitest.Run(t, clitest.Cmd{Args: append([]string{"--store", store, "optimize", "policy", "validate"}, tc.args...), Dir: dir, Stdin: tc.stdin})
			expectResult(t, "policy validate", r, tc.code)
			if r.Stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
			if tc.stderr == nil {
				lines = nil
				if r.Stderr != "" {
					t.Errorf("stderr %q, want none", r.Stderr)
				}
			}
			if len(lines) != len(tc.stderr) {
				t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(tc.stderr), r.Stderr)
			}
			for i, want := range tc.stderr {
				if p, ok := strings.CutSuffix(want, "…"); ok && strings.HasPrefix(lines[i], p) || lines[i] == want {
					continue
				}
				t.Errorf("stderr line %d:\n got %s\nwant %s", i+1, lines[i], want)
			}
		})
	}
}

// TestPolicyApplyShowDiffBinary walks one policy through its life: created
// without --expect-version, refused without it once it exists, refused
// against a stale version, a no-op re-apply, a diff, an update, and show
// printing the stored bytes under the store's version.
func TestPolicyApplyShowDiffBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		dir := t.TempDir()
		writeFile(t, dir, "a.yaml", policyA)
		writeFile(t, dir, "b.yaml", policyB)
		writeFile(t, dir, "bad.yaml", policyBad)

		r := s.run(t, dir, "optimize", "policy", "diff", "-f", "a.yaml")
		expectResult(t, "diff with nothing stored", r, 0)
		mustContain(t, "diff", r.Stdout, "--- stored (none: the built-in default is in effect)\n+++ a.yaml\n", "+mode: report\n")

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "bad.yaml")
		expectResult(t, "apply of an invalid file", r, 1)
		mustContain(t, "apply of an invalid file", r.Stderr, "bad.yaml:2:7: mode: unknown mode")
		if v := s.policyVersion(t); v != "" {
			t.Fatal("an invalid policy was stored")
		}

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "a.yaml")
		expectResult(t, "first apply", r, 0)
		v1 := s.policyVersion(t)
		if want := "version: " + v1 + "\napplied a.yaml: policy_version \"2026-11-30-a\" (mode report) is now the stored policy\n"; r.Stdout != want {
			t.Errorf("first apply printed %q, want %q", r.Stdout, want)
		}

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "b.yaml")
		expectResult(t, "apply without --expect-version once a policy exists", r, 2)
		mustContain(t, "the refusal", r.Stderr, "--expect-version is required", "--expect-version "+v1)

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "b.yaml", "--expect-version", "0123stale")
		expectResult(t, "apply against a stale version", r, 1)
		mustContain(t, "the conflict", r.Stderr, "policy version conflict", "is at version "+v1+", not 0123stale", "re-apply with --expect-version "+v1)

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "b.yaml", "--expect-version", policy.DefaultVersion)
		expectResult(t, "apply expecting the default while a policy exists", r, 1)
		mustContain(t, "the conflict", r.Stderr, "is at version "+v1+", not "+policy.DefaultVersion)

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "a.yaml", "--expect-version", v1)
		expectResult(t, "re-apply of the same bytes", r, 0)
		if want := "version: " + v1 + "\nnothing changed: the stored policy is already byte-identical to a.yaml\n"; r.Stdout != want {
			t.Errorf("re-apply printed %q, want %q", r.Stdout, want)
		}

		r = s.run(t, dir, "optimize", "policy", "diff", "-f", "a.yaml")
		expectResult(t, "diff of identical", r, 0)
		if want := "no difference: a.yaml is identical to the stored policy (version " + v1 + ")\n"; r.Stdout != want {
			t.Errorf("diff printed %q, want %q", r.Stdout, want)
		}
		r = s.run(t, dir, "optimize", "policy", "diff", "-f", "b.yaml")
		expectResult(t, "diff", r, 0)
		mustContain(t, "diff", r.Stdout, "--- stored (version "+v1+")\n+++ b.yaml\n",
			"-policy_version: \"2026-11-30-a\"\n-mode: report\n+policy_version: \"2026-11-30-b\"\n+mode: enforce-safe\n")

		r = s.run(t, dir, "optimize", "policy", "apply", "-f", "b.yaml", "--expect-version", v1)
		expectResult(t, "update", r, 0)
		v2 := s.policyVersion(t)
		if v2 == v1 || !strings.HasPrefix(r.Stdout, "version: "+v2+"\n") {
			t.Fatalf("update printed %q; stored version %s (was %s)", r.Stdout, v2, v1)
		}

		r = s.run(t, dir, "optimize", "policy", "show")
		expectResult(t, "show", r, 0)
		if want := "version: " + v2 + "\n" + policyB; r.Stdout != want {
			t.Errorf("show printed\n%s\nwant\n%s", r.Stdout, want)
		}
		r = s.run(t, dir, "optimize", "policy", "show", "--json")
		expectResult(t, "show --json", r, 0)
		var got map[string]any
		if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got["version"] != v2 || got["policy_version"] != "2026-11-30-b" || got["default"] != false || got["invalid"] != nil || got["document"] != policyB {
			t.Errorf("show --json = %v", got)
		}
		if pol, _ := got["policy"].(map[string]any); pol["mode"] != "enforce-safe" {
			t.Errorf("show --json policy = %v, want the effective settings", got["policy"])
		}
	})
}

// TestStoredControlCharactersAreEscapedBinary: a hostile document planted in
// the store reaches the terminal only as visible escapes, in show, show
// --json, diff and the invalid-policy warning.
func TestStoredControlCharactersAreEscapedBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		hostile := "policy_version: \"x\"\n# \x1b[2J\x1b]0;pwned\x07 \u009b31m \u202eevil\r\xff\nmode: report\n"
		s.put(t, policy.Key, hostile)
		dir := t.TempDir()
		writeFile(t, dir, "a.yaml", policyA)
		for _, args := range [][]string{
			{"optimize", "policy", "show"},
			{"optimize", "policy", "show", "--json"},
			{"optimize", "policy", "diff", "-f", "a.yaml"},
		} {
			r := s.run(t, dir, args...)
			expectResult(t, strings.Join(args, " "), r, 0)
			for _, out := range []string{r.Stdout, r.Stderr} {
				if c, bad := rawControl(out); bad {
					t.Errorf("%v printed the raw control character %U:\n%q", args, c, out)
				}
			}
			if strings.Contains(args[len(args)-1], "json") {
				mustContain(t, "show --json", r.Stdout, `\u001b[2J`, `\u009b31m`, `\u202eevil`)
			} else {
				mustContain(t, strings.Join(args, " "), r.Stdout, `\x1b[2J\x1b]0;pwned\x07 \u009b31m \u202eevil\x0d\xff`)
			}
		}
	})
}

func TestPauseResumeBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		r := s.run(t, "", "optimize", "pause", "db migration", "--actor", "alice@ops-1")
		expectResult(t, "pause", r, 0)
		st := s.control(t)
		c := st.Control
		if !c.EmergencyPaused || c.Reason != "db migration" || c.ChangedBy != "alice@ops-1" {
			t.Fatalf("stored after pause: %+v", c)
		}
		at := c.ChangedAt.UTC().Format(time.RFC3339Nano)
		// With no stored policy, report mode is what the gate names first.
		if want := "emergency pause on: set by alice@ops-1 at " + at + "\nreason: db migration\n" +
			"autonomy now: no policy is stored, so the built-in default (report mode) is in effect and repairs are only planned; " +
			"to let autonomy repair, apply a policy with `stado optimize policy apply -f FILE`\n"; r.Stdout != want {
			t.Errorf("pause printed\n%s\nwant\n%s", r.Stdout, want)
		}
		if d := time.Since(c.ChangedAt); d < -time.Minute || d > time.Minute {
			t.Errorf("changed_at %v is not the store's time now", c.ChangedAt)
		}

		r = s.run(t, "", "optimize", "pause", "db migration", "--actor", "bob")
		expectResult(t, "pause again", r, 0)
		mustContain(t, "pause again", r.Stdout, "emergency pause already on (set by alice@ops-1 at "+at+", reason: db migration); nothing changed")
		if s.control(t).Version != st.Version {
			t.Error("a pause that changed nothing wrote")
		}

		r = s.run(t, "", "optimize", "resume", "--actor", "bob@ops-2")
		expectResult(t, "resume", r, 0)
		c = s.control(t).Control
		if c.EmergencyPaused || c.Reason != "" || c.ChangedBy != "bob@ops-2" || !c.ChangedAt.After(st.Control.ChangedAt) {
			t.Fatalf("stored after resume: %+v", c)
		}
		mustContain(t, "resume", r.Stdout,
			"emergency pause off: lifted by bob@ops-2 at "+c.ChangedAt.UTC().Format(time.RFC3339Nano)+"\n",
			"it was on since "+at+" by alice@ops-1, reason: db migration\n",
			"autonomy now: no policy is stored, so the built-in default (report mode) is in effect")

		r = s.run(t, "", "optimize", "resume")
		expectResult(t, "resume again", r, 0)
		mustContain(t, "resume again", r.Stdout, "emergency pause was not on; nothing changed\n")

		r = s.run(t, "", "optimize", "pause", "maintenance")
		expectResult(t, "pause without --actor", r, 0)
		if by := s.control(t).Control.ChangedBy; !strings.HasPrefix(by, "operator@") {
			t.Errorf("changed_by %q, want USER@HOST (operator@…)", by)
		}
	})
}

// TestPauseReasonControlCharactersBinary: a reason with control characters is
// stored exactly as given, and printed only as visible escapes.
func TestPauseReasonControlCharactersBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		reason := "deploy \x1b[31mred\x07 \u009b2J \u202eevil\r"
		r := s.run(t, "", "optimize", "pause", reason, "--actor", "mallory\x1b[0m")
		expectResult(t, "pause", r, 0)
		if c := s.control(t).Control; c.Reason != reason || c.ChangedBy != "mallory\x1b[0m" {
			t.Errorf("stored reason %q by %q, want them exactly as given", c.Reason, c.ChangedBy)
		}
		r2 := s.run(t, "", "optimize", "resume", "--actor", "bob")
		expectResult(t, "resume", r2, 0)
		for _, out := range []string{r.Stdout, r.Stderr, r2.Stdout, r2.Stderr} {
			if c, bad := rawControl(out); bad {
				t.Errorf("printed the raw control character %U:\n%q", c, out)
			}
		}
		mustContain(t, "pause", r.Stdout, `reason: deploy \x1b[31mred\x07 \u009b2J \u202eevil\x0d`, `set by mallory\x1b[0m at`)
		mustContain(t, "resume", r2.Stdout, `by mallory\x1b[0m, reason: deploy \x1b[31mred\x07 \u009b2J \u202eevil\x0d`)
	})
}

func TestControlUsageErrorsBinary(t *testing.T) {
	store := t.TempDir()
	for _, args := range [][]string{
		{"optimize", "pause"},
		{"optimize", "pause", ""},
		{"optimize", "pause", "  \t"},
		{"optimize", "pause", "db", "migration"},
		{"optimize", "pause", strings.Repeat("r", autonomy.MaxReasonLen+1)},
		{"optimize", "pause", "db", "--actor", strings.Repeat("a", autonomy.MaxActorLen+1)},
		{"optimize", "resume", "now"},
		{"optimize", "breaker"},
		{"optimize", "breaker", "open"},
		{"optimize", "breaker", "reset", "now"},
		{"optimize", "policy"},
		{"optimize", "policy", "show", "extra"},
		{"optimize", "policy", "apply"},
		{"optimize", "policy", "diff", "--nope"},
	} {
		r := clitest.Run(t, clitest.Cmd{Args: append([]string{"--store", store}, args...)})
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "stado: ") || r.Stdout != "" {
			t.Errorf("stado %q: exit %d, stdout %q, stderr %q; want exit 2 and a one-line error", args, r.Code, r.Stdout, r.Stderr)
		}
	}
}

// openBreaker is a control state with an open breaker, paused by alice.
func openBreaker(until time.Time) string {
	return fmt.Sprintf(`{"schema_version": 1, "emergency_paused": true, "reason": "db", "changed_at": "2026-11-30T12:00:00Z",
 "changed_by": "alice", "breaker": {"consecutive_failures": 4, "open_until": %q, "cooldown_seconds": 1800, "trips": 2,
 "last_error": "ssh: connection refused"}}`, until.UTC().Format(time.RFC3339))
}

func TestBreakerResetBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		// The reset takes its cooldown from the stored policy.
		dir := t.TempDir()
		writeFile(t, dir, "p.yaml", "policy_version: \"cb\"\nmode: enforce-safe\ncircuit_breaker:\n  cooldown_seconds: 60\n")
		expectResult(t, "apply", s.run(t, dir, "optimize", "policy", "apply", "-f", "p.yaml"), 0)
		until := time.Now().Add(time.Hour).Truncate(time.Second)
		s.put(t, autonomy.Key, openBreaker(until))

		r := s.run(t, "", "optimize", "breaker", "reset", "--actor", "carol")
		expectResult(t, "breaker reset", r, 0)
		c := s.control(t).Control
		if c.Breaker.ConsecutiveFailures != 0 || c.Breaker.OpenUntil != nil || c.Breaker.Trips != 0 || c.Breaker.LastError != nil ||
			c.Breaker.CooldownSeconds != 60 {
			t.Errorf("breaker after reset %+v, want closed with the policy's 60 s cooldown", c.Breaker)
		}
		if !c.EmergencyPaused || c.Reason != "db" || c.ChangedBy != "carol" {
			t.Errorf("after reset %+v: want the pause kept and carol recorded", c)
		}
		mustContain(t, "breaker reset", r.Stdout,
			"circuit breaker reset by carol at "+c.ChangedAt.UTC().Format(time.RFC3339Nano)+": it is now closed\n",
			"it had 4 consecutive failures and 2 trips, open until "+until.UTC().Format(time.RFC3339)+", last error: ssh: connection refused\n",
			"autonomy now: autonomy is under emergency pause")

		r = s.run(t, "", "optimize", "breaker", "reset")
		expectResult(t, "breaker reset again", r, 0)
		mustContain(t, "breaker reset again", r.Stdout, "circuit breaker already closed with no failures; nothing changed\n")

		r = s.run(t, "", "optimize", "resume", "--actor", "carol")
		expectResult(t, "resume", r, 0)
		mustContain(t, "resume", r.Stdout, `autonomy now: autonomy may repair under policy "cb" (mode enforce-safe)`)
	})
}

// TestUnreadableControlBinary: with an unreadable control object, breaker
// reset refuses and says how to rewrite it; resume rewrites it and says so.
func TestUnreadableControlBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		s.put(t, autonomy.Key, `{"schema_version": 1, "breaker": {"trips": "many"}}`)
		garbage := s.control(t).Version

		r := s.run(t, "", "optimize", "breaker", "reset", "--actor", "carol")
		expectResult(t, "breaker reset", r, 1)
		mustContain(t, "breaker reset", r.Stderr, "stado: reset the circuit breaker: the stored control state is unreadable",
			"rewrite it with `stado optimize pause REASON` to keep autonomy paused, or `stado optimize resume` to resume it")
		if s.control(t).Version != garbage {
			t.Fatal("a refused reset wrote")
		}

		r = s.run(t, "", "optimize", "resume", "--actor", "dan")
		expectResult(t, "resume", r, 0)
		mustContain(t, "resume", r.Stdout, "note: the stored control state was unreadable (invalid control state: ",
			"it has been rewritten whole, with the circuit breaker closed\n", "emergency pause off: lifted by dan at ")
		if st := s.control(t); st.Invalid != nil || st.Control.EmergencyPaused || st.Control.ChangedBy != "dan" {
			t.Fatalf("after resume: %+v (invalid %v)", st.Control, st.Invalid)
		}
	})
}

// TestConcurrentPolicyApplyBinary: two operators apply different policies
// against the same --expect-version, their processes started together.
// Exactly one wins; the other is told of the conflict and the winner's
// version; the store holds exactly the winner's document. Three rounds, each
// against the previous winner.
func TestConcurrentPolicyApplyBinary(t *testing.T) {
	forEachCtlStore(t, func(t *testing.T, s ctlStore) {
		dir := t.TempDir()
		writeFile(t, dir, "base.yaml", policyA)
		expectResult(t, "base apply", s.run(t, dir, "optimize", "policy", "apply", "-f", "base.yaml"), 0)
		for round := 0; round < 3; round++ {
			base := s.policyVersion(t)
			docs := []string{
				fmt.Sprintf("policy_version: \"round-%d-alice\"\nmode: report\n", round),
				fmt.Sprintf("policy_version: \"round-%d-bob\"\nmode: enforce-safe\n", round),
			}
			type run struct {
				doc       string
				cmd       *exec.Cmd
				out, errb *bytes.Buffer
				code      int
			}
			runs := make([]run, len(docs))
			for i, doc := range docs {
				f := writeFile(t, dir, fmt.Sprintf("op-%d-%d.yaml", round, i), doc)
				cmd, out, errb := s.command(t, dir, "optimize", "policy", "apply", "-f", f, "--expect-version", base)
				runs[i] = run{doc: doc, cmd: cmd, out: out, errb: errb}
			}
			for _, r := range runs {
				if err := r.cmd.Start(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range runs {
				_ = runs[i].cmd.Wait() // the exit code is judged below
				runs[i].code = runs[i].cmd.ProcessState.ExitCode()
			}
			var winner, loser *run
			for i := range runs {
				switch runs[i].code {
				case 0:
					if winner != nil {
						t.Fatalf("round %d: both applies succeeded against version %s", round, base)
					}
					winner = &runs[i]
				case 1:
					loser = &runs[i]
				default:
					t.Fatalf("round %d: exit %d: %s%s", round, runs[i].code, runs[i].out, runs[i].errb)
				}
			}
			if winner == nil || loser == nil {
				t.Fatalf("round %d: want one winner and one loser, got codes %d and %d", round, runs[0].code, runs[1].code)
			}
			stored := s.get(t, policy.Key)
			if string(stored.Body) != winner.doc {
				t.Fatalf("round %d: the store holds %q, want the winner's %q", round, stored.Body, winner.doc)
			}
			if !strings.HasPrefix(winner.out.String(), "version: "+stored.ETag+"\n") {
				t.Errorf("round %d: the winner printed %q, want the stored version %s", round, winner.out, stored.ETag)
			}
			mustContain(t, "the loser's error", loser.errb.String(), "policy version conflict", "re-apply with --expect-version "+stored.ETag)
		}
	})
}

func TestWriteControlJSONEscapesC1(t *testing.T) {
	var b strings.Builder
	in := map[string]string{"s": "esc \x1b del \x7f csi \u009b bidi \u202e\u2066 <tag> & é\n"}
	if err := writeJSON(&b, in); err != nil {
		t.Fatal(err)
	}
	if c, bad := rawControl(b.String()); bad {
		t.Fatalf("JSON output carries the raw control character %U: %q", c, b.String())
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(b.String()), &out); err != nil || out["s"] != in["s"] {
		t.Fatalf("JSON output %q does not decode to the input (%v)", b.String(), err)
	}
	mustContain(t, "JSON output", b.String(), "<tag> & é")
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/breaker"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

// optimizeControlCmds are the commands that steer autonomy: policy, pause,
// resume, breaker.
func optimizeControlCmds(a *app) []*cobra.Command {
	return []*cobra.Command{newPolicyCmd(a), newPauseCmd(a), newResumeCmd(a), newBreakerCmd(a)}
}

// ---- policy ----

func newPolicyCmd(a *app) *cobra.Command {
	return groupCmd("policy", "Show, validate, diff and apply the autonomy policy",
		newPolicyShowCmd(a), newPolicyValidateCmd(a), newPolicyApplyCmd(a), newPolicyDiffCmd(a))
}

type policyShowOptions struct {
	JSON bool
}

func newPolicyShowCmd(a *app) *cobra.Command {
	o := &policyShowOptions{}
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the stored policy and its version",
		Long: `Print the stored policy: its version (the store's version of the object, to
pass as --expect-version) on the first line as "version: V", then the document
as it was applied, comments kept. With no stored policy, the built-in default
(version default-report-only, report mode) is in effect and is printed.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object: version, policy_version, default, invalid, document, policy")
	return cmd
}

// policyShowJSON is `policy show --json`.
type policyShowJSON struct {
	Version       string         `json:"version"`
	PolicyVersion string         `json:"policy_version"`
	Default       bool           `json:"default"`
	Invalid       *string        `json:"invalid"`
	Document      string         `json:"document"`
	Policy        *policy.Policy `json:"policy"`
}

func (o *policyShowOptions) run(ctx context.Context, a *app) error {
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	l, err := policy.Load(ctx, store)
	if err != nil {
		return storeFailure("show the policy", err)
	}
	version, doc := l.Version, string(l.Raw)
	if l.Default {
		version, doc = policy.DefaultVersion, defaultPolicyDocument()
	}
	if o.JSON {
		out := policyShowJSON{Version: version, PolicyVersion: l.Policy.PolicyVersion, Default: l.Default, Document: doc, Policy: l.Policy}
		if l.Invalid != nil {
			s := l.Invalid.Error()
			out.Invalid = &s
		}
		return writeJSON(a.streams.Out, out)
	}
	termf(a.streams.Out, "version: %s\n", version)
	if l.Default {
		termf(a.streams.Out, "# No policy is stored: the built-in default below is in effect (report mode: repairs are only planned).\n"+
			"# To let autonomy repair, apply a policy with `stado optimize policy apply -f FILE`.\n")
	}
	termf(a.streams.Out, "%s", doc)
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		termf(a.streams.Out, "\n")
	}
	if l.Invalid != nil {
		printProblems(a.streams.Err, policy.Key, l.Invalid)
		termf(a.streams.Err, "stado: warning: the stored policy (version %s) is invalid, so autonomy makes no repair; "+
			"fix it with `stado optimize policy apply -f FILE --expect-version %s`\n", l.Version, l.Version)
	}
	return nil
}

// defaultPolicyDocument renders the built-in default policy as YAML.
func defaultPolicyDocument() string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(policy.Default()); err != nil {
		return fmt.Sprintf("# the built-in default could not be rendered: %v\n", err)
	}
	_ = enc.Close()
	return b.String()
}

type policyValidateOptions struct {
	File string
}

func newPolicyValidateCmd(a *app) *cobra.Command {
	o := &policyValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a policy file without applying it",
		Long: `Check a policy file as apply would: strict decoding and every bound. Each
problem is printed as FILE:LINE:COL: SETTING: WHAT TO DO, all at once. Exit 0
when it is valid, 1 when it is not. FILE "-" reads standard input.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(a) }),
	}
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "the policy file (- for standard input)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func (o *policyValidateOptions) run(a *app) error {
	raw, name, err := readInputFile(a, o.File, "-f", "policy", policy.MaxDocumentSize)
	if err != nil {
		return err
	}
	p, err := parsePolicyFile(a, name, raw)
	if err != nil {
		return err
	}
	termf(a.streams.Out, "ok: %s is a valid policy (policy_version %s, mode %s)\n", name, strconv.Quote(p.PolicyVersion), p.Mode)
	return nil
}

type policyApplyOptions struct {
	File          string
	ExpectVersion string
}

func newPolicyApplyCmd(a *app) *cobra.Command {
	o := &policyApplyOptions{}
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--expect-version V]",
		Short: "Validate a policy file and store it, with compare-and-swap",
		Long: `Validate a policy file, then store it byte for byte as the policy, replacing
the stored one only if it is still at --expect-version V (the version
"policy show" prints). Once a policy is stored, --expect-version is required,
so that two operators cannot silently overwrite each other. With no policy
stored, omit it (or pass default-report-only, the default's version).`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "the policy file (- for standard input)")
	cmd.Flags().StringVar(&o.ExpectVersion, "expect-version", "", "the stored version this apply replaces (from `stado optimize policy show`)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func (o *policyApplyOptions) run(ctx context.Context, a *app) error {
	raw, name, err := readInputFile(a, o.File, "-f", "policy", policy.MaxDocumentSize)
	if err != nil {
		return err
	}
	p, err := parsePolicyFile(a, name, raw)
	if err != nil {
		return err
	}
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	// The default's version names "no policy stored": expecting it is
	// expecting to create the first one.
	expect := o.ExpectVersion
	if expect == policy.DefaultVersion {
		expect = ""
	}
	v, err := policy.Apply(ctx, store, raw, expect)
	switch {
	case err == nil:
		termf(a.streams.Out, "version: %s\napplied %s: policy_version %s (mode %s) is now the stored policy\n",
			v, name, strconv.Quote(p.PolicyVersion), p.Mode)
		return nil
	case errors.Is(err, policy.ErrNoChange):
		termf(a.streams.Out, "version: %s\nnothing changed: the stored policy is already byte-identical to %s\n", expect, name)
		return nil
	case errors.Is(err, policy.ErrExpectVersionRequired) && o.ExpectVersion == policy.DefaultVersion:
		// The operator expected no stored policy and one is there: that
		// is a conflict, named as one.
		cur, lerr := policy.Load(ctx, store)
		if lerr != nil {
			return storeFailure("apply "+name, lerr)
		}
		return fmt.Errorf("apply %s: %w", name, policy.NewConflictError(policy.DefaultVersion, cur.Version))
	case errors.Is(err, policy.ErrExpectVersionRequired):
		return &exitError{code: exitUsage, err: fmt.Errorf("apply %s: %w", name, err)}
	case errors.Is(err, policy.ErrVersionConflict):
		return fmt.Errorf("apply %s: %w", name, err)
	}
	return storeFailure("apply "+name, err)
}

type policyDiffOptions struct {
	File string
}

func newPolicyDiffCmd(a *app) *cobra.Command {
	o := &policyDiffOptions{}
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "Show what applying a policy file would change",
		Long:  `Print the unified diff from the stored policy to FILE, or say that they are identical.`,
		Args:  cobra.NoArgs,
		RunE:  runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "the policy file (- for standard input)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func (o *policyDiffOptions) run(ctx context.Context, a *app) error {
	raw, name, err := readInputFile(a, o.File, "-f", "policy", policy.MaxDocumentSize)
	if err != nil {
		return err
	}
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	l, err := policy.Load(ctx, store)
	if err != nil {
		return storeFailure("diff the policy", err)
	}
	d := policy.Diff(l.Version, l.Raw, name, raw)
	if d == "" {
		termf(a.streams.Out, "no difference: %s is identical to the stored policy (version %s)\n", name, l.Version)
	} else {
		termf(a.streams.Out, "%s", d)
	}
	if _, perr := policy.Parse(raw); perr != nil {
		termf(a.streams.Err, "stado: note: %s is not a valid policy; `stado optimize policy validate -f %s` lists its problems\n", name, name)
	}
	return nil
}

// parsePolicyFile parses raw; on failure it prints every problem as
// NAME:LINE:COL: ... to stderr and returns the one-sentence error.
func parsePolicyFile(a *app, name string, raw []byte) (*policy.Policy, error) {
	p, err := policy.Parse(raw)
	if err == nil {
		return p, nil
	}
	n := printProblems(a.streams.Err, name, err)
	return nil, fmt.Errorf("%s is not a valid policy: %d problem(s), listed above; fix them and check again with `stado optimize policy validate -f %s`",
		name, n, name)
}

// ---- pause, resume, breaker ----

type pauseOptions struct {
	Reason string
	Actor  string
}

func newPauseCmd(a *app) *cobra.Command {
	o := &pauseOptions{}
	cmd := &cobra.Command{
		Use:   "pause REASON [--actor NAME]",
		Short: "Stop every autonomous repair, fleet-wide, until resumed",
		Long: `Turn the emergency pause on: no reconciler repairs anything until an operator
runs "stado optimize resume". REASON says why, for everyone who looks at
status; quote it when it has spaces.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("pause takes one REASON argument, got %d: quote a reason with spaces, e.g. stado optimize pause \"db migration\"", len(args))
			}
			return nil
		},
		RunE: runE(func(ctx context.Context, args []string) error {
			o.Reason = args[0]
			return o.run(ctx, a)
		}),
	}
	cmd.Flags().StringVar(&o.Actor, "actor", "", "who is pausing, recorded in the control state (default USER@HOST)")
	return cmd
}

func (o *pauseOptions) run(ctx context.Context, a *app) error {
	if strings.TrimSpace(o.Reason) == "" {
		return usageErrorf("the pause REASON is empty: say why autonomy is paused, e.g. stado optimize pause \"db migration\"")
	}
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	out, err := autonomy.Pause(ctx, store, o.Reason, a.actor(o.Actor))
	if err != nil {
		return controlFailure("pause autonomy", err)
	}
	w, after := a.streams.Out, out.After.Control
	printReplaced(w, out)
	switch before := out.Before.Control; {
	case !out.Changed:
		termf(w, "emergency pause already on (%s, reason: %s); nothing changed\n", changeAttribution(after), after.Reason)
	case before.EmergencyPaused && out.Replaced == nil:
		termf(w, "emergency pause on: reason changed by %s at %s\nreason: %s\nprevious reason: %s\n",
			after.ChangedBy, formatInstant(after.ChangedAt), after.Reason, before.Reason)
	default:
		termf(w, "emergency pause on: set by %s at %s\nreason: %s\n", after.ChangedBy, formatInstant(after.ChangedAt), after.Reason)
	}
	printGateNow(ctx, a, store, out.After)
	return nil
}

type resumeOptions struct {
	Actor string
}

func newResumeCmd(a *app) *cobra.Command {
	o := &resumeOptions{}
	cmd := &cobra.Command{
		Use:   "resume [--actor NAME]",
		Short: "Lift the emergency pause",
		Long: `Turn the emergency pause off. Autonomy repairs again if the policy lets it
(mode, its own pause: true) and the circuit breaker is not open.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().StringVar(&o.Actor, "actor", "", "who is resuming, recorded in the control state (default USER@HOST)")
	return cmd
}

func (o *resumeOptions) run(ctx context.Context, a *app) error {
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	out, err := autonomy.Resume(ctx, store, a.actor(o.Actor))
	if err != nil {
		return controlFailure("resume autonomy", err)
	}
	w, before, after := a.streams.Out, out.Before.Control, out.After.Control
	printReplaced(w, out)
	switch {
	case !out.Changed:
		termf(w, "emergency pause was not on; nothing changed\n")
	case out.Replaced != nil:
		termf(w, "emergency pause off: lifted by %s at %s\n", after.ChangedBy, formatInstant(after.ChangedAt))
	default:
		termf(w, "emergency pause off: lifted by %s at %s\nit was on since %s by %s, reason: %s\n",
			after.ChangedBy, formatInstant(after.ChangedAt), formatInstant(before.ChangedAt), before.ChangedBy, before.Reason)
	}
	printGateNow(ctx, a, store, out.After)
	return nil
}

func newBreakerCmd(a *app) *cobra.Command {
	return groupCmd("breaker", "Operate the fleet-wide circuit breaker", newBreakerResetCmd(a))
}

type breakerResetOptions struct {
	Actor string
}

func newBreakerResetCmd(a *app) *cobra.Command {
	o := &breakerResetOptions{}
	cmd := &cobra.Command{
		Use:   "reset [--actor NAME]",
		Short: "Close the circuit breaker and clear its failure count",
		Long: `Close the circuit breaker now, whatever its phase: consecutive failures, trips
and the last error are cleared and the cooldown returns to the policy's.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().StringVar(&o.Actor, "actor", "", "who is resetting, recorded in the control state (default USER@HOST)")
	return cmd
}

func (o *breakerResetOptions) run(ctx context.Context, a *app) error {
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	l, err := policy.Load(ctx, store)
	if err != nil {
		return storeFailure("reset the circuit breaker: read the policy for its settings", err)
	}
	out, err := autonomy.ResetBreaker(ctx, store, breaker.SettingsFrom(l.Policy), a.actor(o.Actor))
	if err != nil {
		return controlFailure("reset the circuit breaker", err)
	}
	w, before, after := a.streams.Out, out.Before.Control.Breaker, out.After.Control
	if !out.Changed {
		termf(w, "circuit breaker already closed with no failures; nothing changed\n")
	} else {
		termf(w, "circuit breaker reset by %s at %s: it is now closed\n", after.ChangedBy, formatInstant(after.ChangedAt))
		was := fmt.Sprintf("it had %d consecutive failures and %d trips", before.ConsecutiveFailures, before.Trips)
		if before.OpenUntil != nil {
			was += ", open until " + formatInstant(*before.OpenUntil)
		}
		if before.LastError != nil {
			was += ", last error: " + *before.LastError
		}
		termf(w, "%s\n", was)
	}
	printGateNow(ctx, a, store, out.After)
	return nil
}

// printReplaced says that an unreadable control object was rewritten.
func printReplaced(w io.Writer, out *autonomy.Outcome) {
	if out.Replaced != nil {
		termf(w, "note: the stored control state was unreadable (%v); it has been rewritten whole, with the circuit breaker closed\n", out.Replaced)
	}
}

func changeAttribution(c autonomy.Control) string {
	if c.ChangedBy == "" {
		return "set at " + formatInstant(c.ChangedAt)
	}
	return "set by " + c.ChangedBy + " at " + formatInstant(c.ChangedAt)
}

// printGateNow prints what the gate answers after a change, so that an
// operator who resumes sees at once whether the policy or the breaker still
// stops repairs. The change is done; a failure here is only reported.
func printGateNow(ctx context.Context, a *app, store objstore.Store, ctl *autonomy.Stored) {
	l, err := policy.Load(ctx, store)
	if err != nil {
		termf(a.streams.Err, "stado: warning: the change is stored, but reading the policy to show its effect failed: %v\n", err)
		return
	}
	now, err := store.Now(ctx)
	if err != nil {
		termf(a.streams.Err, "stado: warning: the change is stored, but reading the store clock to show its effect failed: %v\n", err)
		return
	}
	termf(a.streams.Out, "autonomy now: %s\n", autonomy.Decide(l, ctl, now).Explanation)
}

func formatInstant(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// controlFailure renders an error from a control-state operation: invalid
// input is a usage error (exit 2), anything else an operational one.
func controlFailure(what string, err error) error {
	if errors.Is(err, autonomy.ErrInvalidReason) || errors.Is(err, autonomy.ErrInvalidActor) {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s: %w", what, err)}
	}
	return storeFailure(what, err)
}

// storeFailure renders an operational error with what to do when the store
// is the cause.
func storeFailure(what string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, objstore.ErrUnavailable):
		hint = "; the store did not answer: check that it is reachable (--store, STADO_STORE) and try again"
	case errors.Is(err, objstore.ErrDenied):
		hint = "; the store refused access: check the credentials for it"
	}
	return fmt.Errorf("%s: %w%s", what, err, hint)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stado/stado/internal/termsafe"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// beaconReadConcurrency is how many beacons `service list` reads at once.
const beaconReadConcurrency = 32

// newServiceCmd is `stado service`: the registry of declared services.
func newServiceCmd(a *app) *cobra.Command {
	return subcommandGroup(&cobra.Command{
		Use:   "service",
		Short: "Declare the services autonomy watches and repairs",
		Long: `The registry (` + registry.Key + `) declares every service autonomy
watches: its host, its systemd unit, an optional endpoint to probe, and how to
repair it. "service apply" stores it with compare-and-swap, "service show"
prints it, "service list" joins it with the hosts' latest beacons.`,
	}, newServiceApplyCmd(a), newServiceShowCmd(a), newServiceListCmd(a))
}

// newBeaconCmd is `stado beacon`: hosts report their unit states.
func newBeaconCmd(a *app) *cobra.Command {
	return subcommandGroup(&cobra.Command{
		Use:   "beacon",
		Short: "Publish a host's unit states for the reconciler",
		Long: `A beacon (` + beacon.Prefix + `<host>.json) is a host's report of its unit
states. The reconciler repairs a unit only on a fresh beacon that says it is
down; run "beacon publish" on every host from a timer more often than the
policy's evidence.beacon_silence_seconds.`,
	}, newBeaconPublishCmd(a))
}

// ---- service apply ----

type serviceApplyOptions struct {
	File          string
	ExpectVersion string
}

func newServiceApplyCmd(a *app) *cobra.Command {
	o := &serviceApplyOptions{}
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--expect-version V]",
		Short: "Validate a registry file and store it, with compare-and-swap",
		Long: `Validate a registry file, then store it byte for byte (comments kept) as the
service registry, replacing the stored one only if it is still at
--expect-version V (the version "service show" prints). Once a registry is
stored, --expect-version is required, so that two operators cannot silently
overwrite each other.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "the registry file (- for standard input)")
	cmd.Flags().StringVar(&o.ExpectVersion, "expect-version", "", "the stored version this apply replaces (from `stado service show`)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func (o *serviceApplyOptions) run(ctx context.Context, a *app) error {
	raw, name, err := readInputFile(a, o.File, "-f", "registry", registry.MaxDocumentSize)
	if err != nil {
		return err
	}
	// Validate before opening the store: a broken file is reported the same
	// whether or not the store is reachable.
	if _, err := registry.Parse(raw); err != nil {
		n := printProblems(a.streams.Err, name, err)
		return fmt.Errorf("%s is not a valid service registry: %d problem(s), listed above; fix them and apply again", name, n)
	}
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	v, reg, err := registry.Apply(ctx, store, raw, o.ExpectVersion)
	switch {
	case err == nil:
		fmt.Fprintf(a.streams.Out, "version: %s\napplied %s: %s on %s are now the declared services\n",
			v, termsafe.Escape(name), plural(len(reg.Services), "service"), plural(len(reg.Hosts()), "host"))
		return nil
	case errors.Is(err, registry.ErrNoChange):
		fmt.Fprintf(a.streams.Out, "version: %s\nnothing changed: the stored registry is already byte-identical to %s\n",
			o.ExpectVersion, termsafe.Escape(name))
		return nil
	case errors.Is(err, registry.ErrExpectVersionRequired):
		return &exitError{code: exitUsage, err: fmt.Errorf("apply %s: %w", name, err)}
	case errors.Is(err, registry.ErrVersionConflict):
		return fmt.Errorf("apply %s: %w", name, err)
	}
	return fmt.Errorf("apply %s: %w", name, err)
}

// ---- service show ----

func newServiceShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the stored registry and its version",
		Long: `Print the stored version V (pass it to "service apply --expect-version V") on
the first line as "version: V", then the stored document as it was applied,
comments kept. A stored registry that is invalid is printed too, with its
problems on standard error: every tick fails until it is fixed.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return runServiceShow(ctx, a) }),
	}
}

func runServiceShow(ctx context.Context, a *app) error {
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	doc, err := registry.Fetch(ctx, store)
	if err != nil {
		return err
	}
	if doc.Missing {
		fmt.Fprintf(a.streams.Err, "no service registry is stored in %s (%s): no services are declared; declare them with `stado service apply -f FILE`\n",
			termsafe.Escape(store.Location()), registry.Key)
		return nil
	}
	text := termsafe.Lines(string(doc.Raw))
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	fmt.Fprintf(a.streams.Out, "version: %s\n%s", doc.Version, text)
	if _, err := registry.Parse(doc.Raw); err != nil {
		n := printProblems(a.streams.Err, registry.Key, err)
		fmt.Fprintf(a.streams.Err, "warning: this stored registry is invalid (%d problem(s), listed above), so every tick fails until it is fixed: "+
			"correct it and apply it with `stado service apply -f FILE --expect-version %s`\n", n, doc.Version)
	}
	return nil
}

// ---- service list ----

type serviceListOptions struct {
	JSON bool
}

func newServiceListCmd(a *app) *cobra.Command {
	o := &serviceListOptions{}
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the declared services with their hosts' latest beacon states",
		Long: `List every declared service, sorted by host and unit, with the state its
host's latest beacon reports for its unit and how old that beacon is. A beacon
older than the policy's evidence.beacon_silence_seconds is marked stale: the
reconciler treats its units as unknown and repairs none of them.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON document")
	return cmd
}

// Beacon statuses in `service list --json`.
const (
	beaconReported   = "reported"   // the unit is in a readable beacon
	beaconAbsent     = "absent"     // a readable beacon that does not list the unit
	beaconNone       = "no_beacon"  // the host has published none
	beaconInvalid    = "invalid"    // the beacon fails validation
	beaconUnreadable = "unreadable" // the store could not be read
)

// serviceListRow is one row of `service list`, and its JSON.
type serviceListRow struct {
	registry.Service
	Beacon serviceListBeacon `json:"beacon"`
	// LastOutcome is the service's classification in the latest
	// reconciliation report, with its run; "" when no report names it.
	LastOutcome string `json:"last_outcome,omitempty"`
	// LastDetail is that outcome's detail.
	LastDetail string `json:"last_detail,omitempty"`
}

type serviceListBeacon struct {
	Status      string `json:"status"`
	ActiveState string `json:"active_state,omitempty"`
	SubState    string `json:"sub_state,omitempty"`
	ReportedAt  string `json:"reported_at,omitempty"`
	// AgeSeconds is how old the beacon is on the store's clock.
	AgeSeconds *int64 `json:"age_seconds,omitempty"`
	// Fresh is whether the reconciler would use the beacon as evidence now.
	Fresh bool `json:"fresh"`
	// Error says why the beacon is not evidence (missing, invalid, stale,
	// dated in the future).
	Error string `json:"error,omitempty"`

	future bool
}

type serviceListJSON struct {
	// Version is the stored registry's version; "" when none is stored.
	Version string `json:"version"`
	// BeaconSilenceSeconds is the policy's limit the freshness was judged by.
	BeaconSilenceSeconds int              `json:"beacon_silence_seconds"`
	Services             []serviceListRow `json:"services"`
}

func (o *serviceListOptions) run(ctx context.Context, a *app) error {
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	loaded, err := registry.Load(ctx, store)
	if err != nil {
		return err
	}
	pol, err := policy.Load(ctx, store)
	if err != nil {
		return err
	}
	silence := pol.Policy.BeaconSilence()
	now, err := store.Now(ctx)
	if err != nil {
		return fmt.Errorf("read the store clock of %s to judge beacon freshness: %w", store.Location(), err)
	}
	beacons := beacon.ReadAll(ctx, store, loaded.Registry.Hosts(), beaconReadConcurrency)

	rows := make([]serviceListRow, len(loaded.Registry.Services))
	for i, s := range loaded.Registry.Services {
		rows[i] = serviceListRow{Service: s, Beacon: beaconColumn(beacons[s.Host], s.Unit, now, silence)}
	}
	slices.SortFunc(rows, func(x, y serviceListRow) int {
		if c := strings.Compare(x.Host, y.Host); c != 0 {
			return c
		}
		return strings.Compare(x.Unit, y.Unit)
	})
	if err := fillLastOutcome(ctx, store, rows); err != nil {
		fmt.Fprintf(a.streams.Err, "warning: %s\n", termsafe.Escape(err.Error()))
	}

	if o.JSON {
		return writeJSON(a.streams.Out, serviceListJSON{Version: loaded.Version, BeaconSilenceSeconds: int(silence / time.Second), Services: rows})
	}
	if loaded.Missing {
		fmt.Fprintf(a.streams.Err, "no service registry is stored in %s (%s): no services are declared; declare them with `stado service apply -f FILE`\n",
			termsafe.Escape(store.Location()), registry.Key)
		return nil
	}
	renderServiceTable(a.streams.Out, rows)
	// Why a host's beacon is not evidence, once per host, after the table.
	warned := map[string]bool{}
	for _, r := range rows {
		if r.Beacon.Error != "" && r.Beacon.Status != beaconNone && !warned[r.Host] {
			warned[r.Host] = true
			fmt.Fprintln(a.streams.Err, termsafe.Escape("warning: "+r.Beacon.Error))
		}
	}
	return nil
}

// fillLastOutcome joins the latest reconciliation report's outcome into each
// row. An unreadable report is a warning: the registry and beacons still
// list.
func fillLastOutcome(ctx context.Context, store objstore.Store, rows []serviceListRow) error {
	rep, err := reports.Latest(ctx, store)
	if err != nil {
		return fmt.Errorf("the latest report could not be read, so the last outcome column is empty: %w", err)
	}
	if rep == nil {
		return nil
	}
	type hostUnit struct{ host, unit string }
	last := make(map[hostUnit]reports.Outcome, len(rep.Outcomes))
	for _, o := range rep.Outcomes {
		last[hostUnit{o.Host, o.Unit}] = o
	}
	for i := range rows {
		if o, ok := last[hostUnit{rows[i].Host, rows[i].Unit}]; ok {
			rows[i].LastOutcome, rows[i].LastDetail = o.Classification, o.Detail
		}
	}
	return nil
}

// beaconColumn describes what host's beacon says about unit.
func beaconColumn(r beacon.Result, unit string, now objstore.TimeBounds, silence time.Duration) serviceListBeacon {
	switch {
	case errors.Is(r.Err, beacon.ErrNoBeacon):
		return serviceListBeacon{Status: beaconNone, Error: r.Err.Error()}
	case errors.Is(r.Err, beacon.ErrInvalid):
		return serviceListBeacon{Status: beaconInvalid, Error: r.Err.Error()}
	case r.Err != nil || r.Beacon == nil:
		msg := "no answer"
		if r.Err != nil {
			msg = r.Err.Error()
		}
		return serviceListBeacon{Status: beaconUnreadable, Error: msg}
	}
	age := int64(r.Beacon.Age(now) / time.Second)
	col := serviceListBeacon{
		Status:     beaconAbsent,
		ReportedAt: r.Beacon.ReportedAt.UTC().Format(beacon.TimeFormat),
		AgeSeconds: &age,
		Fresh:      true,
	}
	if err := r.Beacon.Freshness(now, silence); err != nil {
		col.Fresh, col.Error, col.future = false, err.Error(), errors.Is(err, beacon.ErrFromFuture)
	}
	if u, ok := r.Beacon.Unit(unit); ok {
		col.Status, col.ActiveState, col.SubState = beaconReported, string(u.ActiveState), u.SubState
	}
	return col
}

func renderServiceTable(w io.Writer, rows []serviceListRow) {
	withOutcome := slices.ContainsFunc(rows, func(r serviceListRow) bool { return r.LastOutcome != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "HOST\tUNIT\tNAME\tMANAGED\tBEACON\tREPORTED"
	if withOutcome {
		header += "\tLAST OUTCOME"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		managed := "yes"
		if !r.Managed {
			managed = "no"
		}
		cells := []string{r.Host, r.Unit, r.Name, managed, beaconStateText(r.Beacon), beaconAgeText(r.Beacon)}
		if withOutcome {
			cells = append(cells, r.LastOutcome)
		}
		for i, c := range cells {
			// Escape also tabs and newlines: a cell must stay one cell.
			cells[i] = termsafe.Escape(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
}

func beaconStateText(b serviceListBeacon) string {
	switch b.Status {
	case beaconReported:
		if b.SubState != "" {
			return b.ActiveState + "/" + b.SubState
		}
		return b.ActiveState
	case beaconNone:
		return "no beacon"
	case beaconInvalid:
		return "invalid beacon"
	}
	return b.Status
}

func beaconAgeText(b serviceListBeacon) string {
	if b.AgeSeconds == nil {
		return "-"
	}
	age := time.Duration(*b.AgeSeconds) * time.Second
	switch {
	case b.future:
		return "in " + (-age).String() + " (future: ignored)"
	case !b.Fresh:
		return age.String() + " ago (stale)"
	}
	return max(age, 0).String() + " ago"
}

// ---- beacon publish ----

type beaconPublishOptions struct {
	Host      string
	States    []string
	FromFile  string
	Systemctl string
}

func newBeaconPublishCmd(a *app) *cobra.Command {
	o := &beaconPublishOptions{}
	cmd := &cobra.Command{
		Use:   "publish --host H [--state UNIT=STATE ...] [--from-file FILE|-]",
		Short: "Publish this host's unit states as its beacon",
		Long: `Publish the beacon of host H: the states of its units, dated on the store's
clock. The states come from one of:

  --state UNIT=STATE   given by hand, repeatable; STATE is one of systemd's
                       ActiveState words: active, failed, inactive, activating,
                       deactivating, reloading
  --from-file FILE|-   a JSON document from the fleet's own agent:
                       {"units": [{"unit": "api.service", "active_state": "failed",
                                   "sub_state": "failed"}]}
                       ("host" and "schema_version" may be given too; not
                       "reported_at", which stado sets)
  neither              systemd on this machine, asked about every unit the
                       registry declares on H (systemctl show); a unit
                       systemd does not know is left out, which the
                       reconciler counts as down

The systemctl binary is $STADO_SYSTEMCTL, else systemctl on PATH.`,
		Args: cobra.NoArgs,
		RunE: runE(func(ctx context.Context, _ []string) error { return o.run(ctx, a) }),
	}
	f := cmd.Flags()
	f.StringVar(&o.Host, "host", "", "the host whose beacon this is (required)")
	f.StringArrayVar(&o.States, "state", nil, "UNIT=STATE, repeatable (STATE: active, failed, inactive, activating, deactivating, reloading)")
	f.StringVar(&o.FromFile, "from-file", "", "read the unit states from a JSON file (- for standard input)")
	f.StringVar(&o.Systemctl, "systemctl", "", "the systemctl binary to ask (default $STADO_SYSTEMCTL, else systemctl on PATH)")
	_ = f.MarkHidden("systemctl")
	return cmd
}

func (o *beaconPublishOptions) run(ctx context.Context, a *app) error {
	if o.Host == "" {
		return usageErrorf("beacon publish needs --host H: the host whose unit states these are (as the registry names it)")
	}
	if err := registry.CheckHost(o.Host); err != nil {
		return usageErrorf("--host: %v", err)
	}
	if len(o.States) > 0 && o.FromFile != "" {
		return usageErrorf("--state and --from-file are alternatives: give one of them, or neither to ask systemd")
	}
	var (
		units    []beacon.Unit
		notFound []string
		err      error
	)
	switch {
	case len(o.States) > 0:
		if units, err = beacon.ParseStateFlags(o.States); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	case o.FromFile != "":
		raw, name, err := readInputFile(a, o.FromFile, "--from-file", "unit state", beacon.MaxSize)
		if err != nil {
			return err
		}
		if units, err = beacon.DecodeUnitsFile(raw, o.Host); err != nil {
			return fmt.Errorf("--from-file %s: %w; fix the file and publish again", name, err)
		}
	}
	store, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	if len(o.States) == 0 && o.FromFile == "" {
		if units, notFound, err = o.askSystemd(ctx, a, store); err != nil {
			return err
		}
	}
	b, err := beacon.Publish(ctx, store, o.Host, units)
	if err != nil {
		return fmt.Errorf("publish the beacon of %s: %w", o.Host, err)
	}
	key, _ := beacon.Key(o.Host)
	fmt.Fprintf(a.streams.Out, "published the beacon of %s at %s (%s): %d units\n",
		o.Host, b.ReportedAt.UTC().Format(beacon.TimeFormat), key, len(b.Units))
	if len(b.Units) > 0 {
		tw := tabwriter.NewWriter(a.streams.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "UNIT\tACTIVE\tSUB")
		for _, u := range b.Units {
			sub := u.SubState
			if sub == "" {
				sub = "-"
			}
			fmt.Fprintln(tw, termsafe.Escape(u.Unit)+"\t"+termsafe.Escape(string(u.ActiveState))+"\t"+termsafe.Escape(sub))
		}
		_ = tw.Flush()
	}
	if len(notFound) > 0 {
		fmt.Fprintf(a.streams.Out, "not found by systemd, so left out (the reconciler counts them as down): %s\n",
			termsafe.Escape(strings.Join(notFound, ", ")))
	}
	return nil
}

// askSystemd asks systemd about every unit the registry declares on the
// host.
func (o *beaconPublishOptions) askSystemd(ctx context.Context, a *app, store objstore.Store) ([]beacon.Unit, []string, error) {
	loaded, err := registry.Load(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, s := range loaded.Registry.OnHost(o.Host) {
		names = append(names, s.Unit)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no services are declared on host %s in the registry (%s), so there is no unit to ask systemd about; "+
			"declare them with `stado service apply -f FILE`, or pass --state UNIT=STATE or --from-file FILE", o.Host, registry.Key)
	}
	path := o.Systemctl
	if path == "" {
		path = a.getenv("STADO_SYSTEMCTL")
	}
	rep, err := beacon.QuerySystemd(ctx, path, names)
	if err != nil {
		return nil, nil, fmt.Errorf("read the unit states from systemd: %w; check that systemctl works on this host, or pass --state or --from-file", err)
	}
	return rep.Units, rep.NotFound, nil
}

// plural renders a count with its noun: "1 host", "3 hosts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

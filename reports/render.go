package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stado/stado/internal/termsafe"
)

// Status is everything `stado optimize status` shows, gathered by the
// command from the store. Strings may come from stored data: rendering
// escapes them.
type Status struct {
	Store string    `json:"store"`
	Now   time.Time `json:"now"`

	Mode                string `json:"mode"`
	PolicyVersion       string `json:"policy_version"`
	PolicyStoreVersion  string `json:"policy_store_version,omitempty"`
	PolicyProblem       string `json:"policy_problem,omitempty"`
	MutationsAllowed    bool   `json:"mutations_allowed"`
	MutationExplanation string `json:"mutation_explanation,omitempty"`

	Pause   PauseView   `json:"pause"`
	Breaker BreakerView `json:"breaker"`
	Leases  []LeaseView `json:"leases"`

	Report *Report `json:"latest_report"`
	// ReportProblem says why the latest report could not be read.
	ReportProblem string `json:"report_problem,omitempty"`
}

// PauseView is the emergency pause.
type PauseView struct {
	Paused      bool       `json:"paused"`
	PolicyPause bool       `json:"policy_pause"`
	Reason      string     `json:"reason,omitempty"`
	ChangedBy   string     `json:"changed_by,omitempty"`
	ChangedAt   *time.Time `json:"changed_at,omitempty"`
}

// BreakerView is the circuit breaker.
type BreakerView struct {
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	Threshold           int        `json:"threshold"`
	OpenUntil           *time.Time `json:"open_until"`
	CooldownSeconds     int        `json:"cooldown_seconds"`
	Trips               int        `json:"trips"`
	LastError           string     `json:"last_error,omitempty"`
}

// LeaseView is one active lease.
type LeaseView struct {
	Subject   string    `json:"subject"`
	Holder    string    `json:"holder"`
	Owner     string    `json:"owner"`
	ExpiresAt time.Time `json:"expires_at"`
	// ExpiresInSeconds is measured on the store's clock.
	ExpiresInSeconds float64 `json:"expires_in_seconds"`
	Unreadable       bool    `json:"unreadable,omitempty"`
}

// WriteStatusJSON writes the status as one JSON document. With all false,
// the report's healthy rows are left out, as in the text form.
func WriteStatusJSON(w io.Writer, s Status, all bool) error {
	if s.Report != nil && !all {
		r := *s.Report
		r.Outcomes = notHealthy(r.Outcomes)
		s.Report = &r
	}
	if s.Leases == nil {
		s.Leases = []LeaseView{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.JSON(b), '\n'))
	return err
}

func notHealthy(os []Outcome) []Outcome {
	out := []Outcome{}
	for _, o := range os {
		if o.Classification != Healthy {
			out = append(out, o)
		}
	}
	return out
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// dur renders a duration for operators: 5m12s, 812ms.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "expired"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// WriteStatusText writes the status for a terminal.
func WriteStatusText(w io.Writer, s Status, all bool) error {
	e := termsafe.Escape
	b := &strings.Builder{}
	fmt.Fprintf(b, "store:    %s\n", e(s.Store))
	policyLine := fmt.Sprintf("policy:   %s", e(s.PolicyVersion))
	if s.PolicyStoreVersion != "" {
		policyLine += fmt.Sprintf(" (store version %s)", e(s.PolicyStoreVersion))
	}
	fmt.Fprintln(b, policyLine)
	if s.PolicyProblem != "" {
		fmt.Fprintf(b, "          INVALID: %s\n", e(s.PolicyProblem))
	}
	fmt.Fprintf(b, "mode:     %s\n", e(s.Mode))

	switch {
	case s.Pause.Paused:
		fmt.Fprintf(b, "pause:    PAUSED by %s", e(s.Pause.ChangedBy))
		if s.Pause.ChangedAt != nil {
			fmt.Fprintf(b, " at %s", ts(*s.Pause.ChangedAt))
		}
		fmt.Fprintf(b, ": %s\n", e(s.Pause.Reason))
		fmt.Fprintln(b, "          resume with `stado optimize resume`")
	case s.Pause.PolicyPause:
		fmt.Fprintln(b, "pause:    PAUSED by the policy (pause: true)")
	default:
		fmt.Fprintln(b, "pause:    not paused")
	}
	if s.Pause.PolicyPause && s.Pause.Paused {
		fmt.Fprintln(b, "          the policy also sets pause: true")
	}

	br := s.Breaker
	fmt.Fprintf(b, "breaker:  %s, %d of %d consecutive failures", e(br.State), br.ConsecutiveFailures, br.Threshold)
	if br.OpenUntil != nil {
		fmt.Fprintf(b, ", open until %s", ts(*br.OpenUntil))
	}
	if br.Trips > 0 {
		fmt.Fprintf(b, ", tripped %d time(s), cooldown %ds", br.Trips, br.CooldownSeconds)
	}
	fmt.Fprintln(b)
	if br.LastError != "" {
		fmt.Fprintf(b, "          last error: %s\n", e(br.LastError))
	}
	if br.State != "closed" {
		fmt.Fprintln(b, "          reset with `stado optimize breaker reset` once the cause is fixed")
	}
	if s.MutationsAllowed {
		fmt.Fprintln(b, "repairs:  allowed")
	} else {
		fmt.Fprintf(b, "repairs:  not allowed: %s\n", e(s.MutationExplanation))
	}

	if len(s.Leases) == 0 {
		fmt.Fprintln(b, "leases:   none active")
	} else {
		fmt.Fprintf(b, "leases:   %d active\n", len(s.Leases))
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  SUBJECT\tOWNER\tEXPIRES IN")
		leases := append([]LeaseView(nil), s.Leases...)
		sort.Slice(leases, func(i, j int) bool { return leases[i].Subject < leases[j].Subject })
		for _, l := range leases {
			in := dur(time.Duration(l.ExpiresInSeconds * float64(time.Second)))
			if l.Unreadable {
				fmt.Fprintf(tw, "  %s\t(unreadable lease object)\theld until %s\n", e(l.Subject), ts(l.ExpiresAt))
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e(l.Subject), e(l.Owner), in)
		}
		tw.Flush()
	}

	if s.ReportProblem != "" {
		fmt.Fprintf(b, "latest:   unreadable: %s\n", e(s.ReportProblem))
	}
	if r := s.Report; r != nil {
		fmt.Fprintf(b, "latest:   run %s by %s, %s mode, took %s\n", e(r.RunID), e(r.Reconciler), e(r.Mode), dur(r.FinishedAt.Sub(r.CreatedAt)))
		fmt.Fprintf(b, "summary:  %s\n", summaryLine(r))
		rows := r.Outcomes
		if !all {
			rows = notHealthy(rows)
		}
		if len(rows) > 0 {
			writeRows(b, rows)
		} else if !all {
			fmt.Fprintln(b, "          every service is healthy (--all lists them)")
		}
	} else if s.ReportProblem == "" {
		fmt.Fprintln(b, "latest:   no tick has run yet: run `stado optimize run`")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// summaryLine renders the summary in the table's order.
func summaryLine(r *Report) string {
	parts := []string{fmt.Sprintf("%d services", r.Summary["services"])}
	for _, c := range Classifications {
		if n := r.Summary[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (blocked %d, failed %d)", r.BlockedCount(), r.FailedCount())
}

// HistoryEntry is one line of `stado optimize history`.
type HistoryEntry struct {
	RunID      string         `json:"run_id"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt time.Time      `json:"finished_at"`
	Reconciler string         `json:"reconciler"`
	Mode       string         `json:"mode"`
	Summary    map[string]int `json:"summary"`
	Problem    string         `json:"problem,omitempty"`
}

// WriteHistoryText writes history entries, newest first, as a table.
func WriteHistoryText(w io.Writer, entries []HistoryEntry) error {
	e := termsafe.Escape
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tRECONCILER\tMODE\tSERVICES\tRECONCILED\tFAILED\tBLOCKED\tTOOK")
	for _, h := range entries {
		if h.Problem != "" {
			fmt.Fprintf(tw, "%s\t(unreadable: %s)\t\t\t\t\t\t\n", e(h.RunID), e(h.Problem))
			continue
		}
		r := Report{Summary: h.Summary}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", e(h.RunID), e(h.Reconciler), e(h.Mode), h.Summary["services"],
			h.Summary[Reconciled], r.FailedCount(), r.BlockedCount(), dur(h.FinishedAt.Sub(h.CreatedAt)))
	}
	return tw.Flush()
}

// WriteRunText writes what `stado optimize run` prints after a tick: the
// run, its summary and every row that is not healthy.
func WriteRunText(w io.Writer, r *Report) error {
	e := termsafe.Escape
	b := &strings.Builder{}
	kind := "run"
	if r.DryRun {
		kind = "dry run (nothing taken, run or written)"
	}
	fmt.Fprintf(b, "%s %s by %s, %s mode, policy %s, took %s\n", kind, e(r.RunID), e(r.Reconciler), e(r.Mode), e(r.PolicyVersion), dur(r.FinishedAt.Sub(r.CreatedAt)))
	fmt.Fprintf(b, "summary: %s\n", summaryLine(r))
	if rows := notHealthy(r.Outcomes); len(rows) > 0 {
		writeRows(b, rows)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRows(w io.Writer, rows []Outcome) {
	e := termsafe.Escape
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  HOST\tSERVICE\tUNIT\tBEACON\tENDPOINT\tCLASSIFICATION\tACTION\tDETAIL")
	for _, o := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e(o.Host), e(o.Service), e(o.Unit), dash(e(o.BeaconState)),
			dash(e(o.EndpointState)), e(o.Classification), dash(e(o.Action)), e(o.Detail))
	}
	tw.Flush()
}

package beacon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/stado/stado/reconcile/registry"
)

// Where a beacon's unit states come from: systemd on the host itself, the
// operator's --state flags, or a file written by a fleet's own agent. Each
// source validates what it is given as strictly as the read side will, so a
// publish either writes a beacon every reconciler accepts or fails.

// ParseStateFlags reads `--state UNIT=STATE` values. STATE is one of States;
// anything else is refused with the list. No sub-state is reported.
func ParseStateFlags(flags []string) ([]Unit, error) {
	units := make([]Unit, 0, len(flags))
	seen := make(map[string]bool, len(flags))
	for _, f := range flags {
		unit, state, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("--state %s: write UNIT=STATE, e.g. --state api.service=failed", quote(f))
		}
		if err := registry.CheckUnit(unit); err != nil {
			return nil, fmt.Errorf("--state %s: %w", quote(f), err)
		}
		st, err := ParseState(state)
		if err != nil {
			return nil, fmt.Errorf("--state %s: %w", quote(f), err)
		}
		if seen[unit] {
			return nil, fmt.Errorf("--state %s: unit %s is given more than once; give each unit once", quote(f), quote(unit))
		}
		seen[unit] = true
		units = append(units, Unit{Unit: unit, ActiveState: st})
	}
	return units, nil
}

// DecodeUnitsFile reads the document an agent writes for `beacon publish
// --from-file`:
//
//	{"units": [{"unit": "api.service", "active_state": "failed", "sub_state": "failed"}]}
//
// Optionally also "schema_version" (must be 1) and "host" (must be host: a
// guard against publishing one host's file as another's). So a beacon
// without its reported_at is accepted too; reported_at itself is refused,
// since stado dates every beacon on the store's clock when it publishes.
// active_state must be one of States; sub_state is optional. Decoding is
// strict: unknown fields, wrong types and trailing data are errors with
// LINE:COL.
func DecodeUnitsFile(data []byte, host string) ([]Unit, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("it is more than %d bytes; a unit list that long is not a beacon", MaxSize)
	}
	var doc struct {
		SchemaVersion *int             `json:"schema_version"`
		Host          *string          `json:"host"`
		ReportedAt    *json.RawMessage `json:"reported_at"`
		Units         *[]Unit          `json:"units"`
	}
	if err := decodeStrict(data, &doc); err != nil {
		return nil, err
	}
	switch {
	case doc.ReportedAt != nil:
		return nil, errors.New("reported_at: stado dates every beacon on the store's clock when it publishes; remove reported_at from the file")
	case doc.SchemaVersion != nil && *doc.SchemaVersion != SchemaVersion:
		return nil, fmt.Errorf("schema_version: %d is not %d; write schema_version: %d or leave it out", *doc.SchemaVersion, SchemaVersion, SchemaVersion)
	case doc.Host != nil && *doc.Host != host:
		return nil, fmt.Errorf("host: the file is for host %s, but --host is %s; publish it for its own host", quote(*doc.Host), quote(host))
	case doc.Units == nil:
		return nil, errors.New(`units: missing; write {"units": [{"unit": "api.service", "active_state": "active"}]}`)
	}
	for i, u := range *doc.Units {
		switch {
		case u.Unit == "":
			return nil, fmt.Errorf("units[%d].unit: missing or empty; name the unit", i)
		case u.ActiveState == "":
			return nil, fmt.Errorf("units[%d].active_state: missing or empty; use one of: %s", i, joinStates())
		}
	}
	return checkUnits(*doc.Units, true)
}

// Systemd query limits.
const (
	// showBatch is how many units one systemctl invocation is asked about.
	showBatch = 256
	// maxShowOutput bounds what systemctl may print.
	maxShowOutput = 16 << 20
)

// showProperties are asked of systemctl. Names lets an answer about an
// alias be matched to the name asked; LoadState tells "not found".
var showProperties = []string{"Id", "Names", "LoadState", "ActiveState", "SubState"}

// SystemdReport is what systemd said about the units asked.
type SystemdReport struct {
	// Units that exist, named as asked (not by systemd's Id, which differs
	// for an alias), in the order asked.
	Units []Unit
	// NotFound lists the units systemd does not know (LoadState=not-found).
	// They are left out of the beacon: absent from a fresh beacon counts as
	// down (DESIGN §8).
	NotFound []string
}

// QuerySystemd asks systemctl (the binary at path; "systemctl" found on
// PATH when empty) for the state of units:
//
//	systemctl show --no-pager -p Id -p Names -p LoadState -p ActiveState -p SubState -- UNIT…
//
// Every answer must match the unit it answers for, or the whole query fails:
// a beacon that reported one unit's state as another's could get a healthy
// service restarted.
func QuerySystemd(ctx context.Context, path string, units []string) (SystemdReport, error) {
	if path == "" {
		path = "systemctl"
	}
	var rep SystemdReport
	var asked []string
	seen := make(map[string]bool, len(units))
	for _, u := range units {
		if err := registry.CheckUnit(u); err != nil {
			return SystemdReport{}, err
		}
		if !seen[u] {
			seen[u] = true
			asked = append(asked, u)
		}
	}
	for start := 0; start < len(asked); start += showBatch {
		batch := asked[start:min(start+showBatch, len(asked))]
		out, err := runShow(ctx, path, batch)
		if err != nil {
			return SystemdReport{}, err
		}
		blocks, err := ParseShow(out)
		if err != nil {
			return SystemdReport{}, fmt.Errorf("cannot read the output of %s show: %w", path, err)
		}
		if len(blocks) != len(batch) {
			return SystemdReport{}, fmt.Errorf("%s show answered %d times for %d units; refusing to guess which answer is whose", path, len(blocks), len(batch))
		}
		for i, b := range blocks {
			u, found, err := unitFromShow(batch[i], b)
			if err != nil {
				return SystemdReport{}, fmt.Errorf("%s show: %w", path, err)
			}
			if !found {
				rep.NotFound = append(rep.NotFound, batch[i])
				continue
			}
			rep.Units = append(rep.Units, u)
		}
	}
	return rep, nil
}

func runShow(ctx context.Context, path string, units []string) ([]byte, error) {
	args := []string{"show", "--no-pager"}
	for _, p := range showProperties {
		args = append(args, "-p", p)
	}
	args = append(args, "--")
	args = append(args, units...)
	cmd := exec.CommandContext(ctx, path, args...)
	stdout := &capped{max: maxShowOutput}
	stderr := &capped{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	switch {
	case stdout.over:
		return nil, fmt.Errorf("%s show printed more than %d bytes; that is not its output for %d units", path, maxShowOutput, len(units))
	case err != nil:
		msg := strings.TrimSpace(stderr.buf.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg != "" {
			msg = ": " + quote(msg)
		}
		return nil, fmt.Errorf("run %s show: %w%s", path, err, msg)
	}
	return stdout.buf.Bytes(), nil
}

// capped is a writer that keeps at most max bytes and notes when more came.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.over = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

// unitFromShow checks one answer against the unit asked and reads it.
func unitFromShow(asked string, props map[string]string) (Unit, bool, error) {
	id := props["Id"]
	matches := id == asked || id == asked+".service"
	for _, n := range strings.Fields(props["Names"]) {
		matches = matches || n == asked || n == asked+".service"
	}
	if !matches {
		return Unit{}, false, fmt.Errorf("the answer for %s is about %s; refusing to report one unit's state as another's", quote(asked), quote(id))
	}
	if props["LoadState"] == "not-found" {
		return Unit{}, false, nil
	}
	active, sub := props["ActiveState"], props["SubState"]
	if !word(active) {
		return Unit{}, false, fmt.Errorf("unit %s has ActiveState %s, which is not a unit state", quote(asked), quote(active))
	}
	if sub != "" && !word(sub) {
		return Unit{}, false, fmt.Errorf("unit %s has SubState %s, which is not a unit sub-state", quote(asked), quote(sub))
	}
	return Unit{Unit: asked, ActiveState: State(active), SubState: sub}, true, nil
}

// ParseShow parses the output of `systemctl show` for several units: one
// block of KEY=VALUE lines per unit, blocks separated by blank lines. Keys
// are systemd property names (letters and digits); a value is the rest of
// the line after the first "=". A key twice in one block, or a line that is
// not KEY=VALUE, is an error naming the line.
func ParseShow(out []byte) ([]map[string]string, error) {
	var blocks []map[string]string
	var cur map[string]string
	for n, line := range strings.Split(string(out), "\n") {
		if line == "" {
			cur = nil
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || !propertyName(key) {
			return nil, fmt.Errorf("line %d: %s is not KEY=VALUE", n+1, quote(line))
		}
		if cur == nil {
			cur = make(map[string]string, len(showProperties))
			blocks = append(blocks, cur)
		}
		if _, dup := cur[key]; dup {
			return nil, fmt.Errorf("line %d: %s appears twice for one unit (a blank line missing between units?)", n+1, key)
		}
		cur[key] = val
	}
	return blocks, nil
}

func propertyName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ReadLimited reads at most MaxSize bytes from r (a --from-file), failing
// when there is more.
func ReadLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("it is more than %d bytes; a unit list that long is not a beacon", MaxSize)
	}
	return data, nil
}

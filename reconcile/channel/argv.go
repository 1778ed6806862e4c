package channel

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Placeholders a configured argv may use. They are substituted only as whole
// arguments: an argument that equals "{unit}" becomes the unit name, and an
// argument that merely contains one ("--unit={unit}") is refused when the
// channel is built. In-argument substitution is deliberately unsupported: a
// value spliced into a larger argument can change how the program parses it
// (an "=" or ":" inside a name), while a whole argument is exactly one
// validated name. Write "--unit", "{unit}" as two arguments instead.
const (
	PlaceholderHost    = "{host}"
	PlaceholderUnit    = "{unit}"
	PlaceholderService = "{service}"
)

// looksLikePlaceholder catches a misspelled or unsupported placeholder
// ("{hostname}"), which would otherwise be passed on literally and run the
// command against the wrong thing.
var looksLikePlaceholder = regexp.MustCompile(`^\{[A-Za-z_][A-Za-z0-9_-]*\}$`)

// arg is one compiled argument: a literal, or the placeholder to put there.
type arg struct {
	lit string
	ph  string // "" for a literal
}

// argvTemplate is a configured command, validated once when the channel is
// built.
type argvTemplate []arg

// compileArgv validates a configured command. where names it in the local
// config (e.g. channels.exec.actions.restart) so the error says what to fix.
func compileArgv(where string, argv []string) (argvTemplate, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%s: the command is empty: give the program and its arguments as a list, fix it in the local config", where)
	}
	t := make(argvTemplate, 0, len(argv))
	for i, a := range argv {
		ph := ""
		switch a {
		case PlaceholderHost, PlaceholderUnit, PlaceholderService:
			ph = a
		default:
			for _, p := range []string{PlaceholderHost, PlaceholderUnit, PlaceholderService} {
				if strings.Contains(a, p) {
					return nil, fmt.Errorf("%s: argument %d %s embeds %s inside a larger argument: placeholders are substituted only as whole arguments, so make %s an argument of its own (e.g. \"--unit\", \"{unit}\")", where, i, quoteShown(a), p, p)
				}
			}
			if looksLikePlaceholder.MatchString(a) {
				return nil, fmt.Errorf("%s: argument %d %s is not a placeholder stado knows: use {host}, {unit} or {service}", where, i, quoteShown(a))
			}
		}
		if i == 0 && ph != "" {
			// The program must be fixed by the operator's config: a
			// placeholder there would let a registry entry choose what runs.
			return nil, fmt.Errorf("%s: the program (first element) is the placeholder %s: name a fixed program and pass %s as an argument", where, ph, ph)
		}
		t = append(t, arg{lit: a, ph: ph})
	}
	return t, nil
}

// expand substitutes req's validated names. Substitution is one pass over
// the template, so a name is never itself expanded again.
func (t argvTemplate) expand(req Request) []string {
	out := make([]string, len(t))
	for i, a := range t {
		switch a.ph {
		case PlaceholderHost:
			out[i] = req.Host
		case PlaceholderUnit:
			out[i] = req.Unit
		case PlaceholderService:
			out[i] = req.Service
		default:
			out[i] = a.lit
		}
	}
	return out
}

func compileActions(kind string, actions map[string][]string) (map[string]argvTemplate, error) {
	out := make(map[string]argvTemplate, len(actions))
	// Sorted, so that of several bad actions the same one is reported
	// every time.
	for _, name := range slices.Sorted(maps.Keys(actions)) {
		t, err := compileArgv(kind+" channel: channels."+kind+".actions."+name, actions[name])
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// shellQuote quotes s as one word for a POSIX shell: inside single quotes
// nothing is special, and a single quote itself is closed, escaped and
// reopened ('\”).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

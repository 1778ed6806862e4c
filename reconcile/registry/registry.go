// Package registry owns the declared services (DESIGN §8): the schema of
// state/services/registry.yaml, its strict decoding and validation with a
// line and column for every problem, and its versioned storage, applied with
// compare-and-swap so that two operators cannot silently overwrite each other.
//
// A registry is the list of what autonomy watches, and at fleet scale it is
// long: a tick loads it every time, so Parse takes a fast path for documents
// written in the plain shape (one key: value per line, as in DESIGN §8) and
// falls back to the strict YAML walk for anything else and for every document
// with a problem, so that errors are always the strict decoder's. The fast
// path accepts a document only when the strict path would decode it to the
// same services; FuzzParse holds it to that.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stado/stado/internal/yamlstrict"
	"github.com/stado/stado/reconcile/probe"
)

// Key is where the registry is stored.
const Key = "state/services/registry.yaml"

// Limits.
const (
	// MaxServices is the most services one registry may declare.
	MaxServices = 200_000
	// MaxDocumentSize is the largest registry document accepted: room for
	// MaxServices services of about 300 bytes each.
	MaxDocumentSize = 64 << 20
	// MaxNameLen is the longest host, unit or service name, in bytes (a
	// DNS name's limit).
	MaxNameLen = 253
	// MaxActionLen is the longest repair action name.
	MaxActionLen = 64
)

// ErrInvalidName is wrapped by CheckHost and CheckUnit errors.
var ErrInvalidName = errors.New("invalid name")

// Channel is how a repair reaches a host (DESIGN §9).
type Channel string

// The channels.
const (
	ChannelExec  Channel = "exec"
	ChannelSSH   Channel = "ssh"
	ChannelLocal Channel = "local"
)

// Channels lists every channel, in the order messages list them.
var Channels = []Channel{ChannelExec, ChannelSSH, ChannelLocal}

// Valid reports whether c is one of Channels.
func (c Channel) Valid() bool {
	return c == ChannelExec || c == ChannelSSH || c == ChannelLocal
}

// Service is one declared service.
type Service struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Unit string `json:"unit"`
	// Endpoint is "" when none is declared; otherwise ParseEndpoint accepts
	// it.
	Endpoint string `json:"endpoint,omitempty"`
	// Repair is the channel action that repairs the service; set whenever
	// Managed is.
	Repair string `json:"repair,omitempty"`
	// Channel is set whenever Managed is.
	Channel Channel `json:"channel,omitempty"`
	// Managed is false for an externally managed service: never repaired.
	Managed bool `json:"managed"`
}

// Subject is the service's mutation subject, the name its lease is taken on.
func (s Service) Subject() string { return Subject(s.Host, s.Unit) }

// Subject is the mutation subject of unit on host: service:<host>:<unit>.
func Subject(host, unit string) string { return "service:" + host + ":" + unit }

// Registry is a valid set of declared services.
type Registry struct {
	// Services in the order declared; never nil. (host, unit) pairs and
	// subjects are unique.
	Services []Service
}

// Hosts returns every host some service is declared on, sorted, once each.
func (r *Registry) Hosts() []string {
	seen := make(map[string]struct{})
	var hosts []string
	for _, s := range r.Services {
		if _, ok := seen[s.Host]; !ok {
			seen[s.Host] = struct{}{}
			hosts = append(hosts, s.Host)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// OnHost returns the services declared on host, in declared order.
func (r *Registry) OnHost(host string) []Service {
	var out []Service
	for _, s := range r.Services {
		if s.Host == host {
			out = append(out, s)
		}
	}
	return out
}

// document and entry are the YAML shape. Managed is a pointer so that an
// omitted key can default to true: the strict decoder makes list items
// afresh, so a default cannot be filled in beforehand.
type document struct {
	Services []entry `yaml:"services"`
}

type entry struct {
	Name     string `yaml:"name"`
	Host     string `yaml:"host"`
	Unit     string `yaml:"unit"`
	Endpoint string `yaml:"endpoint"`
	Repair   string `yaml:"repair"`
	Channel  string `yaml:"channel"`
	Managed  *bool  `yaml:"managed"`
}

func (e *entry) managed() bool { return e.Managed == nil || *e.Managed }

// Parse decodes a registry document strictly and validates it. The error,
// when there is one, is a yamlstrict.Errors holding every problem found, each
// with its line and column, one per line of its text: callers prefix each
// line with the file name.
func Parse(data []byte) (*Registry, error) {
	if len(data) > MaxDocumentSize {
		return nil, yamlstrict.Errors{{Line: 1, Column: 1, Msg: fmt.Sprintf(
			"the registry is %d bytes, more than the %d allowed; check that this is the right file",
			len(data), MaxDocumentSize)}}.Err()
	}
	if entries, ok := fastDecode(data); ok && len(validate(entries, nil)) == 0 {
		return build(entries), nil
	}
	entries, err := strictDecode(data)
	if err != nil {
		return nil, err
	}
	return build(entries), nil
}

// strictDecode is the full strict path: every problem, with positions.
func strictDecode(data []byte) ([]entry, error) {
	var doc document
	pos, errs := yamlstrict.Decode(data, &doc)
	if pos == nil {
		return nil, errs.Err()
	}
	if !pos.Has("services") && len(errs) == 0 {
		errs = append(errs, pos.Errorf("services",
			"is required: list the declared services under services:, or write services: [] to declare none"))
	}
	// A value that could not be decoded is already reported; validating the
	// zero value left in its place would only add noise.
	undecoded := make(map[string]bool, len(errs))
	for _, e := range errs {
		undecoded[e.Path] = true
	}
	for _, e := range validate(doc.Services, pos) {
		item, _, _ := strings.Cut(e.Path, ".")
		if !undecoded[e.Path] && !undecoded[item] {
			errs = append(errs, e)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	if doc.Services == nil {
		doc.Services = []entry{}
	}
	return doc.Services, nil
}

func build(entries []entry) *Registry {
	r := &Registry{Services: make([]Service, len(entries))}
	for i := range entries {
		e := &entries[i]
		r.Services[i] = Service{
			Name: e.Name, Host: e.Host, Unit: e.Unit, Endpoint: e.Endpoint,
			Repair: e.Repair, Channel: Channel(e.Channel), Managed: e.managed(),
		}
	}
	return r
}

// pair is a service's identity.
type pair struct{ host, unit string }

// validate checks every rule of DESIGN §8, placing each problem with pos
// (nil: no positions, which the fast path uses only to learn whether there is
// any problem at all).
func validate(entries []entry, pos *yamlstrict.Positions) yamlstrict.Errors {
	var errs yamlstrict.Errors
	if len(entries) > MaxServices {
		errs = append(errs, pos.Errorf("services", "declares %d services, more than the %d allowed; check that this is the right file",
			len(entries), MaxServices))
	}
	first := make(map[pair]int, len(entries))
	var subjects map[string]int // only needed when a name holds ":"
	for i := range entries {
		e := &entries[i]
		// Paths are built only when needed: on the fast path (no
		// positions) a valid registry costs no string per service.
		item := func() string { return "services[" + strconv.Itoa(i) + "]" }
		add := func(field, format string, args ...any) {
			errs = append(errs, pos.Errorf(item()+"."+field, format, args...))
		}
		has := func(field string) bool { return pos != nil && pos.Has(item()+"."+field) }

		if msg := checkName(e.Name, has("name")); msg != "" {
			add("name", "%s", msg)
		}
		hostOK := checkRequiredIdent("host", e.Host, has("host"), "write the host the unit runs on, e.g. host: web-1", add)
		unitOK := checkRequiredIdent("unit", e.Unit, has("unit"), "write the systemd unit, e.g. unit: api.service", add)
		if e.Endpoint != "" || has("endpoint") {
			if _, err := probe.ParseEndpoint(e.Endpoint); err != nil {
				add("endpoint", "%v", err)
			}
		}
		managed := e.managed()
		switch {
		case e.Repair != "":
			if msg := checkAction(e.Repair); msg != "" {
				add("repair", "%s", msg)
			}
		case managed && has("repair"):
			add("repair", "must not be empty for a managed service: name the action that repairs it, e.g. repair: restart, or set managed: false")
		case managed:
			add("repair", "is required for a managed service: name the action that repairs it, e.g. repair: restart, or set managed: false")
		}
		const channelHint = "write channel: exec, ssh or local, or set managed: false"
		switch {
		case e.Channel != "" || (has("channel") && !managed):
			if !Channel(e.Channel).Valid() {
				add("channel", "unknown channel %s; use one of: %s", quote(e.Channel), joinChannels())
			}
		case managed && has("channel"):
			add("channel", "must not be empty for a managed service: "+channelHint)
		case managed:
			add("channel", "is required for a managed service: "+channelHint)
		}

		if !hostOK || !unitOK {
			continue
		}
		p := pair{e.Host, e.Unit}
		if j, dup := first[p]; dup {
			errs = append(errs, pos.Errorf(item(), "duplicate service: host %s, unit %s is already declared %s; remove one of them",
				quote(e.Host), quote(e.Unit), where(pos, j)))
			continue
		}
		first[p] = i
		if strings.Contains(e.Host, ":") || strings.Contains(e.Unit, ":") || subjects != nil {
			if subjects == nil {
				subjects = make(map[string]int)
				for q, k := range first {
					if k != i {
						subjects[Subject(q.host, q.unit)] = k
					}
				}
			}
			subj := Subject(e.Host, e.Unit)
			if j, clash := subjects[subj]; clash {
				o := &entries[j]
				errs = append(errs, pos.Errorf(item(), "host %s, unit %s has the subject %s, like host %s, unit %s declared %s; "+
					"the two would share one lease: rename a host or unit so that their \":\" does not make them collide",
					quote(e.Host), quote(e.Unit), quote(subj), quote(o.Host), quote(o.Unit), where(pos, j)))
				continue
			}
			subjects[subj] = i
		}
	}
	return errs
}

// where names the place of services[j] for a message.
func where(pos *yamlstrict.Positions, j int) string {
	item := "services[" + strconv.Itoa(j) + "]"
	if p := pos.Of(item); !p.IsZero() {
		return "at " + p.String() + " (" + item + ")"
	}
	return "as " + item
}

// checkRequiredIdent checks a host or unit, reporting through add, and says
// whether it is usable as an identity.
func checkRequiredIdent(field, v string, present bool, hint string, add func(field, format string, args ...any)) bool {
	switch {
	case v == "" && present:
		add(field, "must not be empty: %s", hint)
		return false
	case v == "":
		add(field, "is required: %s", hint)
		return false
	}
	if msg := identProblem(field, v); msg != "" {
		add(field, "%s", msg)
		return false
	}
	return true
}

// identOK is the character set of DESIGN §8 for hosts and units.
func identOK(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '@' || c == ':' || c == '-'
}

// identProblem says why v is not a valid host or unit name, or "". what
// names it in the message ("host", "unit").
func identProblem(what, v string) string {
	for i := 0; i < len(v); i++ {
		if !identOK(v[i]) {
			r, _ := utf8.DecodeRuneInString(v[i:])
			return fmt.Sprintf("%s %s contains %s, which is not allowed; use only letters, digits and . _ @ : -",
				what, quote(v), describeRune(r))
		}
	}
	switch {
	case v[0] == '-' || v[0] == '.':
		return fmt.Sprintf("%s %s starts with %q; a name must start with a letter, a digit or one of _ @ : "+
			"(a leading \"-\" reads as a command-line option, a leading \".\" as a hidden file)", what, quote(v), v[:1])
	case len(v) > MaxNameLen:
		return fmt.Sprintf("%s is %d characters long, more than the %d allowed; shorten it", what, len(v), MaxNameLen)
	}
	return ""
}

func describeRune(r rune) string {
	if r == utf8.RuneError {
		return "a byte that is not UTF-8"
	}
	return fmt.Sprintf("%s (%U)", strconv.QuoteRune(r), r)
}

// CheckHost returns nil when host is a valid host name (DESIGN §8), or an
// error saying what is wrong.
func CheckHost(host string) error { return checkIdent("host", host) }

// CheckUnit returns nil when unit is a valid unit name (DESIGN §8), or an
// error saying what is wrong.
func CheckUnit(unit string) error { return checkIdent("unit", unit) }

func checkIdent(what, v string) error {
	if v == "" {
		return fmt.Errorf("%w: %s must not be empty", ErrInvalidName, what)
	}
	if msg := identProblem(what, v); msg != "" {
		return fmt.Errorf("%w: %s", ErrInvalidName, msg)
	}
	return nil
}

// checkName says why a service name is unusable, or "".
func checkName(name string, present bool) string {
	const hint = "give the service a short name, e.g. name: api"
	switch {
	case name == "" && !present:
		return "is required: " + hint
	case strings.TrimSpace(name) == "":
		return "must not be empty: " + hint
	case strings.TrimSpace(name) != name:
		return fmt.Sprintf("%s has leading or trailing spaces; remove them", quote(name))
	case len(name) > MaxNameLen:
		return fmt.Sprintf("is %d bytes long, more than the %d allowed; shorten it", len(name), MaxNameLen)
	}
	for i, r := range name {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return fmt.Sprintf("contains %s at byte %d, which is not printable; use printable text only", describeRune(r), i)
		}
	}
	return ""
}

// checkAction says why a repair action name is unusable, or "". Action
// names are keys of a channel's action table; they are kept to a plain word
// so that one can never read as an option or carry anything a shell or a
// terminal would interpret.
func checkAction(a string) string {
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			r, _ := utf8.DecodeRuneInString(a[i:])
			return fmt.Sprintf("repair action %s contains %s; use only letters, digits and . _ -", quote(a), describeRune(r))
		}
	}
	switch {
	case a[0] == '-':
		return fmt.Sprintf("repair action %s starts with \"-\"; start it with a letter or digit", quote(a))
	case len(a) > MaxActionLen:
		return fmt.Sprintf("repair action is %d characters long, more than the %d allowed; shorten it", len(a), MaxActionLen)
	}
	return ""
}

func joinChannels() string {
	s := make([]string, len(Channels))
	for i, c := range Channels {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// quote renders a value from the document for a message: quoted, control
// characters escaped, shortened.
func quote(s string) string {
	const maxRunes = 60
	if utf8.RuneCountInString(s) > maxRunes {
		return strconv.Quote(string([]rune(s)[:maxRunes])) + "…"
	}
	return strconv.Quote(s)
}

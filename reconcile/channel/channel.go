// Package channel owns how a repair reaches a host (DESIGN §9): the exec, ssh
// and local-systemctl channels that turn a declared action into an argv,
// validate every value substituted into it, run it under the lease's fence
// (its own process group, SIGKILLed as a whole at the fence deadline) with the
// lease in its environment, and report what ran, how it ended and a bounded,
// control-character-safe tail of its output.
//
// Nothing here decides whether a repair should run: that is the reconciler's.
// A Channel only refuses what it cannot run safely.
package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/internal/termsafe"
)

// Channel kinds, as the registry's `channel:` field names them.
const (
	KindExec  = "exec"
	KindSSH   = "ssh"
	KindLocal = "local"
)

// ActionCheck is the action that answers "is the service up?" with exit
// status 0. A down service that has neither an endpoint nor this action
// cannot be verified and is never repaired (DESIGN §8,
// declaration_incomplete).
const ActionCheck = "check"

// Environment variables every repair receives.
const (
	EnvLeaseToken     = "STADO_LEASE_TOKEN"
	EnvLeaseExpiresAt = "STADO_LEASE_EXPIRES_AT"
	EnvFenceDeadline  = "STADO_FENCE_DEADLINE"
)

// TimeFormat is how lease instants are written into a repair's environment:
// RFC 3339 in UTC with all nine fractional digits, so every value has the
// same width and sorts as text.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Sentinel errors. Every error Run returns wraps exactly one of them, or the
// caller's context error (context.Canceled, context.DeadlineExceeded) when
// the caller's own context ended the run.
var (
	// ErrUnknownAction: the channel defines no such action; nothing ran.
	ErrUnknownAction = errors.New("unknown channel action")
	// ErrRefused: the request is unsafe or incomplete (a hostile host,
	// unit or service name, no lease or fence); nothing ran.
	ErrRefused = errors.New("channel request refused")
	// ErrStart: the program could not be started; nothing ran.
	ErrStart = errors.New("repair command could not start")
	// ErrFailed: the program ran and exited non-zero (or was killed by a
	// signal that was not the fence's).
	ErrFailed = errors.New("repair command failed")
	// ErrFenced: the fence deadline was reached; the whole process group
	// was killed (or, if the deadline had passed already, nothing ran:
	// Result.Started tells which).
	ErrFenced = errors.New("fence deadline reached")
	// ErrConnect: ssh exited with status 255: the host was unreachable,
	// its host key unknown or changed, authentication failed (in these
	// cases the remote command did not run), or the connection broke or
	// the remote command was killed by a signal (it may have run).
	ErrConnect = errors.New("ssh could not run the command on the host")
)

// LeaseInfo is the grant a repair runs under, as the repair sees it.
type LeaseInfo struct {
	// Token identifies the grant. It is a secret of sorts (it releases the
	// lease): it is passed in the environment and never shown in Argv or
	// an error.
	Token string
	// ExpiresAt is the lease's instant on the store clock.
	ExpiresAt time.Time
	// FenceInstant is the fence on the store clock (lease.Fence.Instant).
	FenceInstant time.Time
}

// Request is one action on one service.
type Request struct {
	Host, Unit, Service string
	// Action is an action the channel defines (Has(Action) is true).
	Action string
	Lease  LeaseInfo
	// Deadline is the fence as a local deadline (lease.Fence.Deadline),
	// read against Options.Clock: the whole process group is killed when
	// it is reached.
	Deadline time.Time
}

// Result is what ran and how it ended. Run returns it with or without an
// error, filled in as far as the run got.
type Result struct {
	// Argv is what was executed locally, with the lease token redacted.
	Argv []string
	// Started reports whether the program was started at all: false means
	// nothing ran, anywhere.
	Started bool
	// ExitCode is the program's exit status, or -1 if it did not exit
	// normally (killed by a signal, never started).
	ExitCode int
	// Output is the tail of combined stdout and stderr (at most
	// Options.OutputLimit bytes of it), with the lease token replaced by
	// REDACTED and control characters other than newline and tab escaped,
	// so it can be stored in a report as is.
	Output   string
	Duration time.Duration
}

// Channel runs actions on hosts. Implementations are safe for concurrent
// use: the reconciler runs up to max_concurrent_mutations repairs at once.
type Channel interface {
	// Name is the channel kind: exec, ssh or local.
	Name() string
	// Has reports whether the channel defines action.
	Has(action string) bool
	// Run executes req.Action for req's service, fenced by req.Deadline.
	Run(ctx context.Context, req Request) (Result, error)
}

// Options carries what a channel needs from its environment. The zero value
// is usable.
type Options struct {
	// Clock reads local time: Request.Deadline is judged against it and
	// Result.Duration measured on it. Pass the clock the lease manager
	// minted the fence with. Default clock.Real{}.
	Clock clock.Clock
	// Logger receives one debug record per run, and a warning when a
	// descendant escaped the process group. Default: discard.
	Logger *slog.Logger
	// Env is the base environment of every program run (the ssh client,
	// the exec program, systemctl); the STADO_ lease variables are set on
	// top of it. Nil means an allowlisted part of this process's
	// environment (see DefaultEnv), so store credentials in the
	// reconciler's environment do not leak into repair commands.
	Env []string
	// OutputLimit bounds Result.Output in bytes (its tail is kept).
	// Default 4096.
	OutputLimit int
	// Hostname is this machine's name in the registry; the local channel
	// refuses services declared on other hosts. Default os.Hostname().
	Hostname string
	// WaitDelay bounds how long Run waits for output after the process
	// group is gone, in case a process escaped the group (setsid) and
	// holds the output pipe. Default 2s.
	WaitDelay time.Duration
}

const (
	defaultOutputLimit = 4096
	defaultWaitDelay   = 2 * time.Second
)

// envAllowed lists the variables DefaultEnv keeps: what programs need to
// find their tools, their home, their locale and (for ssh) an agent, and
// nothing that could carry the reconciler's store credentials.
var envAllowed = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SSH_AUTH_SOCK", "XDG_RUNTIME_DIR"}

// DefaultEnv returns the allowlisted part of environ (PATH, HOME, USER,
// LOGNAME, LANG, LANGUAGE, LC_*, TZ, TMPDIR, SSH_AUTH_SOCK,
// XDG_RUNTIME_DIR).
func DefaultEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LC_") {
			out = append(out, kv)
			continue
		}
		for _, a := range envAllowed {
			if name == a {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Env == nil {
		o.Env = DefaultEnv(os.Environ())
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = defaultOutputLimit
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = defaultWaitDelay
	}
	return o
}

// New builds the channel of the given kind from the local config (nil means
// localconfig.Default()). Build only the kinds the registry uses: an ssh
// channel cannot be built without a known_hosts file.
func New(kind string, cfg *localconfig.Config, opts Options) (Channel, error) {
	if cfg == nil {
		cfg = localconfig.Default()
	}
	switch kind {
	case KindExec:
		return NewExec(cfg.Channels.Exec, opts)
	case KindSSH:
		return NewSSH(cfg.Channels.SSH, opts)
	case KindLocal:
		return NewLocal(cfg.Channels.Local, opts)
	}
	return nil, fmt.Errorf("unknown channel kind %q: a service's channel must be exec, ssh or local", kind)
}

// maxName is the longest host, unit or service name accepted (a DNS name's
// limit).
const maxName = 253

// ValidName reports why s cannot be substituted into a command as a host,
// unit or service name, or nil if it can. Only [A-Za-z0-9._@:-] is allowed,
// not empty, not starting with '-' (it would be read as an option, e.g.
// -oProxyCommand=...), at most 253 bytes. what names the field in the error.
func ValidName(what, s string) error {
	if s == "" {
		return fmt.Errorf("the %s is empty", what)
	}
	if len(s) > maxName {
		return fmt.Errorf("the %s is %d bytes long, more than the %d allowed", what, len(s), maxName)
	}
	if s[0] == '-' {
		return fmt.Errorf("the %s %s starts with '-', which a program would read as an option", what, quoteShown(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '@' || c == ':' || c == '-') {
			return fmt.Errorf("the %s %s contains %s: only letters, digits and . _ @ : - are allowed", what, quoteShown(s), quoteShown(string(c)))
		}
	}
	return nil
}

// quoteShown quotes a hostile value for an error message with its control
// characters escaped and its length bounded, so an error cannot rewrite the
// operator's terminal or flood a report.
func quoteShown(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "..."
	}
	return "\"" + termsafe.Escape(s) + "\""
}

// validateRequest refuses a request that must not reach a program: hostile
// names, or no lease to run under.
func validateRequest(kind string, req Request) error {
	for _, f := range []struct{ what, v string }{{"host", req.Host}, {"unit", req.Unit}, {"service name", req.Service}} {
		if err := ValidName(f.what, f.v); err != nil {
			return fmt.Errorf("%w: %s %s: %w; fix the service's declaration in the registry", ErrRefused, kind, req.Action, err)
		}
	}
	l := req.Lease
	switch {
	case l.Token == "":
		return fmt.Errorf("%w: %s %s for %s on %s has no lease token: a repair runs only under a lease", ErrRefused, kind, req.Action, req.Unit, req.Host)
	case len(l.Token) > 256 || strings.ContainsFunc(l.Token, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: %s %s for %s on %s: the lease token is malformed (control characters or over 256 bytes)", ErrRefused, kind, req.Action, req.Unit, req.Host)
	case l.ExpiresAt.IsZero() || l.FenceInstant.IsZero():
		return fmt.Errorf("%w: %s %s for %s on %s: the lease's expiry or fence instant is missing: mint the fence with lease.Manager.Fence", ErrRefused, kind, req.Action, req.Unit, req.Host)
	case req.Deadline.IsZero():
		return fmt.Errorf("%w: %s %s for %s on %s has no fence deadline: a repair must not outlive its lease", ErrRefused, kind, req.Action, req.Unit, req.Host)
	}
	return nil
}

// leaseEnv is the three STADO_ variables for req, in a fixed order.
func leaseEnv(req Request) []string {
	return []string{
		EnvLeaseToken + "=" + req.Lease.Token,
		EnvLeaseExpiresAt + "=" + req.Lease.ExpiresAt.UTC().Format(TimeFormat),
		EnvFenceDeadline + "=" + req.Lease.FenceInstant.UTC().Format(TimeFormat),
	}
}

// childEnv is base without any STADO_ lease variable it may carry (a
// reconciler started by a repair of another must not pass on a stale
// token), plus req's.
func childEnv(base []string, req Request) []string {
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if name == EnvLeaseToken || name == EnvLeaseExpiresAt || name == EnvFenceDeadline {
			continue
		}
		env = append(env, kv)
	}
	return append(env, leaseEnv(req)...)
}

// unknownAction is the ErrUnknownAction error for action on channel kind;
// how names where actions are declared.
func unknownAction(kind, action, how string) error {
	return fmt.Errorf("%w: the %s channel defines no action %s: %s, or change the service's repair action", ErrUnknownAction, kind, quoteShown(action), how)
}

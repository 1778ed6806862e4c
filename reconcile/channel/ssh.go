package channel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stado/stado/internal/localconfig"
)

// sshChannel runs an action's argv on the host with the OpenSSH client.
type sshChannel struct {
	opts       Options
	binary     string
	options    []string // every ssh option, up to (not including) "--"
	knownHosts string
	actions    map[string]argvTemplate
}

// NewSSH builds the ssh channel from channels.ssh. It refuses to exist
// without a known_hosts file: ssh must never run without strict host-key
// checking, so there is no mode in which it trusts a key on first use.
func NewSSH(cfg localconfig.SSHChannel, opts Options) (Channel, error) {
	if cfg.KnownHosts == "" {
		return nil, errors.New("ssh channel: channels.ssh.known_hosts is not set: stado never connects without strict host-key checking; put the hosts' verified keys in a known_hosts file and name it in the local config")
	}
	if err := sshPath("known_hosts", cfg.KnownHosts); err != nil {
		return nil, err
	}
	if cfg.IdentityFile != "" {
		if err := sshPath("identity_file", cfg.IdentityFile); err != nil {
			return nil, err
		}
	}
	if cfg.User != "" {
		if err := ValidName("ssh user", cfg.User); err != nil {
			return nil, fmt.Errorf("ssh channel: channels.ssh.user: %w; fix it in the local config", err)
		}
	}
	port := cfg.Port
	if port == 0 {
		port = 22
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("ssh channel: channels.ssh.port must be between 1 and 65535; got %d", port)
	}
	timeout := cfg.ConnectTimeoutSeconds
	if timeout == 0 {
		timeout = 10
	}
	if timeout < 1 || timeout > 300 {
		return nil, fmt.Errorf("ssh channel: channels.ssh.connect_timeout_seconds must be between 1 and 300; got %d", timeout)
	}
	binary := cfg.Binary
	if binary == "" {
		binary = "ssh"
	}
	if strings.Contains(binary, "/") && !filepath.IsAbs(binary) {
		return nil, fmt.Errorf("ssh channel: channels.ssh.binary %s is a relative path: use an absolute path or a bare name found on PATH", quoteShown(binary))
	}
	actions, err := compileActions(KindSSH, cfg.Actions)
	if err != nil {
		return nil, err
	}
	for name, t := range actions {
		// The remote program follows env's NAME=VALUE operands: a name with
		// "=" would be taken as one more variable, a leading "-" as an
		// option of env.
		if p := t[0].lit; strings.HasPrefix(p, "-") || strings.Contains(p, "=") {
			return nil, fmt.Errorf("ssh channel: channels.ssh.actions.%s: the program %s must not start with '-' or contain '='", name, quoteShown(p))
		}
	}
	options := []string{
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + cfg.KnownHosts,
		// The configured file is the whole trust root: a key some other
		// tool put in the machine-wide file must not vouch for a host.
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "ConnectTimeout=" + strconv.Itoa(timeout),
		"-o", "IdentitiesOnly=yes",
	}
	if cfg.IdentityFile != "" {
		options = append(options, "-i", cfg.IdentityFile)
	}
	options = append(options, "-p", strconv.Itoa(port))
	if cfg.User != "" {
		options = append(options, "-l", cfg.User)
	}
	// No pseudo-terminal: nothing on the remote side may prompt, and the
	// output is not rewritten by terminal line discipline.
	options = append(options, "-T")
	return &sshChannel{opts: opts.withDefaults(), binary: binary, options: options, knownHosts: cfg.KnownHosts, actions: actions}, nil
}

// sshPath checks a file the ssh options name. ssh reads option values as
// whitespace-separated lists and expands % and ~ in them, so such paths
// would silently mean another file; a relative path would depend on the
// reconciler's working directory.
func sshPath(key, p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("ssh channel: channels.ssh.%s %s must be an absolute path", key, quoteShown(p))
	}
	if strings.ContainsAny(p, " \t\r\n\"'\\%") {
		return fmt.Errorf("ssh channel: channels.ssh.%s %s contains whitespace, a quote, a backslash or %%, which ssh would misread: move the file to a plain path", key, quoteShown(p))
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("ssh channel: channels.ssh.%s: %w; create the file or fix the path in the local config", key, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("ssh channel: channels.ssh.%s %s is not a regular file", key, quoteShown(p))
	}
	return nil
}

func (c *sshChannel) Name() string { return KindSSH }

func (c *sshChannel) Has(action string) bool { _, ok := c.actions[action]; return ok }

// minRemoteFence is the least time left on the fence for which an ssh run
// is started: less is used up by connecting, and would leave nothing for
// the repair.
const minRemoteFence = time.Second

func (c *sshChannel) Run(ctx context.Context, req Request) (Result, error) {
	t, ok := c.actions[req.Action]
	if !ok {
		return Result{ExitCode: -1}, unknownAction(KindSSH, req.Action, "declare it under channels.ssh.actions in the local config (defined: "+actionList(c.actions)+")")
	}
	if err := validateRequest(KindSSH, req); err != nil {
		return Result{ExitCode: -1}, err
	}
	if strings.Contains(req.Host, "@") {
		// ssh would read "root@web-1" as user root on web-1, letting a
		// registry entry override channels.ssh.user.
		return Result{ExitCode: -1}, fmt.Errorf("%w: ssh %s for %s on %s: ssh would read the part of the host before '@' as the login user; declare the host without '@' and set channels.ssh.user", ErrRefused, req.Action, req.Unit, req.Host)
	}
	remaining := req.Deadline.Sub(c.opts.Clock.Now())
	if remaining < minRemoteFence {
		return Result{ExitCode: -1}, fmt.Errorf("%w: ssh %s for %s on %s was not started: less than %v of the fence remains; nothing ran; take a fresh lease before repairing", ErrFenced, req.Action, req.Unit, req.Host, minRemoteFence)
	}
	remote := t.expand(req)
	argv := c.argv(req, remote, remaining, req.Lease.Token)
	shown := c.argv(req, remote, remaining, "REDACTED")
	res, err := runFenced(ctx, c.opts, KindSSH, req, argv, shown)
	if errors.Is(err, ErrFailed) && res.ExitCode == 255 {
		err = fmt.Errorf("%w: ssh %s for %s on %s: ssh exited with status 255: it could not connect or authenticate, the host key is unknown or changed, the connection broke, or the remote command was killed by a signal (output: %s); check that the host is reachable, that its key is in %s and that the identity is authorized for the user", ErrConnect, req.Action, req.Unit, req.Host, errorTail(res.Output), c.knownHosts)
	}
	return res, err
}

// argv is the local ssh command line. ssh joins everything after the host
// with spaces and hands it to the remote user's shell, so every remote word
// is quoted for a POSIX shell. The lease variables are set with env, since
// sshd's AcceptEnv cannot be relied on.
//
// The remote process group is fenced too: killing the local client does not
// stop a remote command (without a terminal nothing signals it), so GNU
// timeout SIGKILLs the remote group once the time that was left on the fence
// when the client started has passed on the remote side. The local kill
// comes first, so the caller sees ErrFenced; the remote one lands later by
// the connection setup time, which fence_allowance_seconds absorbs.
func (c *sshChannel) argv(req Request, remote []string, remaining time.Duration, token string) []string {
	shown := req
	shown.Lease.Token = token
	secs := strconv.FormatFloat(remaining.Seconds(), 'f', 3, 64)
	words := []string{"timeout", "-s", "KILL", secs, "env"}
	words = append(words, leaseEnv(shown)...)
	words = append(words, remote...)
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	argv := append([]string{c.binary}, c.options...)
	argv = append(argv, "--", req.Host, strings.Join(quoted, " "))
	return slices.Clip(argv)
}

package channel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stado/stado/internal/localconfig"
)

// localVerbs maps the local channel's actions to systemctl arguments. Only
// actions that bring a unit up, or ask whether it is: a repair never stops,
// disables or masks anything.
var localVerbs = map[string][]string{
	"start":             {"start"},
	"restart":           {"restart"},
	"try-restart":       {"try-restart"},
	"reload-or-restart": {"reload-or-restart"},
	ActionCheck:         {"is-active", "--quiet"},
}

// localChannel runs systemctl on the reconciler's own machine.
type localChannel struct {
	opts      Options
	systemctl string
	hostname  string
}

// NewLocal builds the local channel from channels.local. hostname is the
// name this machine has in the registry: the local channel refuses a
// service declared on any other host, since every reconciler in a fleet
// reads the same registry and must not restart its own unit in another
// host's name.
func NewLocal(cfg localconfig.LocalChannel, opts Options) (Channel, error) {
	bin := cfg.Systemctl
	if bin == "" {
		bin = "systemctl"
	}
	if strings.Contains(bin, "/") && !filepath.IsAbs(bin) {
		return nil, fmt.Errorf("local channel: channels.local.systemctl %s is a relative path: use an absolute path or a bare name found on PATH", quoteShown(bin))
	}
	o := opts.withDefaults()
	host := o.Hostname
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("local channel: read this machine's host name: %w; set it explicitly", err)
		}
		host = h
	}
	return &localChannel{opts: o, systemctl: bin, hostname: host}, nil
}

func (c *localChannel) Name() string { return KindLocal }

func (c *localChannel) Has(action string) bool { _, ok := localVerbs[action]; return ok }

func (c *localChannel) Run(ctx context.Context, req Request) (Result, error) {
	verb, ok := localVerbs[req.Action]
	if !ok {
		return Result{ExitCode: -1}, unknownAction(KindLocal, req.Action, "it runs systemctl start, restart, try-restart, reload-or-restart, or check (is-active)")
	}
	if err := validateRequest(KindLocal, req); err != nil {
		return Result{ExitCode: -1}, err
	}
	if !c.isThisHost(req.Host) {
		return Result{ExitCode: -1}, fmt.Errorf("%w: local %s for %s on %s: the local channel runs systemctl on this machine, %s, not on %s; declare the service with channel ssh or exec, or let the reconciler on %s repair it", ErrRefused, req.Action, req.Unit, req.Host, quoteShown(c.hostname), req.Host, req.Host)
	}
	argv := append([]string{c.systemctl}, verb...)
	argv = append(argv, req.Unit)
	return runFenced(ctx, c.opts, KindLocal, req, argv, append([]string(nil), argv...))
}

// isThisHost accepts the machine's name as the kernel reports it, or its
// first label, since registries commonly use short names for hosts that
// report their FQDN. Not the reverse: "web-1.other-dc" is not this "web-1".
func (c *localChannel) isThisHost(host string) bool {
	short, _, _ := strings.Cut(c.hostname, ".")
	return host == c.hostname || host == short
}

package channel

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/stado/stado/internal/localconfig"
)

// execChannel runs a configured program on the reconciler's machine; what
// the program does to reach the host is its own business.
type execChannel struct {
	opts    Options
	actions map[string]argvTemplate
}

// NewExec builds the exec channel from channels.exec. Every action's argv is
// validated now, so a bad template is a config error at startup, not a
// failed repair later.
func NewExec(cfg localconfig.ExecChannel, opts Options) (Channel, error) {
	actions, err := compileActions(KindExec, cfg.Actions)
	if err != nil {
		return nil, err
	}
	return &execChannel{opts: opts.withDefaults(), actions: actions}, nil
}

func (c *execChannel) Name() string { return KindExec }

func (c *execChannel) Has(action string) bool { _, ok := c.actions[action]; return ok }

func (c *execChannel) Run(ctx context.Context, req Request) (Result, error) {
	t, ok := c.actions[req.Action]
	if !ok {
		return Result{ExitCode: -1}, unknownAction(KindExec, req.Action, "declare it under channels.exec.actions in the local config (defined: "+actionList(c.actions)+")")
	}
	if err := validateRequest(KindExec, req); err != nil {
		return Result{ExitCode: -1}, err
	}
	argv := t.expand(req)
	return runFenced(ctx, c.opts, KindExec, req, argv, slices.Clone(argv))
}

func actionList(actions map[string]argvTemplate) string {
	if len(actions) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(actions)), ", ")
}

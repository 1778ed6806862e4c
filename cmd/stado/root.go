package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/internal/termsafe"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reconcile"
)

// streams are the command's standard streams, injected so that commands can
// be run and checked without a terminal.
type streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Exit codes (DESIGN §11).
const (
	exitOK          = 0
	exitFailure     = 1 // could not run: store unreachable, invalid input
	exitUsage       = 2
	exitRepairFails = 3 // optimize run completed with repair_failed outcomes
)

// exitError carries an exit code with the error printed for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// app holds what every command shares: the global flags, the environment and
// what is opened from them on first use.
type app struct {
	streams streams
	getenv  func(string) string
	clock   clock.Clock

	storeURL   string
	configPath string
	logFormat  string
	verbose    int

	cfg       *localconfig.Config
	cfgSrc    localconfig.Source
	store     objstore.Store
	logger    *slog.Logger
	telemetry reconcile.Telemetry
}

// run executes one stado command line and returns its exit code.
func run(ctx context.Context, args []string, s streams, getenv func(string) string) int {
	a := &app{streams: s, getenv: getenv, clock: clock.Real{}}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	code := exitFailure
	if errors.As(err, &ee) {
		code = ee.code
	} else if isUsageError(err) {
		code = exitUsage
	}
	if ee == nil || ee.err != nil {
		fmt.Fprintf(s.Err, "stado: %s\n", termsafe.Lines(strings.TrimSpace(err.Error())))
	}
	if code == exitUsage {
		fmt.Fprintln(s.Err, "Run 'stado --help' for usage.")
	}
	return code
}

// isUsageError recognises cobra's own argument errors, which it returns as
// plain errors.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires exactly", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "stado",
		Short: "Fleet operator's tool: an autonomy reconciler that repairs services proven down",
		Long: `stado joins the services you declare against fresh evidence (host beacons,
endpoint probes) and repairs what is proven down, bounded by a policy, an
emergency pause, a circuit breaker and a lease per service.

State lives in an object store: a directory on local disk by default, or any
S3-compatible store with conditional writes (--store s3://BUCKET/PREFIX).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setupLogging()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: exitUsage, err: err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.storeURL, "store", "", "store URL: a directory, file:///PATH or s3://BUCKET/PREFIX?region=R&endpoint=URL&path_style=true (default $STADO_STORE, the config's store, else $XDG_STATE_HOME/stado)")
	pf.StringVar(&a.configPath, "config", "", "local config file (default $STADO_CONFIG, ~/.config/stado/config.yaml, /etc/stado/config.yaml)")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	pf.CountVarP(&a.verbose, "verbose", "v", "log more (-v info, -vv debug)")

	root.AddCommand(newVersionCmd(a), newOptimizeCmd(a), newServiceCmd(a), newBeaconCmd(a))
	return root
}

func (a *app) setupLogging() error {
	level := slog.LevelWarn
	switch {
	case a.verbose >= 2:
		level = slog.LevelDebug
	case a.verbose == 1:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.logger = slog.New(slog.NewTextHandler(a.streams.Err, opts))
	case "json":
		a.logger = slog.New(slog.NewJSONHandler(a.streams.Err, opts))
	default:
		return usageErrorf("--log-format %q: use text or json", a.logFormat)
	}
	return nil
}

// config loads the local config once.
func (a *app) config() (*localconfig.Config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	c, src, err := localconfig.Load(a.configPath, a.getenv)
	if err != nil {
		return nil, err
	}
	a.cfg, a.cfgSrc = c, src
	return c, nil
}

// resolveStoreURL applies the precedence of DESIGN §4: --store, $STADO_STORE,
// the config's store, the default directory.
func (a *app) resolveStoreURL() (string, error) {
	if a.storeURL != "" {
		return a.storeURL, nil
	}
	if u := a.getenv("STADO_STORE"); u != "" {
		return u, nil
	}
	c, err := a.config()
	if err != nil {
		return "", err
	}
	if c.Store != "" {
		return c.Store, nil
	}
	return objstore.DefaultDir(a.getenv)
}

// openStore opens the store once.
func (a *app) openStore(ctx context.Context) (objstore.Store, error) {
	if a.store != nil {
		return a.store, nil
	}
	u, err := a.resolveStoreURL()
	if err != nil {
		return nil, err
	}
	s, err := objstore.Open(ctx, u, objstore.OpenOptions{Clock: a.clock})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", objstore.RedactURL(u), err)
	}
	a.store = s
	return s, nil
}

// actor is who an operator action is recorded as: --actor, else user@host.
func (a *app) actor(flag string) string {
	if flag != "" {
		return flag
	}
	user := a.getenv("USER")
	if user == "" {
		user = a.getenv("LOGNAME")
	}
	if user == "" {
		user = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return user + "@" + host
}

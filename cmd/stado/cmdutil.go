package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stado/stado/internal/termsafe"
	"github.com/stado/stado/internal/yamlstrict"
)

// groupCmd is a command that only holds subcommands.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	return subcommandGroup(&cobra.Command{Use: use, Short: short}, subs...)
}

// subcommandGroup makes cmd hold only subs: run bare, or with an unknown
// subcommand, it is a usage error rather than help and exit 0.
func subcommandGroup(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.Name()
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unknown command %q for %q: use one of %s", termsafe.Escape(args[0]), cmd.CommandPath(), strings.Join(names, ", "))
		}
		return usageErrorf("%q needs a subcommand: use one of %s", cmd.CommandPath(), strings.Join(names, ", "))
	}
	cmd.AddCommand(subs...)
	return cmd
}

// runE adapts a command body that needs the command's context. (run
// escapes every error's control characters before printing it.)
func runE(run func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args) }
}

// readInputFile reads the file a flag names ("-": standard input), at most
// one byte more than limit, so that a mistaken large file is refused without
// being read whole. It returns the contents and the name to print.
func readInputFile(a *app, file, flag, what string, limit int) ([]byte, string, error) {
	if file == "" {
		return nil, "", usageErrorf("%s is empty: name the %s file, or - for standard input", flag, what)
	}
	var r io.Reader = a.streams.In
	name := file
	if file == "-" {
		name = "<stdin>"
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", fmt.Errorf("read the %s file: %w; check the path given to %s", what, err, flag)
		}
		defer f.Close()
		r = f
	}
	raw, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, "", fmt.Errorf("read the %s file %s: %w", what, name, err)
	}
	if len(raw) > limit {
		return nil, "", fmt.Errorf("the %s file %s is more than %d bytes; check that it is the right file", what, name, limit)
	}
	return raw, name, nil
}

// printProblems writes a Parse error one problem per line, prefixed with
// name (NAME:LINE:COL: ..., the form editors jump to), and returns how many
// it wrote.
func printProblems(w io.Writer, name string, err error) int {
	var es yamlstrict.Errors
	if !errors.As(err, &es) {
		termf(w, "%s: %v\n", name, err)
		return 1
	}
	for _, e := range es {
		sep := ":"
		if e.Line == 0 {
			sep = ": "
		}
		termf(w, "%s%s%s\n", name, sep, e.Error())
	}
	return len(es)
}

// termf writes formatted text with every control character but newline and
// tab escaped (stored data must not be able to rewrite an operator's screen,
// DESIGN §11).
func termf(w io.Writer, format string, args ...any) {
	_, _ = io.WriteString(w, termsafe.Lines(fmt.Sprintf(format, args...)))
}

// writeJSON writes v as indented JSON, safe for a terminal (termsafe.JSON).
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err := w.Write(termsafe.JSON(b.Bytes()))
	return err
}

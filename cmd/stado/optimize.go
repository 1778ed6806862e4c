package main

import "github.com/spf13/cobra"

func newOptimizeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "optimize",
		Short: "Run and steer the autonomy reconciler",
		Long: `The optimize commands run the autonomy reconciler (run, serve), show what it
did (status, history), and steer it (policy, pause, resume, breaker).`,
	}
	cmd.AddCommand(optimizeControlCmds(a)...)
	cmd.AddCommand(optimizeTickCmds(a)...)
	return cmd
}

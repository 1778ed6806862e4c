package main

import "github.com/spf13/cobra"

// optimizeTickCmds are the commands that run ticks and show their reports:
// run, serve, status, history.
func optimizeTickCmds(a *app) []*cobra.Command { return nil }

package main

import "github.com/spf13/cobra"

// optimizeControlCmds are the commands that steer autonomy: policy, pause,
// resume, breaker.
func optimizeControlCmds(a *app) []*cobra.Command { return nil }

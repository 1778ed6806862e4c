package main

import "github.com/spf13/cobra"

// newServiceCmd is `stado service`: the registry of declared services.
func newServiceCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "service", Short: "Declare the services autonomy watches and repairs"}
}

// newBeaconCmd is `stado beacon`: hosts report their unit states.
func newBeaconCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "beacon", Short: "Publish a host's unit states for the reconciler"}
}

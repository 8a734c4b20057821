package main

import "github.com/spf13/cobra"

// clusterCommands are the commands for running Seam on several machines.
func clusterCommands() []*cobra.Command {
	return []*cobra.Command{newKeygenCmd(), newPlanCmd(), newUpCmd()}
}

package main

import "github.com/spf13/cobra"

// benchCommands are the subcommands of `seam bench` besides split: the
// container-import measurements documented in docs/benchmarks.md.
func benchCommands() []*cobra.Command {
	return []*cobra.Command{newBenchMakeGGUFCmd(), newBenchOpenRangeCmd()}
}

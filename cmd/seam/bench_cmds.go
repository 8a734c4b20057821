package main

import "github.com/spf13/cobra"

func newBenchCmd() *cobra.Command {
	bench := &cobra.Command{Use: "bench", Short: "Measure Seam's speed: imports, stage links, decode", Args: cobra.NoArgs}
	bench.AddCommand(newBenchSplitCmd(), newBenchMakeGGUFCmd(), newBenchOpenRangeCmd())
	return bench
}

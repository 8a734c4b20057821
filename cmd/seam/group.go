package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	bench := &cobra.Command{Use: "bench", Short: "Measure Seam's speed: imports, stage links, decode", RunE: groupRun}
	bench.AddCommand(newBenchSplitCmd(), newBenchAPICmd(), newBenchServeCmd())
	bench.AddCommand(benchCommands()...)
	bench.AddCommand(benchKernelCommands()...)
	return bench
}

// groupRun is the Run of a command group (bench, codec): help without
// arguments, and for a mistyped subcommand an error with suggestions, as
// cobra gives for the root's subcommands.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return fmt.Errorf("%s\n\nRun '%s --help' for usage", msg, cmd.CommandPath())
}

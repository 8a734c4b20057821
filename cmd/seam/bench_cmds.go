package main

import "github.com/spf13/cobra"

// benchCommands are the subcommands of `seam bench`.
func benchCommands() []*cobra.Command { return nil }

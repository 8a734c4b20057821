package main

import "github.com/spf13/cobra"

// codecCommands are the boundary-codec and evaluation commands.
func codecCommands() []*cobra.Command { return nil }

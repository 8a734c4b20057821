package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/seamlm/seam/kernels"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Seam's version, commit, Go version and the instruction set in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			version, commit := "unknown", "unknown (built without VCS stamping)"
			if bi, ok := debug.ReadBuildInfo(); ok {
				version = bi.Main.Version // "(devel)" for a build from a clone
				var rev, when, dirty string
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.time":
						when = s.Value
					case "vcs.modified":
						if s.Value == "true" {
							dirty = ", with uncommitted changes"
						}
					}
				}
				if rev != "" {
					commit = rev
					if when != "" {
						commit += " (" + when + dirty + ")"
					}
				}
			}
			fmt.Fprintf(out, "seam %s\ncommit: %s\ngo: %s %s/%s\nkernels: %s, %d threads\n",
				version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, kernels.InstructionSet(), kernels.Threads())
			return nil
		},
	}
}

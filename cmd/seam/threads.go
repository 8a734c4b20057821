package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/seamlm/seam/kernels"
)

// maxThreads is the most kernel threads a process may ask for (the kernels
// cap their worker count there too).
const maxThreads = 1024

// addThreadsFlag registers --threads on a command that runs a model.
func addThreadsFlag(fl *pflag.FlagSet, n *int) {
	fl.IntVar(n, "threads", 0, "threads for this process's matrix products and attention (0: every core; fewer leave cores to other stages or work on the same machine)")
}

// applyThreads checks --threads and sets the kernels' worker count from it;
// 0 leaves every core.
func applyThreads(n int) error {
	if n < 0 || n > maxThreads {
		return fmt.Errorf("--threads %d: want 0 (every core) to %d", n, maxThreads)
	}
	if n > 0 {
		kernels.SetThreads(n)
	}
	return nil
}

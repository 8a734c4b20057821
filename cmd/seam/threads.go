package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/seamlm/seam/kernels"
)

// addThreadsFlag registers --threads on a command that runs a model.
func addThreadsFlag(fl *pflag.FlagSet, n *int) {
	fl.IntVar(n, "threads", 0, "threads for this process's matrix products and attention (0: every core; fewer leave cores to other stages or work on the same machine)")
}

// checkThreads refuses a --threads outside 0 (every core) to
// kernels.MaxThreads.
func checkThreads(n int) error {
	if n < 0 || n > kernels.MaxThreads {
		return fmt.Errorf("--threads %d: want 0 (every core) to %d", n, kernels.MaxThreads)
	}
	return nil
}

// applyThreads checks --threads and sets the kernels' worker count from it;
// 0 leaves every core.
func applyThreads(n int) error {
	if err := checkThreads(n); err != nil {
		return err
	}
	if n > 0 {
		kernels.SetThreads(n)
	}
	return nil
}

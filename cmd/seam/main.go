// Command seam runs a llama-family language model on one machine or split
// across several (pipeline stages), and manages Seam's model containers.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/seamlm/seam/internal/signals"
)

func main() {
	// The handlers stay installed until the process exits: a signal that
	// arrives after the work is done must not kill it with a default action.
	ctx, _ := signals.Context(context.Background())
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "seam:", err)
		if in := signals.As(err); in != nil {
			os.Exit(in.ExitCode())
		}
		os.Exit(1)
	}
}

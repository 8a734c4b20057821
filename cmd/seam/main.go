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
	ctx, stop := signals.Context(context.Background())
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "seam:", err)
		if in := signals.As(err); in != nil {
			os.Exit(in.ExitCode())
		}
		os.Exit(1)
	}
}

// Command seam runs a llama-family language model on one machine or split
// across several (pipeline stages), and manages Seam's model containers.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "seam:", err)
		os.Exit(1)
	}
}

package main

import (
	"fmt"
	"time"

	"github.com/seamlm/seam/sample"
	"github.com/spf13/cobra"
)

type samplingFlags struct {
	steps       int
	temperature float64
	topP        float64
	seed        uint64
}

func (f *samplingFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVarP(&f.steps, "steps", "n", 256, "total positions to run, prompt included (clamped to the context length)")
	cmd.Flags().Float64Var(&f.temperature, "temperature", 1.0, "sampling temperature; 0 is greedy")
	cmd.Flags().Float64Var(&f.topP, "top-p", 0.9, "nucleus sampling mass in (0, 1]; 1 disables it")
	cmd.Flags().Uint64Var(&f.seed, "seed", 0, "random seed; 0 picks one from the clock")
}

func (f *samplingFlags) sampler() (*sample.Sampler, error) {
	if f.steps < 1 {
		return nil, fmt.Errorf("-n/--steps %d: want at least 1 (it counts the prompt's positions too)", f.steps)
	}
	seed := f.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return sample.New(f.temperature, f.topP, seed)
}

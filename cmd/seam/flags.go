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

func (f *samplingFlags) register(cmd *cobra.Command, defSteps int) {
	cmd.Flags().IntVarP(&f.steps, "steps", "n", defSteps, "total positions to run, prompt included: at most the model's context length (left out, it stops there if the context is shorter)")
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

// stepsFor checks -n against the model's context length: a value given
// beyond it is refused, naming both; the default stops at the context.
func (f *samplingFlags) stepsFor(cmd *cobra.Command, contextLen int) (int, error) {
	if cmd.Flags().Changed("steps") && f.steps > contextLen {
		return 0, fmt.Errorf("-n/--steps %d: the model's context length is %d positions, prompt included: give at most -n %d", f.steps, contextLen, contextLen)
	}
	return min(f.steps, contextLen), nil
}

// forModel is stepsFor and sampler together.
func (f *samplingFlags) forModel(cmd *cobra.Command, contextLen int) (*sample.Sampler, int, error) {
	steps, err := f.stepsFor(cmd, contextLen)
	if err != nil {
		return nil, 0, err
	}
	smp, err := f.sampler()
	return smp, steps, err
}

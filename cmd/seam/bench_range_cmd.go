package main

import (
	"time"

	"github.com/seamlm/seam/bench"
	"github.com/spf13/cobra"
)

func newBenchOpenRangeCmd() *cobra.Command {
	var (
		dir, layers string
		repeat      int
		limit       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "open-range --model DIR --layers A:B [--repeat N] [--limit 50ms]",
		Short: "Time opening one stage's layer range of a container and list the files it maps",
		Long: `Open-range times container.OpenRange(DIR, A, B) (reading and checking the index,
then mapping the range's segment files) and Close, --repeat times, and prints
the minimum, median and maximum of each. It then checks which files the range
mapped, twice: from the range's own list, and on Linux from /proc/self/maps.
Both must be exactly the segments of layers [A, B), plus embed.seg when A is 0
and head.seg when B is the layer count (and embed.seg too for a tied
classifier). It fails if another file was mapped, or if the median open time
exceeds --limit (0: no limit). Mapping reads no weights: pages are read on
first use, which this command does not measure.`,
		Example: `  seam bench open-range --model /tmp/synth.seam --layers 3:5 --repeat 50`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, b, err := parseRange(layers)
			if err != nil {
				return err
			}
			res, err := bench.OpenRange(dir, a, b, repeat)
			if err != nil {
				return err
			}
			return res.Report(cmd.OutOrStdout(), limit)
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "container directory (required)")
	cmd.Flags().StringVar(&layers, "layers", "", "layer range A:B, as a stage serves it (required)")
	cmd.Flags().IntVar(&repeat, "repeat", 20, "number of timed open/close cycles")
	cmd.Flags().DurationVar(&limit, "limit", 50*time.Millisecond, "fail when the median open time exceeds this (0: no limit)")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("layers")
	return cmd
}

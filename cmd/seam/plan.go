package main

import (
	"fmt"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

func newPlanCmd() *cobra.Command {
	var (
		maxKL               float64
		sessions, measureKL int
		prompt, generate    int
		tokenizerPath       string
		pp                  planPool
	)
	cmd := &cobra.Command{
		Use:   "plan CLUSTER.toml | plan --model M --pool ADDR,...",
		Short: "Print where a cluster would place the model's layers, and the predicted speed",
		Long: `Plan reads a cluster file and prints the chain the planner chooses: which
hosts hold layers, in which order, how many, and the wire encoding of each
boundary, with one line of reason per choice and the predicted decode and
prefill tok/s. It compares the plan with an even split and with exo's
memory-proportional split. Nothing is started.

The hosts' figures (memory, decode_ms, prefill_ms, head_ms per layer) and
the links ([[link]] a, b, mbps, rtt_ms) come from the file. The model file
gives the layer sizes. With --pool instead of a file, the figures are the
running pool members' own ('seam serve' without --layers): they describe
themselves and every link is measured, as 'seam run --pool' does, but no
layers are assigned.

--max-kl bounds each boundary's quality loss: an encoding other than f32 is
used only where its measured KL is within it (0, the default, keeps every
boundary exact, bit-identical to the whole model). --measure-kl N measures
the KL of f16, q8, q5 and q4 at every boundary, teacher-forced against the
whole model on N tokens it samples (this runs the whole model here); an
encoding without a measurement is never chosen. lowrank is a candidate at a
boundary whose codec is attached to the model's container with the
held-out KL 'seam fit-codec' records; the hosts are taken to hold the same
container.`,
		Example: `  seam plan cluster.toml
  seam plan --max-kl 0.01 --measure-kl 256 cluster.toml
  seam plan --model m.seam --pool 10.0.0.2:7070,10.0.0.3:7070 --key head.key --trust cluster.trust`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pp.pool != "" || len(args) == 0 {
				if len(args) > 0 || pp.pool == "" || pp.model == "" {
					return fmt.Errorf("give a cluster file, or --model and --pool (not both)")
				}
				req := cluster.Request{Sessions: sessions, MaxKL: maxKL, Prompt: prompt, Generate: generate}
				return pp.run(cmd, req, measureKL, tokenizerPath)
			}
			if pp.auth.set() || cmd.Flags().Changed("model") || cmd.Flags().Changed("timeout") {
				return fmt.Errorf("--model, --timeout, --key, --trust and --insecure apply to --pool; a cluster file names its own model")
			}
			f, err := cluster.ReadFile(args[0])
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("sessions") {
				f.Sessions = sessions
			}
			if fl.Changed("prompt") {
				f.Prompt = prompt
			}
			if fl.Changed("generate") {
				f.Generate = generate
			}
			if fl.Changed("max-kl") {
				f.MaxKL = maxKL
			}
			shape, err := modelShape(f.Model)
			if err != nil {
				return err
			}
			req, err := f.Request(shape)
			if err != nil {
				return fmt.Errorf("%w (planning against a running pool is 'seam run --pool')", err)
			}
			// The hosts are taken to serve copies of the head's container.
			codecs, err := containerCodecs(f.Model)
			if err != nil {
				return err
			}
			if req.Codecs, err = cluster.CodecInfos(codecs); err != nil {
				return err
			}
			req.HoldCodecs(codecs)
			if measureKL > 0 {
				if req.KL, err = measureModelKL(f.Model, tokenizerPath, measureKL); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "measured KL (nats per position, %d sampled tokens):\n%s\n", measureKL, req.KL)
			}
			c, err := cluster.Compare(req)
			if err != nil {
				return err
			}
			c.Write(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().Float64Var(&maxKL, "max-kl", 0, "per-boundary quality budget in nats of KL (default: the file's max_kl, else 0: exact)")
	cmd.Flags().IntVar(&sessions, "sessions", 0, "KV caches each stage must hold (default: the file's, else 4)")
	cmd.Flags().IntVar(&prompt, "prompt", 0, "prompt tokens of the request the plan is scored on (default 128)")
	cmd.Flags().IntVar(&generate, "generate", 0, "generated tokens of the request the plan is scored on (default 128)")
	cmd.Flags().IntVar(&measureKL, "measure-kl", 0, "measure each encoding's KL at every boundary on this many sampled tokens (runs the whole model)")
	cmd.Flags().StringVar(&tokenizerPath, "tokenizer", "", "llama2.c tokenizer file, for --measure-kl on a llama2.c checkpoint")
	pp.register(cmd)
	return cmd
}

// modelShape measures the layer sizes of a model file, mapping only its
// first layer (and embedding) where the format allows.
func modelShape(path string) (cluster.Shape, error) {
	m, err := loader.Open(path, loader.Options{First: 0, Last: 1, NoTokenizer: true, Mapped: true})
	if err != nil {
		return cluster.Shape{}, err
	}
	defer m.Close()
	return cluster.ShapeOf(m.Weights)
}

// measureModelKL loads the whole model and measures each encoding's KL at
// every boundary.
func measureModelKL(path, tokPath string, tokens int) (cluster.KLTable, error) {
	m, mod, err := openFull(path, tokPath)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return cluster.MeasureKL(mod, cluster.KLOptions{Tokens: tokens, BOS: m.Tokenizer.BOS(), EOS: m.Tokenizer.EOS()})
}

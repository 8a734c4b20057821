package main

import (
	"fmt"

	"time"

	"github.com/seamlm/seam/pull"
	"github.com/spf13/cobra"
)

func newPullCmd() *cobra.Command {
	var o pull.Options
	cmd := &cobra.Command{
		Use:   "pull (URL | OWNER/REPO/FILE) [--dir DIR]",
		Short: "Download a model file (a GGUF) from Hugging Face or a URL, resumably, checking its SHA-256",
		Long: `Pull downloads one file into --dir: OWNER/REPO/FILE names a file of a
Hugging Face repository (fetched from ENDPOINT/OWNER/REPO/resolve/REVISION/FILE),
and an http(s) URL is fetched as given.

The file is written as FILE.partial and renamed once complete and checked.
An interrupted pull (Ctrl-C, a dropped connection) keeps FILE.partial; run
the same command again to resume it with an HTTP Range request. A dropped
connection is also resumed within the run, --retries times.

The bytes are checked against the SHA-256 the host publishes for the file
(Hugging Face's X-Linked-Etag, the LFS object id) and against --sha256 when
given. A mismatch removes the download and names both hashes. When the host
publishes no checksum and --sha256 is not given, pull says so and prints
the SHA-256 it computed.

For gated or private repositories, accept the terms on the model's page and
set HF_TOKEN to an access token. HF_ENDPOINT (or --endpoint) selects a
mirror.`,
		Example: `  seam pull karpathy/tinyllamas/stories260K/stories260K.bin --dir models
  seam pull karpathy/tinyllamas/stories260K/tok512.bin --dir models
  seam run --model models/stories260K.bin --tokenizer models/tok512.bin --temperature 0 Once upon a time
  seam pull ggml-org/tiny-llamas/stories260K.gguf --dir models
  seam pull https://huggingface.co/OWNER/REPO/resolve/main/model-Q8_0.gguf --dir models`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Retries < 0 || o.Retries > 100 {
				return fmt.Errorf("--retries %d: want 0..100", o.Retries)
			}
			o.Progress = byteProgress(cmd, "downloading")
			start := time.Now()
			res, err := pull.Pull(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case res.Existing:
				fmt.Fprintf(out, "%s is already here and complete (%d bytes)", res.Path, res.Size)
			case res.Resumed > 0:
				fmt.Fprintf(out, "downloaded %s: %d bytes (resumed from byte %d) in %v", res.Path, res.Size, res.Resumed, time.Since(start).Round(time.Millisecond))
			default:
				fmt.Fprintf(out, "downloaded %s: %d bytes in %v", res.Path, res.Size, time.Since(start).Round(time.Millisecond))
			}
			switch {
			case res.Published != "":
				fmt.Fprintf(out, "; %s checked against the host's (%s)\n", res.Algorithm, res.Published)
			case o.SHA256 != "":
				fmt.Fprintf(out, "; sha256 matches --sha256\n")
			default:
				fmt.Fprintf(out, "\n")
				fmt.Fprintf(cmd.ErrOrStderr(), "seam pull: warning: the host published no checksum for this file, so it is NOT verified; its sha256 is %s (compare it with the model card, or pass --sha256)\n", res.SHA256)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "folder to download into (created if missing)")
	cmd.Flags().StringVar(&o.Endpoint, "endpoint", "", "host for OWNER/REPO/FILE (default $"+pull.EndpointEnv+", else "+pull.DefaultEndpoint+")")
	cmd.Flags().StringVar(&o.Revision, "revision", "main", "branch, tag or commit for OWNER/REPO/FILE")
	cmd.Flags().StringVar(&o.SHA256, "sha256", "", "the SHA-256 the file must have (checked besides the host's)")
	cmd.Flags().IntVar(&o.Retries, "retries", 5, "dropped connections to resume within this run before giving up")
	return cmd
}

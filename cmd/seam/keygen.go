package main

import (
	"fmt"

	"github.com/seamlm/seam/auth"
	"github.com/spf13/cobra"
)

func newKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make a node key for authenticated connections",
		Long: `Keygen writes a new Ed25519 private key to FILE (mode 0600, PKCS #8 PEM)
and prints its public fingerprint on stdout, alone on a line.

Every node of a cluster (each stage and the head) has its own key. Put the
fingerprints of all the nodes a node may talk to in its trust file, one per
line (a name may follow the fingerprint; '#' starts a comment), and start it
with --key FILE --trust TRUSTFILE. Keygen never overwrites an existing file.`,
		Example: `  seam keygen --out head.key >> cluster.trust
  seam keygen --out stage1.key >> cluster.trust`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := auth.GenerateKey(nil)
			if err != nil {
				return err
			}
			if err := auth.WriteKeyFile(out, key); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), auth.Public(key))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the private key to (required; never overwritten)")
	cmd.MarkFlagRequired("out")
	return cmd
}

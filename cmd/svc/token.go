package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

// Bounds of a runtime token's lifetime (CONTRACT §3).
const (
	minTokenTTL = time.Minute
	maxTokenTTL = 24 * time.Hour
)

func tokenCommand() *cobra.Command {
	var r remote
	var ttl time.Duration
	var scope, user string
	cmd := &cobra.Command{
		Use:          "token",
		Short:        "Mint a runtime token for an agent's chat routes (prints only the token)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < minTokenTTL || ttl > maxTokenTTL || ttl%time.Second != 0 {
				return fmt.Errorf("--ttl %s: want whole seconds from %s to %s", ttl, minTokenTTL, maxTokenTTL)
			}
			c, a, err := r.resolve(cmd.Context(), "")
			if err != nil {
				return err
			}
			t, err := c.MintRuntimeToken(cmd.Context(), a.AgentID, client.TokenRequest{TTLSeconds: int(ttl / time.Second), ScopeID: scope, UserID: user})
			if err != nil {
				return explain(err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), t.Token)
			return err
		},
	}
	r.bind(cmd, true)
	fs := cmd.Flags()
	fs.DurationVar(&ttl, "ttl", time.Hour, "lifetime of the token (1m to 24h)")
	fs.StringVar(&scope, "scope-id", "", "scope_id claim of the token")
	fs.StringVar(&user, "user-id", "", "user id (sub claim) of the token")
	return cmd
}

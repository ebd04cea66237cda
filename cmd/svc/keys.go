package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

// agentsKeysCommand manages an agent's ak_ API keys: the credential a backend sends to the
// agent's runtime, a trusted service with no user (CONTRACT §8).
func agentsKeysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke an agent's API keys (ak_, for a backend calling the agent)",
		Long: "An agent API key (ak_) authenticates every route of its own agent's runtime, any deployment,\n" +
			"as a trusted service with no user: it may read and continue any session of the agent (spec\n" +
			"4.6). It never calls the platform API (403) nor another agent (401). A revoked key is refused\n" +
			"by every runner within 5 seconds. Each command needs an admin token.",
	}
	cmd.AddCommand(keysCreateCommand(), keysListCommand(), keysRevokeCommand())
	return cmd
}

func keysCreateCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "create [AGENT] NAME",
		Short:        "Create an API key of an agent and print it (shown this once)",
		Example:      "  svc agents keys create support-desk website-backend",
		Args:         cobra.RangeArgs(1, 2),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, name := agentAndName(args)
			c, a, err := r.resolve(cmd.Context(), ref)
			if err != nil {
				return err
			}
			k, err := c.CreateAPIKey(cmd.Context(), a.AgentID, name)
			if err != nil {
				return explainKeys(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", k.Key)
			fmt.Fprintf(cmd.ErrOrStderr(), "API key %s (%s) of %s created; it is shown only this once. Send it as \"Authorization: Bearer <key>\" to %s\n",
				k.ID, k.Name, a.Slug, a.URL)
			return nil
		},
	}
	r.bind(cmd, true)
	return cmd
}

func keysListCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "list [AGENT]",
		Short:        "List an agent's API keys: id, name, created, last used (never a key's value)",
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, err := r.resolve(cmd.Context(), strings.Join(args, ""))
			if err != nil {
				return err
			}
			list, err := c.ListAPIKeys(cmd.Context(), a.AgentID)
			if err != nil {
				return explainKeys(err)
			}
			out := cmd.OutOrStdout()
			if len(list) == 0 {
				fmt.Fprintf(out, "%s has no API keys\n", a.Slug)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tCREATED\tLAST USED")
			now := time.Now()
			for _, k := range list {
				used := "never"
				if k.LastUsedAt != nil {
					used = age(*k.LastUsedAt, now) + " ago"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), used)
			}
			return tw.Flush()
		},
	}
	r.bind(cmd, true)
	return cmd
}

func keysRevokeCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "revoke [AGENT] KEY_ID",
		Short:        "Revoke an API key of an agent: every runner refuses it within 5 seconds",
		Args:         cobra.RangeArgs(1, 2),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, id := agentAndName(args)
			c, a, err := r.resolve(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if err := c.RevokeAPIKey(cmd.Context(), a.AgentID, id); err != nil {
				var e *client.Error
				if errors.As(err, &e) && e.Code == client.CodeNotFound {
					return fmt.Errorf("%s has no API key %s, or it is revoked already (`svc agents keys list %s` shows its keys)", a.Slug, id, a.Slug)
				}
				return explainKeys(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "API key %s of %s revoked; every runner refuses it within 5 seconds\n", id, a.Slug)
			return nil
		},
	}
	r.bind(cmd, true)
	return cmd
}

// explainKeys says what a refusal of the key routes means.
func explainKeys(err error) error {
	var e *client.Error
	if errors.As(err, &e) && e.Code == client.CodeForbidden {
		return fmt.Errorf("the token may not manage API keys (%s): they need an admin token, bound to this agent or unbound", e.Message)
	}
	return explain(err)
}

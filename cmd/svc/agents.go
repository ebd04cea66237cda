package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"svc/client"
)

// agentsCommand creates and lists agents: the first step of every setup.
func agentsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Create and list agents; manage their API keys"}
	cmd.AddCommand(agentsCreateCommand(), agentsListCommand(), agentsKeysCommand())
	return cmd
}

func agentsCreateCommand() *cobra.Command {
	var r remote
	var slug, gitURL, branch, secret, credentials string
	var autoDeploy, autoPromote bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an agent (admin token), optionally connecting a git repository",
		Args:  cobra.ExactArgs(1),
	}
	r.bind(cmd, false)
	fs := cmd.Flags()
	fs.StringVar(&slug, "slug", "", "DNS label of the agent's URLs (default: derived from NAME)")
	fs.StringVar(&gitURL, "git", "", "connect this git repository (http(s) or file URL)")
	fs.StringVar(&branch, "branch", "", "the repository's default branch (default main)")
	fs.StringVar(&secret, "webhook-secret", "", "secret the git host signs push webhooks with")
	fs.StringVar(&credentials, "credentials", "", "env:VAR naming user:token or a token for a private repository")
	fs.BoolVar(&autoDeploy, "auto-deploy", false, "build on every push")
	fs.BoolVar(&autoPromote, "auto-promote-production", false, "make completed production builds active")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if slug == "" {
			// The platform would derive a free slug (greeter-2): a second agent of the same name
			// is more often a mistake than a wish, so it takes an explicit --slug.
			agents, err := c.ListAgents(ctx)
			if err != nil {
				return explain(err)
			}
			for _, a := range agents {
				if strings.EqualFold(a.Name, args[0]) {
					return fmt.Errorf("an agent named %q exists already (%s, slug %s); pass --slug to create another one with its own URL", a.Name, a.AgentID, a.Slug)
				}
			}
		}
		a, err := c.CreateAgent(ctx, args[0], slug)
		if err != nil {
			return explain(err)
		}
		if gitURL != "" {
			if err := c.PutSource(ctx, a.AgentID, client.SourceRequest{Type: "git", URL: gitURL, DefaultBranch: branch, WebhookSecret: secret, Credentials: credentials}); err != nil {
				return explain(fmt.Errorf("agent %s created, but connecting %s failed: %w", a.Slug, gitURL, err))
			}
		}
		if autoDeploy || autoPromote {
			patch := client.SettingsPatch{}
			if autoDeploy {
				patch.AutoDeploy = &autoDeploy
			}
			if autoPromote {
				patch.AutoPromoteProduction = &autoPromote
			}
			if _, err := c.PutSettings(ctx, a.AgentID, patch); err != nil {
				return explain(fmt.Errorf("agent %s created, but its deploy settings failed: %w", a.Slug, err))
			}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "agent %s (%s) created; its URL is %s\n", a.Slug, a.AgentID, a.URL)
		return nil
	}
	return cmd
}

func agentsListCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{Use: "list", Short: "List agents", Args: cobra.NoArgs}
	r.bind(cmd, false)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := r.client()
		if err != nil {
			return err
		}
		agents, err := c.ListAgents(cmd.Context())
		if err != nil {
			return explain(err)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SLUG\tID\tNAME\tURL")
		for _, a := range agents {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Slug, a.AgentID, a.Name, a.URL)
		}
		return tw.Flush()
	}
	return cmd
}

package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"svc/client"
)

func promoteCommand() *cobra.Command {
	var r remote
	var from, to string
	var force bool
	cmd := &cobra.Command{
		Use:          "promote",
		Short:        "Copy the active deployment of one environment into another (default production) and activate it",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return errors.New("no source environment: pass --from ENV")
			}
			c, a, err := r.resolve(cmd.Context(), "")
			if err != nil {
				return err
			}
			d, err := c.Promote(cmd.Context(), client.PromoteRequest{AgentID: a.AgentID, FromEnvironment: from, ToEnvironment: to, Force: force})
			if err != nil {
				return explain(err)
			}
			printDeployment(cmd.OutOrStdout(), fmt.Sprintf("Promoted %s to %s: deployment %s is now active", from, d.Environment, d.DeployID), d)
			return nil
		},
	}
	r.bind(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&from, "from", "", "environment whose active deployment is promoted (required)")
	fs.StringVar(&to, "to", client.Production, "destination environment")
	fs.BoolVar(&force, "force", false, "promote even when the svc/evals status is pending or failing")
	return cmd
}

func rollbackCommand() *cobra.Command {
	var r remote
	var env string
	cmd := &cobra.Command{
		Use:          "rollback [DEPLOY_ID]",
		Short:        "Activate an earlier deployment (by default the one live before the current)",
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, err := r.resolve(cmd.Context(), "")
			if err != nil {
				return err
			}
			req := client.RollbackRequest{AgentID: a.AgentID, Environment: env}
			if len(args) == 1 {
				req.DeployID = args[0]
			}
			d, err := c.Rollback(cmd.Context(), req)
			if err != nil {
				return explain(err)
			}
			printDeployment(cmd.OutOrStdout(), fmt.Sprintf("Rolled back %s: deployment %s is now active", d.Environment, d.DeployID), d)
			return nil
		},
	}
	r.bind(cmd, true)
	cmd.Flags().StringVar(&env, "env", client.Production, "environment to roll back")
	return cmd
}

func activateCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "activate DEPLOY_ID",
		Short:        "Make a ready deployment the active one of its environment",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			d, err := c.Activate(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			printDeployment(cmd.OutOrStdout(), fmt.Sprintf("Deployment %s is now active in %s", d.DeployID, d.Environment), d)
			return nil
		},
	}
	r.bind(cmd, false)
	return cmd
}

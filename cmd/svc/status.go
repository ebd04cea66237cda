package main

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

func statusCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "status",
		Short:        "Show an agent's environments: the active deployment, its commit, status and age",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, a, err := r.resolve(cmd.Context(), "")
			if err != nil {
				return err
			}
			deps, err := c.ListDeployments(cmd.Context(), a.AgentID, "")
			if err != nil {
				return explain(err)
			}
			return printStatus(cmd.OutOrStdout(), a, deps, time.Now())
		},
	}
	r.bind(cmd, true)
	return cmd
}

// printStatus writes the status table: one row per environment (production first), with its
// active deployment and, when a newer one exists, the newest.
func printStatus(w io.Writer, a client.Agent, deps []client.Deployment, now time.Time) error {
	fmt.Fprintf(w, "Agent %s (%s)\n", a.Slug, a.AgentID)
	if a.URL != "" {
		fmt.Fprintf(w, "URL   %s\n", a.URL)
	}
	if len(deps) == 0 {
		_, err := fmt.Fprintln(w, "No deployments yet: deploy with `svc deploy`.")
		return err
	}
	type row struct{ active, newest *client.Deployment }
	rows := map[string]*row{}
	for i := range deps { // newest first
		d := &deps[i]
		r := rows[d.Environment]
		if r == nil {
			r = &row{newest: d}
			rows[d.Environment] = r
		}
		if d.IsActive && r.active == nil {
			r.active = d
		}
	}
	envs := make([]string, 0, len(rows))
	for env := range rows {
		envs = append(envs, env)
	}
	sort.Slice(envs, func(i, j int) bool {
		if (envs[i] == client.Production) != (envs[j] == client.Production) {
			return envs[i] == client.Production
		}
		return envs[i] < envs[j]
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nENVIRONMENT\tACTIVE\tCOMMIT\tSTATUS\tAGE\tNEWEST")
	for _, env := range envs {
		r := rows[env]
		active, ref, status, since := "-", "-", "-", "-"
		if d := r.active; d != nil {
			active, ref, status, since = d.DeployID, shortRef(*d), d.Status, age(d.CreatedAt, now)
		}
		newest := "-"
		if r.active == nil || r.newest.DeployID != r.active.DeployID {
			newest = fmt.Sprintf("%s (%s, %s)", r.newest.DeployID, r.newest.Status, age(r.newest.CreatedAt, now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", env, active, ref, status, since, newest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// What serves is not only what is active: say so when an active runtime does not run.
	for _, env := range envs {
		switch d := rows[env].active; {
		case d == nil:
		case d.Runtime == "unavailable":
			fmt.Fprintf(w, "%s: %s is active but its runtime is unavailable: %s\n", env, d.DeployID, d.RuntimeError)
		case d.Runtime == "stopped":
			fmt.Fprintf(w, "%s: %s is active but its runtime is stopped (POST /api/deployments/%s/runtime/start)\n", env, d.DeployID, d.DeployID)
		}
	}
	return nil
}

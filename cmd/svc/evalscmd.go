package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

func evalsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "evals", Short: "Run a deployment's evals and show their results"}
	cmd.AddCommand(evalsRunCommand(), evalsShowCommand())
	return cmd
}

func evalsRunCommand() *cobra.Command {
	var r remote
	var wait time.Duration
	cmd := &cobra.Command{
		Use:          "run DEPLOY_ID",
		Short:        "Run a ready deployment's evals, wait for them and print the results (exit 1 unless they pass)",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			run, err := c.RunEvals(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "eval run %s queued\n", run.EvalRunID)
			deadline := time.Now().Add(wait)
			for !run.Finished() || run.EvalRunID == "" {
				if time.Now().After(deadline) {
					return fmt.Errorf("eval run %s is still %s after %s; see it later with svc evals show %s", run.EvalRunID, run.State, wait, args[0])
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(200 * time.Millisecond):
				}
				if run, err = c.LatestEvals(cmd.Context(), args[0]); err != nil {
					return explain(err)
				}
			}
			printEvals(cmd.OutOrStdout(), run)
			if run.State != "success" {
				return exitError{code: 1}
			}
			return nil
		},
	}
	r.bind(cmd, false)
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the run")
	return cmd
}

func evalsShowCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "show DEPLOY_ID",
		Short:        "Print the latest run of a deployment's evals",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			run, err := c.LatestEvals(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			printEvals(cmd.OutOrStdout(), run)
			return nil
		},
	}
	r.bind(cmd, false)
	return cmd
}

// printEvals prints a run as a table: each eval, then each assertion with how it was judged.
func printEvals(w io.Writer, run client.EvalRun) {
	fmt.Fprintf(w, "Eval run %s of deployment %s: %s\n", run.EvalRunID, run.DeployID, run.State)
	if run.Error != "" {
		fmt.Fprintf(w, "  %s\n", run.Error)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVAL\tSTATUS\tJUDGED BY\tASSERTION\tREASON")
	for _, e := range run.Result.Evals {
		for i, a := range e.Assertions {
			name, status := "", ""
			if i == 0 {
				name, status = e.Name, e.Status
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s: %s\t%s\n", name, status, a.By, a.Status, clip(a.Text, 60), clip(a.Reason, 80))
		}
	}
	_ = tw.Flush()
}

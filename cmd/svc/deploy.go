package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

func deployCommand() *cobra.Command {
	var r remote
	var branch, env, dir string
	var reuse, wait bool
	var timeout, poll time.Duration
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Build and deploy an agent (with --dir: upload a folder as its source first)",
		Long: "deploy starts a build of the agent (its git source, or with --dir the folder uploaded as a new\n" +
			"source version), streams the build log with a line per step, and reports the build's result.\n" +
			"With --wait it also waits until the deployment is ready and, when it will be, active.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeoutCause(cmd.Context(), timeout, fmt.Errorf("deploy: gave up after --timeout %s", timeout))
			defer cancel()
			d := deployer{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), poll: poll}
			c, a, err := r.resolve(ctx, "")
			if err != nil {
				return err
			}
			d.c, d.agent = c, a
			return d.run(ctx, client.RedeployRequest{AgentID: a.AgentID, Branch: branch, Environment: env, ReuseBuild: reuse}, dir, wait)
		},
	}
	r.bind(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&branch, "branch", "", "branch to build (default: the source's default branch)")
	fs.StringVar(&env, "env", client.Production, "environment to deploy to")
	fs.BoolVar(&reuse, "reuse-build", false, "reuse the environment's newest build of the same commit when there is one")
	fs.BoolVar(&wait, "wait", false, "wait until the deployment is ready (and active, when it will be)")
	fs.StringVar(&dir, "dir", "", "upload this folder as a new source version and deploy it")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	fs.DurationVar(&poll, "poll-interval", 500*time.Millisecond, "how often to check the deployment while waiting")
	_ = fs.MarkHidden("poll-interval") // the flag exists, so marking it cannot fail
	return cmd
}

// deployer runs one deploy command.
type deployer struct {
	c           *client.Client
	agent       client.Agent
	out, errOut io.Writer
	poll        time.Duration
}

func (d deployer) run(ctx context.Context, req client.RedeployRequest, dir string, wait bool) error {
	// 1. Upload the folder as a source version.
	if dir != "" {
		fmt.Fprintf(d.errOut, "Packing %s ...\n", dir)
		sv, err := d.c.UploadDirProgress(ctx, d.agent.AgentID, dir, uploadProgress(d.errOut, dir))
		if err != nil {
			if errors.Is(err, client.ErrSourceTooLarge) {
				return err
			}
			var e *client.Error
			if errors.As(err, &e) && len(e.Problems) > 0 {
				fmt.Fprintf(d.errOut, "The source in %s was refused:\n", dir)
				printProblems(d.errOut, err)
				return exitError{code: 1}
			}
			return explain(err)
		}
		fmt.Fprintf(d.out, "Uploaded %s as source version %s (%s)\n", dir, sv.SourceVersionID, sv.Digest)
		req.SourceVersionID = sv.SourceVersionID
	}

	// 2. Start the build.
	rd, err := d.c.Redeploy(ctx, req)
	if err != nil {
		return explain(err)
	}
	env := rd.Environment
	if env == "" {
		env = req.Environment
	}
	if rd.Reused {
		fmt.Fprintf(d.out, "Reusing deployment %s of %s in %s (build %s): no new build\n", rd.DeployID, d.agent.Slug, env, rd.BuildID)
	} else {
		fmt.Fprintf(d.out, "Deploying %s to %s: deployment %s, build %s\n", d.agent.Slug, env, rd.DeployID, rd.BuildID)
	}

	// 3. Stream the log, a progress line per step, until the build ends.
	progress := &stepWriter{w: d.out}
	if err := d.c.FollowLogs(ctx, rd.BuildID, progress); err != nil {
		return lostBuild(ctx, rd.BuildID, err)
	}
	if err := progress.Close(); err != nil {
		return err
	}
	b, err := d.c.BuildStatus(ctx, rd.BuildID)
	for err == nil && !b.Finished() {
		if err = sleep(ctx, d.poll); err == nil {
			b, err = d.c.BuildStatus(ctx, rd.BuildID)
		}
	}
	if err != nil {
		return lostBuild(ctx, rd.BuildID, err)
	}
	if b.Status != client.BuildSucceeded {
		fmt.Fprintf(d.errOut, "Build %s %s:\n", b.BuildID, b.Status)
		for _, line := range strings.Split(strings.TrimSpace(b.Error), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				fmt.Fprintln(d.errOut, "  "+line)
			}
		}
		return exitError{code: 1}
	}
	fmt.Fprintf(d.out, "Build %s succeeded%s\n", b.BuildID, stepSummary(b.Steps))

	// 4. The deployment: ready, and active when it will be.
	dep, err := d.c.Deployment(ctx, rd.DeployID)
	for err == nil && wait && !dep.Settled() {
		if err = sleep(ctx, d.poll); err == nil {
			dep, err = d.c.Deployment(ctx, rd.DeployID)
		}
	}
	if err != nil {
		return explain(err)
	}
	switch {
	case dep.Status == client.StatusFailed || dep.Status == client.StatusCancelled:
		fmt.Fprintf(d.errOut, "Deployment %s %s: %s\n", dep.DeployID, dep.Status, dep.Error)
		return exitError{code: 1}
	case dep.Serving():
		fmt.Fprintf(d.out, "Deployment %s is ready and active in %s\n", dep.DeployID, dep.Environment)
		if dep.Environment == client.Production && d.agent.URL != "" {
			fmt.Fprintf(d.out, "  %s\n", d.agent.URL)
		}
		if dep.URL != "" {
			fmt.Fprintf(d.out, "  %s (pinned)\n", dep.URL)
		}
	case dep.Status == client.StatusReady:
		fmt.Fprintf(d.out, "Deployment %s is ready but not active in %s", dep.DeployID, dep.Environment)
		if dep.Environment == client.Production {
			fmt.Fprint(d.out, " (autoPromoteProduction is off, or a newer deployment was requested; the build log says which)")
		} else {
			fmt.Fprint(d.out, " (a newer deployment was requested; the build log says which)")
		}
		fmt.Fprintf(d.out, ".\nActivate it with: svc activate %s\n", dep.DeployID)
	default:
		fmt.Fprintf(d.out, "Deployment %s is %s; check it with `svc status` (or deploy with --wait)\n", dep.DeployID, dep.Status)
	}
	printWarnings(d.errOut, b.Warnings)
	return nil
}

// printWarnings writes a build's warnings last, where they are seen: the deployment serves,
// and only what uses an unset reference fails until it is set.
func printWarnings(w io.Writer, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	fmt.Fprintf(w, "%d %s (the agent runs; only what uses an unset value fails until it is set):\n", len(warnings), plural(len(warnings), "warning", "warnings"))
	for _, line := range warnings {
		fmt.Fprintln(w, "  warning: "+line)
	}
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// lostBuild explains an error met while following a build that has started: when the server went
// away (not an answer of the platform), the build goes on without us, and the user is told how to
// follow it again.
func lostBuild(ctx context.Context, buildID string, err error) error {
	var e *client.Error
	if errors.As(err, &e) || ctx.Err() != nil {
		return explain(err)
	}
	return fmt.Errorf("lost the server while following build %s (%v): the build goes on without this command; follow it again with `svc logs %s -f`, or see `svc status`", buildID, err, buildID)
}

// uploadProgress prints how much of dir's archive was sent, at each quarter.
func uploadProgress(w io.Writer, dir string) func(sent, total int64) {
	next := int64(-1)
	return func(sent, total int64) {
		if sent == 0 {
			fmt.Fprintf(w, "Uploading %s (%s)", dir, byteSize(total))
			next = 25
			return
		}
		for next <= 100 && total > 0 && sent*100 >= next*total {
			fmt.Fprintf(w, " %d%%", next)
			if next == 100 {
				fmt.Fprintln(w)
			}
			next += 25
		}
	}
}

// byteSize writes n bytes for people: 512 B, 3.4 KiB, 12.0 MiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// sleep waits for d or ctx's end.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// stepSummary renders the steps as " (fetch 5 ms, validate 12 ms, ...)".
func stepSummary(steps []client.BuildStep) string {
	if len(steps) == 0 {
		return ""
	}
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprintf("%s %d ms", s.Name, s.DurationMS)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// stepWriter writes a build log line by line: a line "[step] message" (after an optional RFC 3339
// timestamp) prints a progress line "▸ step" when the step changes, then the message indented; any
// other line is printed indented as it is.
type stepWriter struct {
	w       io.Writer
	partial []byte
	step    string
}

// Write implements io.Writer.
func (s *stepWriter) Write(p []byte) (int, error) {
	s.partial = append(s.partial, p...)
	for {
		i := strings.IndexByte(string(s.partial), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimRight(string(s.partial[:i]), "\r")
		s.partial = s.partial[i+1:]
		if err := s.line(line); err != nil {
			return 0, err
		}
	}
}

// Close writes a last line that had no newline.
func (s *stepWriter) Close() error {
	if len(s.partial) == 0 {
		return nil
	}
	line := string(s.partial)
	s.partial = nil
	return s.line(line)
}

func (s *stepWriter) line(line string) error {
	rest := line
	if ts, after, ok := strings.Cut(rest, " "); ok {
		if _, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			rest = after
		}
	}
	if strings.HasPrefix(rest, "[") {
		if end := strings.IndexByte(rest, ']'); end > 1 && !strings.ContainsAny(rest[1:end], " \t") {
			step := rest[1:end]
			if step != s.step {
				s.step = step
				if _, err := fmt.Fprintf(s.w, "▸ %s\n", step); err != nil {
					return err
				}
			}
			rest = strings.TrimPrefix(rest[end+1:], " ")
		}
	}
	_, err := fmt.Fprintf(s.w, "    %s\n", rest)
	return err
}

// buildIDArg wants the one BUILD_ID of svc logs, and says where build ids are printed.
func buildIDArg(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		return nil
	}
	return fmt.Errorf("svc logs needs one BUILD_ID (got %d arguments): `svc deploy` prints the build id it starts (\"build b_...\"), "+
		"and `svc activate` and `svc rollback` print the build of the deployment they activate", len(args))
}

func logsCommand() *cobra.Command {
	var r remote
	var follow bool
	cmd := &cobra.Command{
		Use:          "logs BUILD_ID",
		Short:        "Print a build's log (with -f, follow it until the build ends)",
		Args:         buildIDArg,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			if follow {
				if err = c.FollowLogs(cmd.Context(), args[0], cmd.OutOrStdout()); errors.Is(err, client.ErrStreamCut) {
					return fmt.Errorf("%w; the build goes on: follow it again with `svc logs %s -f`", err, args[0])
				}
			} else {
				err = c.Logs(cmd.Context(), args[0], cmd.OutOrStdout())
			}
			return explain(err)
		},
	}
	r.bind(cmd, false)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming new lines until the build ends")
	return cmd
}

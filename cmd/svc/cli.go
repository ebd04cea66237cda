package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

// clientCommands returns the commands that are clients of the platform API: deploy, logs, status,
// promote, rollback, activate, token and chat. Each takes --url (SVC_URL) and --token (SVC_TOKEN);
// those that act on an agent take --agent (SVC_AGENT), an id or a slug.
func clientCommands() []*cobra.Command {
	return []*cobra.Command{
		deployCommand(), logsCommand(), statusCommand(), promoteCommand(),
		rollbackCommand(), activateCommand(), tokenCommand(), chatCommand(),
	}
}

// remote holds the settings every client command shares.
type remote struct {
	url, token, agent string
}

// envOr returns the environment variable's value, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// bind declares --url and --token (and --agent with withAgent) on cmd, with the environment's
// values as defaults.
func (r *remote) bind(cmd *cobra.Command, withAgent bool) {
	fs := cmd.Flags()
	fs.StringVar(&r.url, "url", envOr("SVC_URL", "http://127.0.0.1:8080"), "platform URL (env SVC_URL)")
	fs.StringVar(&r.token, "token", envOr("SVC_TOKEN", ""), "platform token, pk_... (env SVC_TOKEN)")
	if f := fs.Lookup("token"); f != nil && f.DefValue != "" {
		f.DefValue = "(set)"
	}
	if withAgent {
		fs.StringVar(&r.agent, "agent", envOr("SVC_AGENT", ""), "agent id or slug (env SVC_AGENT)")
	}
}

// client checks the settings and returns a platform client.
func (r *remote) client() (*client.Client, error) {
	if _, err := client.ParseBaseURL(r.url); err != nil {
		return nil, fmt.Errorf("setting SVC_URL (--url) = %q: want http(s)://host[:port]", r.url)
	}
	if strings.TrimSpace(r.token) == "" {
		return nil, errors.New("no platform token: set SVC_TOKEN or pass --token (a pk_ token)")
	}
	return client.New(r.url, strings.TrimSpace(r.token), nil), nil
}

// resolve returns the client and the agent named by --agent or, when given, the positional name.
func (r *remote) resolve(ctx context.Context, positional string) (*client.Client, client.Agent, error) {
	c, err := r.client()
	if err != nil {
		return nil, client.Agent{}, err
	}
	name := r.agent
	if positional != "" {
		name = positional
	}
	if name == "" {
		return nil, client.Agent{}, errors.New("no agent: pass --agent ID|SLUG or set SVC_AGENT")
	}
	a, err := c.ResolveAgent(ctx, name)
	if err != nil {
		return nil, client.Agent{}, explain(err)
	}
	return c, a, nil
}

// explain turns a platform refusal into a message that says what to do; other errors pass as is.
func explain(err error) error {
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	detail := e.Message
	if detail == "" {
		detail = e.Code
	}
	switch {
	case e.Code == client.CodeEvalGateBlocked:
		return fmt.Errorf("promotion blocked: the svc/evals status of the source commit is pending or failing (%s); fix the evals or pass --force", detail)
	case e.Code == client.CodeNothingToRollBack:
		return fmt.Errorf("nothing to roll back to: no earlier deployment of the environment completed and was live (%s); the active deployment is unchanged", detail)
	case e.Code == client.CodeBundleUnavailable:
		return fmt.Errorf("the deployment's bundle is missing or does not open (%s); nothing was changed", detail)
	case e.Code == client.CodeBuildNotReady:
		return fmt.Errorf("the deployment is not ready: its build has not succeeded (%s); follow it with `svc logs BUILD_ID -f`", detail)
	case e.Status == http.StatusUnauthorized:
		return fmt.Errorf("the platform refused the token (%s): check SVC_TOKEN or --token", detail)
	case e.Status == http.StatusForbidden:
		return fmt.Errorf("the token may not do this (%s): use an operator token bound to this agent, or an unbound one", detail)
	}
	return err
}

// printProblems writes an error's problems, one per line, to w.
func printProblems(w io.Writer, err error) {
	var e *client.Error
	if errors.As(err, &e) {
		for _, p := range e.Problems {
			fmt.Fprintln(w, "  "+p.String())
		}
	}
}

// shortRef names what a deployment was built from: the short commit, or the source version.
func shortRef(d client.Deployment) string {
	switch {
	case len(d.Commit) > 7:
		return d.Commit[:7]
	case d.Commit != "":
		return d.Commit
	case d.SourceVersionID != "":
		return "source " + d.SourceVersionID
	}
	return "-"
}

// age renders how long ago t was, in one unit.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// printDeployment writes the headline and the details of a deployment.
func printDeployment(w io.Writer, headline string, d client.Deployment) {
	fmt.Fprintln(w, headline)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  deployment\t%s\n", d.DeployID)
	fmt.Fprintf(tw, "  environment\t%s\n", d.Environment)
	fmt.Fprintf(tw, "  build\t%s\n", d.BuildID)
	ref := shortRef(d)
	if d.Branch != "" {
		ref += " (" + d.Branch + ")"
	}
	fmt.Fprintf(tw, "  from\t%s\n", ref)
	activity := "inactive"
	if d.IsActive {
		activity = "active"
	}
	fmt.Fprintf(tw, "  status\t%s, %s\n", d.Status, activity)
	if d.URL != "" {
		fmt.Fprintf(tw, "  url\t%s\n", d.URL)
	}
	_ = tw.Flush() // the writer's errors surface on the next write of the command, if any
}

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
			fmt.Fprint(d.out, " (autoPromoteProduction is off)")
		}
		fmt.Fprintf(d.out, ".\nActivate it with: svc activate %s\n", dep.DeployID)
	default:
		fmt.Fprintf(d.out, "Deployment %s is %s; check it with `svc status` (or deploy with --wait)\n", dep.DeployID, dep.Status)
	}
	return nil
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

func logsCommand() *cobra.Command {
	var r remote
	var follow bool
	cmd := &cobra.Command{
		Use:          "logs BUILD_ID",
		Short:        "Print a build's log (with -f, follow it until the build ends)",
		Args:         cobra.ExactArgs(1),
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

func chatCommand() *cobra.Command {
	var r remote
	var ch chatter
	var appsDomain, deployID, runtimeURL string
	var ctxPairs []string
	cmd := &cobra.Command{
		Use:   "chat [AGENT]",
		Short: "Chat with a deployed agent in the terminal (or send one --message)",
		Long: "chat mints a runtime token, then sends each line read from stdin to the agent's persistent URL\n" +
			"(or, with --deployment, its pinned URL) and streams the answer: text as it comes, tool calls as\n" +
			"'→ tool {params}' and '← result' lines, warnings on stderr. The session continues between\n" +
			"messages; /new starts another, /exit leaves. With --message it sends one message and exits,\n" +
			"non-zero when the agent answered with an error.",
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var positional string
			if len(args) == 1 {
				positional = args[0]
			}
			ctxMap, err := parseContext(ctxPairs)
			if err != nil {
				return err
			}
			ch.out, ch.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if runtimeURL != "" {
				// Straight to a runtime (svc dev): its AUTH_TOKEN, if any, is the bearer; no platform.
				if _, err := client.ParseBaseURL(runtimeURL); err != nil {
					return fmt.Errorf("--runtime %q: want http(s)://host[:port]", runtimeURL)
				}
				ch.c, ch.agent, ch.url, ch.ctx = client.New(runtimeURL, "", nil), client.Agent{Slug: runtimeURL}, runtimeURL, ctxMap
				ch.token, ch.direct = os.Getenv("AUTH_TOKEN"), true
				if cmd.Flags().Changed("message") {
					return ch.oneShot(ctx)
				}
				return ch.interactive(ctx, cmd.InOrStdin())
			}
			c, a, err := r.resolve(ctx, positional)
			if err != nil {
				return err
			}
			agentURL, err := agentURL(r.url, a.Slug, deployID, appsDomain)
			if err != nil {
				return err
			}
			ch.c, ch.agent, ch.url, ch.ctx = c, a, agentURL, ctxMap
			ch.out, ch.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := ch.mint(ctx); err != nil {
				return err
			}
			if cmd.Flags().Changed("message") {
				return ch.oneShot(ctx)
			}
			return ch.interactive(ctx, cmd.InOrStdin())
		},
	}
	r.bind(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&appsDomain, "apps-domain", envOr("SVC_APPS_DOMAIN", "apps.localhost"), "domain whose subdomains serve agents (env SVC_APPS_DOMAIN)")
	fs.StringVarP(&ch.message, "message", "m", "", "send this one message, print the answer and exit")
	fs.StringVar(&ch.session, "session", "", "continue this session")
	fs.StringVar(&ch.named, "named-agent", "", "named agent under agents/ to talk to")
	fs.StringVar(&deployID, "deployment", "", "talk to this deployment's pinned URL instead of the persistent one")
	fs.StringArrayVar(&ctxPairs, "context", nil, "KEY=VALUE for the request's context (repeatable)")
	fs.StringVar(&runtimeURL, "runtime", "", "talk straight to an agent runtime at this URL (svc dev: http://127.0.0.1:3847), with AUTH_TOKEN as its bearer; no platform")
	return cmd
}

// parseContext turns KEY=VALUE pairs into a map.
func parseContext(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--context %q: want KEY=VALUE", p)
		}
		out[k] = v
	}
	return out, nil
}

// agentURL returns the agent's URL: <slug>.<appsDomain> (or <deployId>--<slug>.<appsDomain>) with
// the scheme and port of the platform URL, which serves agents on the same listener (CONTRACT §2).
func agentURL(platformURL, slug, deployID, appsDomain string) (string, error) {
	u, err := url.Parse(platformURL)
	if err != nil {
		return "", fmt.Errorf("setting SVC_URL (--url) = %q: %w", platformURL, err)
	}
	appsDomain = strings.ToLower(strings.Trim(strings.TrimSpace(appsDomain), "."))
	if appsDomain == "" || strings.ContainsAny(appsDomain, "/: ") {
		return "", fmt.Errorf("setting SVC_APPS_DOMAIN (--apps-domain) = %q: want a domain name", appsDomain)
	}
	if slug == "" {
		return "", errors.New("the agent has no slug, so it has no URL")
	}
	host := slug + "." + appsDomain
	if deployID != "" {
		host = strings.ToLower(deployID) + "--" + host
	}
	if p := u.Port(); p != "" {
		host += ":" + p
	}
	return u.Scheme + "://" + host, nil
}

// chatter runs the chat command's turns.
type chatter struct {
	c                       *client.Client
	agent                   client.Agent
	url, token              string
	ctx                     map[string]string
	message, session, named string
	out, errOut             io.Writer
	direct                  bool // talking to a runtime without the platform: no token to mint
}

// mint gets a new runtime token.
func (ch *chatter) mint(ctx context.Context) error {
	t, err := ch.c.MintRuntimeToken(ctx, ch.agent.AgentID, client.TokenRequest{})
	if err != nil {
		return explain(err)
	}
	ch.token = t.Token
	return nil
}

func (ch *chatter) oneShot(ctx context.Context) error {
	failed, err := ch.turn(ctx, ch.message)
	if err != nil {
		return err
	}
	if failed {
		return exitError{code: 1}
	}
	return nil
}

// interactive sends each line of in as a message until /exit, the end of in, or ctx's end (Ctrl-C,
// which leaves quietly). Lines are read by a goroutine so that Ctrl-C works while it waits for
// input; it is waited for on every return except ctx's end, when it may be blocked reading a
// terminal that nothing can interrupt (the process exits right after).
func (ch *chatter) interactive(ctx context.Context, in io.Reader) error {
	prompt := isTerminal(in)
	if prompt {
		fmt.Fprintf(ch.errOut, "Chatting with %s at %s. /new starts a new session, /exit leaves.\n", ch.agent.Slug, ch.url)
	}
	// The reader reads a line only when asked: a /exit finds it waiting for the next request, not
	// blocked in a read of the terminal, so it ends at once.
	type read struct {
		line string
		err  error
		eof  bool
	}
	asks, lines := make(chan struct{}), make(chan read)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for range asks {
			if !sc.Scan() {
				lines <- read{err: sc.Err(), eof: true}
				return
			}
			lines <- read{line: sc.Text()}
		}
	})
	finish := func(err error) error {
		close(asks)
		wg.Wait()
		return err
	}
	for {
		if prompt {
			fmt.Fprint(ch.out, "> ")
		}
		asks <- struct{}{}
		var line string
		select {
		case <-ctx.Done():
			// The reader is blocked in a read it cannot be pulled out of; it ends with the process.
			fmt.Fprintln(ch.out)
			return nil
		case r := <-lines:
			if r.eof {
				if r.err != nil {
					return finish(fmt.Errorf("read stdin: %w", r.err))
				}
				return finish(nil)
			}
			line = strings.TrimSpace(r.line)
		}
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return finish(nil)
		case "/new":
			ch.session = ""
			fmt.Fprintln(ch.errOut, "(new session)")
			continue
		}
		if _, err := ch.turn(ctx, line); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(ch.out)
				return nil
			}
			fmt.Fprintln(ch.errOut, "error:", err)
		}
	}
}

// isTerminal reports whether r is a character device (an interactive terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// turn sends one message and renders the answer. failed reports an error frame or a done with
// reason error. An expired runtime token is minted again once.
func (ch *chatter) turn(ctx context.Context, message string) (failed bool, err error) {
	req := client.ChatRequest{Message: message, SessionID: ch.session, Context: ch.ctx, Agent: ch.named}
	for attempt := 0; ; attempt++ {
		rd := &chatRenderer{out: ch.out, errOut: ch.errOut, atLineStart: true}
		err = ch.c.ChatStream(ctx, ch.url, ch.token, req, rd.frame)
		if rd.session != "" {
			ch.session = rd.session
		}
		var e *client.Error
		if attempt == 0 && !ch.direct && errors.As(err, &e) && e.Status == http.StatusUnauthorized {
			if err := ch.mint(ctx); err != nil {
				return false, err
			}
			continue
		}
		rd.endLine()
		if err != nil {
			return false, err // a runtime's refusal: the platform token's advice of explain does not apply
		}
		return rd.failed, rd.werr
	}
}

// chatRenderer prints a turn's frames.
type chatRenderer struct {
	out, errOut io.Writer
	atLineStart bool
	session     string
	failed      bool
	werr        error // the first error writing to out
}

// maxResultShown bounds how much of a tool result is printed.
const maxResultShown = 300

func (r *chatRenderer) print(s string) {
	if r.werr != nil || s == "" {
		return
	}
	_, r.werr = io.WriteString(r.out, s)
	r.atLineStart = strings.HasSuffix(s, "\n")
}

func (r *chatRenderer) endLine() {
	if !r.atLineStart {
		r.print("\n")
	}
}

func (r *chatRenderer) frame(f client.Frame) error {
	switch f.Type {
	case client.FrameInit:
		r.session = f.SessionID
	case client.FrameTextDelta:
		r.print(f.Content)
	case client.FrameToolCallStart:
		r.endLine()
		r.print("→ " + f.ToolName + " " + compactJSON(f.Parameters, "{}") + "\n")
	case client.FrameToolCallResult:
		r.endLine()
		shown := compactJSON(f.Result, "")
		if shown == "" {
			shown = f.Content
		}
		if f.Status == "error" {
			shown = "error: " + f.Error
		}
		r.print("← " + clip(shown, maxResultShown) + "\n")
	case client.FrameWarning:
		r.endLine()
		fmt.Fprintln(r.errOut, "warning:", f.Message)
	case client.FrameError:
		r.endLine()
		r.failed = true
		fmt.Fprintln(r.errOut, "error:", f.Message)
	case client.FrameDone:
		r.endLine()
		switch f.Reason {
		case "", "model_stop":
		case "error":
			r.failed = true
			fmt.Fprintln(r.errOut, "(turn ended: error)")
		default:
			fmt.Fprintf(r.errOut, "(turn ended: %s)\n", f.Reason)
		}
	}
	return r.werr
}

// compactJSON renders raw on one line, or def when it is empty or not JSON.
func compactJSON(raw json.RawMessage, def string) string {
	if len(raw) == 0 {
		return def
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return def
	}
	return buf.String()
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

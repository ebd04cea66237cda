package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

// clientCommands returns the commands that are clients of the platform API: deploy, logs, status,
// promote, rollback, activate, token, chat, evals and secrets. Each takes --url (SVC_URL) and --token (SVC_TOKEN);
// those that act on an agent take --agent (SVC_AGENT), an id or a slug.
func clientCommands() []*cobra.Command {
	return []*cobra.Command{
		deployCommand(), logsCommand(), statusCommand(), promoteCommand(),
		rollbackCommand(), activateCommand(), tokenCommand(), chatCommand(), evalsCommand(), secretsCommand(), agentsCommand(),
		automationsCommand(),
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
	return client.New(r.url, strings.TrimSpace(r.token), &http.Client{Transport: refusedHint(r.url)}), nil
}

// refusedHint is the default transport, whose refused connections say what to check: that the
// platform runs, and that SVC_URL (--url) names it.
func refusedHint(platformURL string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, refusedError(platformURL)
		}
		return conn, err
	}
	return t
}

// refusedError says what to check when the platform at platformURL refuses connections.
func refusedError(platformURL string) error {
	return fmt.Errorf("no platform answers at %s (connection refused): is `svc up` running? "+
		"If the platform is elsewhere, set SVC_URL or pass --url", platformURL)
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
		// The platform's message says the same as the code: it is not repeated.
		return errors.New("nothing to roll back to: no earlier deployment of the environment was ready and active, so the active deployment is unchanged; " +
			"rollback needs one: once a newer deployment is active (svc deploy or svc promote), `svc rollback` returns to the one active now")
	case e.Code == client.CodeBundleUnavailable:
		// The platform's message says which: a bundle that is missing or does not open, or (on
		// promote) a source environment with no active deployment. Either way nothing was changed.
		return fmt.Errorf("refused: %s", detail)
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
	if d.PromotedFrom != "" {
		// A promotion builds nothing: its build id has no log; the bundle is the source deployment's.
		fmt.Fprintf(tw, "  copied from\tdeployment %s\n", d.PromotedFrom)
	} else {
		fmt.Fprintf(tw, "  build\t%s\n", d.BuildID)
	}
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

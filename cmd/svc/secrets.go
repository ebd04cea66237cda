package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"svc/client"
)

// secretsCommand manages an agent's secrets: the values its env: references resolve to before
// the environment of the process that resolves them.
func secretsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Set, list and remove an agent's secrets (what its env:NAME references resolve to)",
		Long: "An agent's secrets are what its env:NAME references (svc.json stores.url, models apiKey and\n" +
			"baseUrl, connection baseUrl and auth) resolve to, before the environment of the runner. A\n" +
			"value can be set and removed but never read back. A value set applies from the next use of\n" +
			"what needs it, without a rebuild; a value a runtime already opened with (a stores database, a\n" +
			"model's key) is replaced when the runtime starts again (POST /api/deployments/{id}/runtime/stop,\n" +
			"then /start) or the agent is deployed again. Each command needs an admin token.",
	}
	cmd.AddCommand(secretsSetCommand(), secretsListCommand(), secretsUnsetCommand())
	return cmd
}

// agentAndName splits the arguments [AGENT] NAME: the agent, when not given, is --agent.
func agentAndName(args []string) (agent, name string) {
	if len(args) == 2 {
		return args[0], args[1]
	}
	return "", args[0]
}

func secretsSetCommand() *cobra.Command {
	var r remote
	var value string
	cmd := &cobra.Command{
		Use:   "set [AGENT] NAME",
		Short: "Set a secret of an agent (the value from --value, else from standard input)",
		Long: "set sets the secret NAME of the agent (an id or a slug; --agent or SVC_AGENT when not given).\n" +
			"The value is --value or, without it, standard input: typed at a terminal (not echoed), or\n" +
			"piped (`svc secrets set my-agent DB_URL < db-url.txt`), one trailing newline removed. Prefer\n" +
			"standard input: a --value on the command line stays in the shell's history and is visible to\n" +
			"other users in the process list.",
		Example:      "  svc secrets set support-desk SUPPORT_DB_URL\n  printf %s \"$URL\" | svc secrets set support-desk SUPPORT_DB_URL",
		Args:         cobra.RangeArgs(1, 2),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, name := agentAndName(args)
			c, a, err := r.resolve(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("value") {
				if value, err = readSecret(cmd.InOrStdin(), cmd.ErrOrStderr(), name); err != nil {
					return err
				}
			}
			if err := c.SetSecret(cmd.Context(), a.AgentID, name, value); err != nil {
				return explainSecret(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s of %s set; what uses env:%s sees it from its next use\n", name, a.Slug, name)
			return nil
		},
	}
	r.bind(cmd, true)
	cmd.Flags().StringVar(&value, "value", "", "the value (default: read from standard input, which keeps it out of the shell's history)")
	return cmd
}

func secretsListCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "list [AGENT]",
		Short:        "List the names of an agent's secrets and when each was set (never the values)",
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, err := r.resolve(cmd.Context(), strings.Join(args, ""))
			if err != nil {
				return err
			}
			list, err := c.ListSecrets(cmd.Context(), a.AgentID)
			if err != nil {
				return explainSecret(err)
			}
			out := cmd.OutOrStdout()
			if len(list) == 0 {
				fmt.Fprintf(out, "%s has no secrets\n", a.Slug)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSET")
			now := time.Now()
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s ago (%s)\n", s.Name, age(s.UpdatedAt, now), s.UpdatedAt.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	r.bind(cmd, true)
	return cmd
}

func secretsUnsetCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:          "unset [AGENT] NAME",
		Short:        "Remove a secret of an agent (env:NAME then resolves from the runner's environment, if set there)",
		Args:         cobra.RangeArgs(1, 2),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, name := agentAndName(args)
			c, a, err := r.resolve(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), a.AgentID, name); err != nil {
				var e *client.Error
				if errors.As(err, &e) && e.Code == client.CodeNotFound {
					return fmt.Errorf("%s has no secret %s (`svc secrets list %s` shows its secrets)", a.Slug, name, a.Slug)
				}
				return explainSecret(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s of %s removed\n", name, a.Slug)
			return nil
		},
	}
	r.bind(cmd, true)
	return cmd
}

// readSecret reads a value from in: at a terminal, one line typed without echo after a prompt on
// prompt; otherwise everything in, less one trailing newline. An empty value is refused (it
// would count as unset).
func readSecret(in io.Reader, prompt io.Writer, name string) (string, error) {
	var (
		raw []byte
		err error
	)
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(prompt, "Value of %s (not echoed): ", name)
		raw, err = term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
	} else {
		raw, err = io.ReadAll(io.LimitReader(in, 1<<20)) // the platform refuses a value over 64 KiB
	}
	if err != nil {
		return "", fmt.Errorf("read the value of %s from standard input: %w", name, err)
	}
	value := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if value == "" {
		return "", fmt.Errorf("no value for %s on standard input: pipe it in, type it at the prompt, or pass --value", name)
	}
	return value, nil
}

// explainSecret is explain, with the token kind the secret routes need.
func explainSecret(err error) error {
	var e *client.Error
	if errors.As(err, &e) && e.Code == client.CodeForbidden {
		return fmt.Errorf("the token may not manage secrets (%s): secrets need an admin token, bound to this agent or unbound", e.Message)
	}
	return explain(err)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"svc/client"
)

// automationsCommand manages an agent's automations through its runtime's /api/automations
// (docs/runtime.md#automations), with a runtime token minted as svc chat mints it.
func automationsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "automations",
		Short: "Create, list, run, pause, resume and delete an agent's automations, and list their runs",
		Long: "An automation runs the agent while nobody chats: on a schedule (--cron, --every, --at), when a\n" +
			"signed event arrives (--event), or when a store record is written (a record given with --file).\n" +
			"Each command calls the agent's runtime with a runtime token it mints with the platform token, as\n" +
			"svc chat does, which makes it a trusted caller: it manages the agent-level automations, or those\n" +
			"of --scope S. --api-key sends an agent API key instead (no platform token), and --runtime calls a\n" +
			"runtime straight with AUTH_TOKEN. Automations run on the platform; svc dev does not serve them.\n" +
			"See docs/runtime.md#automations for the record and its rules.",
	}
	cmd.AddCommand(automationsListCommand(), automationsCreateCommand(), automationsRunCommand(),
		automationsEnableCommand(false), automationsEnableCommand(true), automationsRunsCommand(), automationsDeleteCommand())
	return cmd
}

// automationFlags are the flags every automations command takes: the agent's runtime and its
// credential (as svc chat), and the owner scope.
type automationFlags struct {
	agentFlags
	scope string
}

func (f *automationFlags) bind(cmd *cobra.Command) {
	f.agentFlags.bind(cmd)
	cmd.Flags().StringVar(&f.scope, "scope", "", "the owner scope (scope_id) whose automations to manage; default: the agent level")
}

// automationCall is one command's resolved runtime, credential and scope.
type automationCall struct {
	agentTarget
	scope, runtimeURL, deployID string
}

// open resolves the runtime of agentRef (else --agent) and its credential.
func (f *automationFlags) open(ctx context.Context, agentRef string) (*automationCall, error) {
	t, err := f.target(ctx, agentRef, "svc automations list")
	if err != nil {
		return nil, err
	}
	return &automationCall{agentTarget: t, scope: f.scope, runtimeURL: f.runtimeURL, deployID: f.deployID}, nil
}

// command spells `svc automations SUB [AGENT] ARGS...` with the flags that name this runtime and
// scope, for the advice the commands print.
func (a *automationCall) command(sub string, args ...string) string {
	parts := []string{"svc automations", sub}
	if a.runtimeURL == "" {
		parts = append(parts, a.agent.Slug)
	}
	parts = append(parts, args...)
	if a.runtimeURL != "" {
		parts = append(parts, "--runtime", a.runtimeURL)
	}
	if a.deployID != "" {
		parts = append(parts, "--deployment", a.deployID)
	}
	if a.scope != "" {
		parts = append(parts, "--scope", a.scope)
	}
	return strings.Join(parts, " ")
}

// explain turns a refusal of the runtime into what to do next; id is the automation the call
// named, "" for list and create.
func (a *automationCall) explain(ctx context.Context, err error, id string) error {
	if advice := a.refusedAdvice(err); advice != nil {
		return advice
	}
	if a.isNoActive(err) {
		return a.noActive(ctx, err, "svc automations list")
	}
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Status == http.StatusBadRequest && e.Field != "":
		return fmt.Errorf("field %s: %s (docs/runtime.md#automations lists the members and their rules)", e.Field, strings.TrimPrefix(e.Message, e.Field+": "))
	case e.Status == http.StatusBadRequest:
		return fmt.Errorf("the runtime refused the request: %s", e.Message)
	case e.Status == http.StatusNotFound && id != "" && strings.HasPrefix(e.Message, "no automation"):
		return fmt.Errorf("no automation %s in this scope; list them with `%s`", id, a.command("list"))
	case e.Status == http.StatusNotFound:
		return fmt.Errorf("%s serves no automations here (%s)", a.agent.Slug, e.Message)
	case e.Status == http.StatusForbidden && a.scope != "":
		return fmt.Errorf("--scope %s: %s", a.scope, e.Message)
	case e.Status == http.StatusUnauthorized && a.runtimeURL != "":
		return fmt.Errorf("the runtime refused the credential (%s): check AUTH_TOKEN or --api-key", e.Message)
	case e.Status == http.StatusUnauthorized && a.direct:
		return fmt.Errorf("the runtime refused the API key (%s): check --api-key (SVC_AGENT_API_KEY), and that it is a key of %s", e.Message, a.agent.Slug)
	case e.Status == http.StatusConflict:
		return fmt.Errorf("refused: %s", e.Message)
	}
	return err
}

func automationsListCommand() *cobra.Command {
	var f automationFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:          "list [AGENT]",
		Short:        "List the automations of an agent (of --scope S, else the agent level)",
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := f.open(ctx, strings.Join(args, ""))
			if err != nil {
				return err
			}
			list, err := a.c.ListAutomations(ctx, a.url, a.token, a.scope)
			if err != nil {
				return a.explain(ctx, err, "")
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if list == nil {
					list = []client.Automation{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(list) == 0 {
				fmt.Fprintf(out, "%s has no automations in this scope; create one with `%s`\n", a.agent.Slug,
					a.command("create", "--name NAME --cron '0 7 * * 1-5' --message TEXT"))
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tTRIGGER\tACTION\tENABLED\tNEXT FIRE")
			now := time.Now()
			for _, au := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", au.ID, au.Name, triggerText(au.Trigger), actionText(au.Action),
					enabledText(au), fireText(au.NextFireAt, now))
			}
			return tw.Flush()
		},
	}
	f.bind(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the automations as a JSON array")
	return cmd
}

// triggerText renders a trigger in a few words: the cron (and its timezone), every D, at T,
// event, or store NAME.
func triggerText(t client.AutomationTrigger) string {
	switch {
	case t.Cron != "" && t.Timezone != "":
		return t.Cron + " " + t.Timezone
	case t.Cron != "":
		return t.Cron
	case t.Every != "":
		return "every " + t.Every
	case t.At != "":
		return "at " + t.At
	case t.Event:
		return "event"
	case t.Store != "":
		return "store " + t.Store
	}
	return "-"
}

// actionText renders an action: message, or tool NAME.
func actionText(ac client.AutomationAction) string {
	if ac.Tool != "" {
		return "tool " + ac.Tool
	}
	return "message"
}

// enabledText renders whether an automation runs: yes, paused, or disabled: why.
func enabledText(a client.Automation) string {
	switch {
	case a.Enabled:
		return "yes"
	case a.DisabledReason != "":
		return "disabled: " + a.DisabledReason
	}
	return "paused"
}

// fireText renders a fire time relative to now: in 5m, 2h ago, or - for none.
func fireText(t *time.Time, now time.Time) string {
	switch {
	case t == nil || t.IsZero():
		return "-"
	case t.After(now):
		return "in " + age(now, *t)
	}
	return age(*t, now) + " ago"
}

// recordFlagNames are the create flags that spell a record, exclusive with --file.
func recordFlagNames() []string {
	return []string{"name", "cron", "timezone", "every", "at", "event", "message", "tool", "params", "environment", "overlap", "catchup"}
}

// recordFlags are create's flags for the common record.
type recordFlags struct {
	file                            string
	name, cron, timezone, every, at string
	event                           bool
	message, tool, params           string
	environment, overlap, catchup   string
}

// record returns the automation record: the --file (- for stdin) as it is, or the one the flags
// spell. Flags and --file are exclusive; the flags need --name, one trigger and one action.
func (r *recordFlags) record(fs *pflag.FlagSet, stdin io.Reader) (json.RawMessage, error) {
	var set []string
	for _, n := range recordFlagNames() {
		if fs.Changed(n) {
			set = append(set, "--"+n)
		}
	}
	if fs.Changed("file") {
		if len(set) > 0 {
			return nil, fmt.Errorf("--file and %s are exclusive: give the whole record in the file, or use flags only", strings.Join(set, ", "))
		}
		return readRecordFile(r.file, stdin)
	}
	if strings.TrimSpace(r.name) == "" {
		return nil, errors.New("--name is required (or give the whole record with --file F.json)")
	}
	trigger := map[string]any{}
	var triggers []string
	for _, t := range []struct {
		flag, key string
		value     any
		set       bool
	}{
		{"--cron", "cron", r.cron, fs.Changed("cron")},
		{"--every", "every", r.every, fs.Changed("every")},
		{"--at", "at", r.at, fs.Changed("at")},
		{"--event", "event", true, r.event},
	} {
		if t.set {
			triggers = append(triggers, t.flag)
			trigger[t.key] = t.value
		}
	}
	if len(triggers) != 1 {
		return nil, fmt.Errorf("give one trigger: --cron EXPR, --every DURATION, --at RFC3339 or --event (a store trigger needs --file), not %d", len(triggers))
	}
	if fs.Changed("timezone") {
		if !fs.Changed("cron") {
			return nil, errors.New("--timezone goes with --cron only")
		}
		trigger["timezone"] = r.timezone
	}
	action := map[string]any{}
	switch {
	case fs.Changed("message") == fs.Changed("tool"):
		return nil, errors.New("give one action: --message TEXT, or --tool NAME [--params JSON]")
	case fs.Changed("message"):
		action["message"] = r.message
	default:
		action["tool"] = r.tool
	}
	if fs.Changed("params") {
		if !fs.Changed("tool") {
			return nil, errors.New("--params goes with --tool only")
		}
		var params map[string]any
		if err := json.Unmarshal([]byte(r.params), &params); err != nil || params == nil {
			return nil, fmt.Errorf("--params %q: want a JSON object, such as '{\"limit\": 10}'", r.params)
		}
		action["params"] = params
	}
	rec := map[string]any{"name": r.name, "trigger": trigger, "action": action}
	for flag, value := range map[string]string{"environment": r.environment, "overlap": r.overlap, "catchup": r.catchup} {
		if fs.Changed(flag) {
			rec[flag] = value
		}
	}
	return json.Marshal(rec)
}

// readRecordFile reads a record from path, or from stdin for "-", and checks that it is a JSON
// object.
func readRecordFile(path string, stdin io.Reader) (json.RawMessage, error) {
	var (
		data []byte
		err  error
	)
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--file %s: %w", path, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("--file %s: want the automation record as a JSON object (docs/runtime.md#automations): %w", path, err)
	}
	return json.RawMessage(data), nil
}

func automationsCreateCommand() *cobra.Command {
	var f automationFlags
	var r recordFlags
	cmd := &cobra.Command{
		Use:   "create [AGENT]",
		Short: "Create an automation from flags (the common case) or from a record file (--file F.json, - for stdin)",
		Long: "create saves an automation in the agent-level scope (or --scope S) and prints its id. The flags\n" +
			"spell the common record: --name, one trigger (--cron EXPR [--timezone TZ], --every D, --at\n" +
			"RFC3339, --event) and one action (--message TEXT, or --tool NAME [--params JSON]); --file gives\n" +
			"the whole record instead (a store trigger, an action's agent or skill, a context), as\n" +
			"docs/runtime.md#automations describes it. An event trigger's secret is printed once.",
		Example: "  svc automations create support-desk --name 'morning brief' --cron '0 7 * * 1-5' --timezone Europe/Oslo --message 'Summarise yesterday'\n" +
			"  svc automations create support-desk --name orders --event --tool record_order\n" +
			"  svc automations create support-desk -f automation.json",
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			record, err := r.record(cmd.Flags(), cmd.InOrStdin())
			if err != nil {
				return err
			}
			a, err := f.open(ctx, strings.Join(args, ""))
			if err != nil {
				return err
			}
			au, err := a.c.CreateAutomation(ctx, a.url, a.token, a.scope, record)
			if err != nil {
				return a.explain(ctx, err, "")
			}
			out := cmd.OutOrStdout()
			when := triggerText(au.Trigger)
			if au.NextFireAt != nil {
				when += "; next fire " + fireText(au.NextFireAt, time.Now())
			}
			fmt.Fprintf(out, "automation %s created: %s (%s)\n", au.ID, au.Name, when)
			if au.Secret != "" {
				fmt.Fprintf(out, "secret: %s\n", au.Secret)
				fmt.Fprintf(cmd.ErrOrStderr(), "The secret is shown only this once: keep it now. Sign each event with it: POST the JSON body to "+
					"%s/api/automations/%s/events with X-Svc-Timestamp (unix seconds) and X-Svc-Signature: sha256=HEX, the HMAC-SHA256 "+
					"of \"<timestamp>.<body>\" (docs/runtime.md#automations shows it with openssl).\n", a.url, au.ID)
			}
			return nil
		},
	}
	f.bind(cmd)
	fs := cmd.Flags()
	fs.StringVarP(&r.file, "file", "f", "", "the automation record as JSON (- reads standard input); exclusive with the record flags")
	fs.StringVar(&r.name, "name", "", "the automation's name (the title of each run's session)")
	fs.StringVar(&r.cron, "cron", "", "trigger: a 5-field cron expression, such as '0 7 * * 1-5'")
	fs.StringVar(&r.timezone, "timezone", "", "the IANA timezone of --cron (default UTC)")
	fs.StringVar(&r.every, "every", "", "trigger: every DURATION (at least 1m), counted from the creation")
	fs.StringVar(&r.at, "at", "", "trigger: once, at this RFC 3339 time (in the future)")
	fs.BoolVar(&r.event, "event", false, "trigger: a signed event POSTed to the automation (its secret is printed once)")
	fs.StringVar(&r.message, "message", "", "action: send this message to the agent")
	fs.StringVar(&r.tool, "tool", "", "action: call this tool, without a model")
	fs.StringVar(&r.params, "params", "", "the JSON object of --tool's parameters")
	fs.StringVar(&r.environment, "environment", "", "the environment whose active deployment runs each fire (default production)")
	fs.StringVar(&r.overlap, "overlap", "", "a fire while the previous run still runs: skip, queue or allow (default skip)")
	fs.StringVar(&r.catchup, "catchup", "", "after downtime, run the latest fire within this duration, up to 24h (default 1h)")
	return cmd
}

// automationIDCommand is a command on one automation: [AGENT] ID, with run doing the call and
// printing its outcome.
func automationIDCommand(use, short string, run func(ctx context.Context, a *automationCall, id string, out io.Writer) error) *cobra.Command {
	f := &automationFlags{}
	cmd := &cobra.Command{
		Use:          use + " [AGENT] ID",
		Short:        short,
		Args:         cobra.RangeArgs(1, 2),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref, id := agentAndName(args)
			a, err := f.open(ctx, ref)
			if err != nil {
				return err
			}
			if err := run(ctx, a, id, cmd.OutOrStdout()); err != nil {
				return a.explain(ctx, err, id)
			}
			return nil
		},
	}
	f.bind(cmd)
	return cmd
}

func automationsRunCommand() *cobra.Command {
	cmd := automationIDCommand("run", "Fire an automation now, paused or not (the run goes through the platform queue)",
		func(ctx context.Context, a *automationCall, id string, out io.Writer) error {
			fire, err := a.c.RunAutomation(ctx, a.url, a.token, a.scope, id)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "fire queued at %s; follow it with `%s`\n", fire.FireTime.UTC().Format(time.RFC3339), a.command("runs", id))
			return nil
		})
	return cmd
}

// automationsEnableCommand is resume (enabled) or pause.
func automationsEnableCommand(enabled bool) *cobra.Command {
	use, short, done := "pause", "Pause an automation: it fires no more until resumed", "paused"
	if enabled {
		use, short, done = "resume", "Resume a paused or disabled automation: it fires from now on (fires missed meanwhile are not caught up)", "resumed"
	}
	cmd := automationIDCommand(use, short, func(ctx context.Context, a *automationCall, id string, out io.Writer) error {
		patch, _ := json.Marshal(map[string]bool{"enabled": enabled}) // plain data marshals
		au, err := a.c.UpdateAutomation(ctx, a.url, a.token, a.scope, id, patch)
		if err != nil {
			return err
		}
		if enabled {
			fmt.Fprintf(out, "automation %s %s; next fire %s\n", au.ID, done, fireText(au.NextFireAt, time.Now()))
		} else {
			fmt.Fprintf(out, "automation %s %s; resume it with `%s`\n", au.ID, done, a.command("resume", au.ID))
		}
		return nil
	})
	return cmd
}

func automationsRunsCommand() *cobra.Command {
	var limit int
	cmd := automationIDCommand("runs", "List an automation's runs, newest first: fire time, status, session, and how each ended",
		func(ctx context.Context, a *automationCall, id string, out io.Writer) error {
			runs, err := a.c.AutomationRuns(ctx, a.url, a.token, a.scope, id, limit)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				fmt.Fprintf(out, "automation %s has no runs yet; fire it now with `%s`\n", id, a.command("run", id))
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIRE TIME\tSTATUS\tSESSION\tDONE/ERROR")
			for _, r := range runs {
				session, ended := r.SessionID, r.DoneReason
				if session == "" {
					session = "-"
				}
				if r.Error != "" {
					ended = "error: " + clip(r.Error, 120)
				}
				if ended == "" {
					ended = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.FireTime.UTC().Format(time.RFC3339), r.Status, session, ended)
			}
			return tw.Flush()
		})
	cmd.Flags().IntVar(&limit, "limit", 20, "show at most this many runs (0: all)")
	return cmd
}

func automationsDeleteCommand() *cobra.Command {
	cmd := automationIDCommand("delete", "Delete an automation and its runs' records (the sessions of its runs stay)",
		func(ctx context.Context, a *automationCall, id string, out io.Writer) error {
			if err := a.c.DeleteAutomation(ctx, a.url, a.token, a.scope, id); err != nil {
				return err
			}
			fmt.Fprintf(out, "automation %s deleted; the sessions of its runs stay\n", id)
			return nil
		})
	return cmd
}

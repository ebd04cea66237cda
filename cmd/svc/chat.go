package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"svc/client"
)

func chatCommand() *cobra.Command {
	var af agentFlags
	var ch chatter
	var ctxPairs []string
	cmd := &cobra.Command{
		Use:   "chat [AGENT]",
		Short: "Chat with a deployed agent in the terminal (or send one --message)",
		Long: "chat mints a runtime token, then sends each line read from stdin to the agent's persistent URL\n" +
			"(or, with --deployment, its pinned URL) and streams the answer: text as it comes, tool calls as\n" +
			"'→ tool {params}' and '← result' lines, warnings on stderr. The session continues between\n" +
			"messages; /new starts another, /exit leaves. With --message it sends one message and exits,\n" +
			"non-zero when the agent answered with an error. With --api-key it sends one of the agent's ak_\n" +
			"keys instead of minting a token (no platform token needed): name the agent by its slug.",
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
			t, err := af.target(ctx, positional, "svc chat")
			if err != nil {
				return err
			}
			ch.agentTarget, ch.ctx = t, ctxMap
			if cmd.Flags().Changed("message") {
				return ch.oneShot(ctx, cmd.InOrStdin())
			}
			return ch.interactive(ctx, cmd.InOrStdin())
		},
	}
	af.bind(cmd)
	fs := cmd.Flags()
	fs.StringVarP(&ch.message, "message", "m", "", "send this one message, print the answer and exit")
	fs.StringVar(&ch.session, "session", "", "continue this session")
	fs.StringVar(&ch.named, "named-agent", "", "named agent under agents/ to talk to")
	fs.StringArrayVar(&ctxPairs, "context", nil, "KEY=VALUE for the request's context (repeatable)")
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
	agentTarget             // the runtime, its URL and credential
	ctx                     map[string]string
	message, session, named string
	out, errOut             io.Writer
	lines                   *lineReader // stdin, for the answers a turn asks for
	choice                  *choice     // the agent's last question, answered by the next line
}

func (ch *chatter) oneShot(ctx context.Context, in io.Reader) error {
	lr := newLineReader(in)
	defer lr.close(ctx)
	ch.lines = lr
	failed, err := ch.turn(ctx, ch.message)
	if err != nil {
		return err
	}
	if failed {
		return exitError{code: 1}
	}
	return nil
}

// lineReader reads lines of stdin on request, by a goroutine, so that Ctrl-C works while it
// waits for input, and so that a turn can ask for an answer (an approval) in its middle. It reads
// a line only when asked: at the end it is waiting for the next request, not blocked in a read of
// the terminal, and ends at once, except after ctx's end, when it may be blocked in a read that
// nothing can interrupt: it then ends when that read returns (or with the process).
type lineReader struct {
	asks  chan struct{}
	lines chan lineRead // holds one read, so that a reader left behind can finish its read
	wg    sync.WaitGroup
	eof   bool
}

type lineRead struct {
	line string
	err  error
	eof  bool
}

func newLineReader(in io.Reader) *lineReader {
	lr := &lineReader{asks: make(chan struct{}), lines: make(chan lineRead, 1)}
	lr.wg.Go(func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for range lr.asks {
			if !sc.Scan() {
				lr.lines <- lineRead{err: sc.Err(), eof: true}
				return
			}
			lr.lines <- lineRead{line: sc.Text()}
		}
	})
	return lr
}

// read returns the next line; ok is false at ctx's end.
func (lr *lineReader) read(ctx context.Context) (r lineRead, ok bool) {
	if lr.eof {
		return lineRead{eof: true}, true
	}
	lr.asks <- struct{}{}
	select {
	case <-ctx.Done():
		return lineRead{}, false
	case r := <-lr.lines:
		lr.eof = r.eof
		return r, true
	}
}

// close ends the reader; it waits for it unless ctx ended (see lineReader).
func (lr *lineReader) close(ctx context.Context) {
	if !lr.eof {
		close(lr.asks)
	}
	if ctx.Err() == nil {
		lr.wg.Wait()
	}
}

// interactive sends each line of in as a message until /exit, the end of in, or ctx's end (Ctrl-C,
// which leaves quietly). A question the agent asked (ask_choice) is answered by the option's
// number (or numbers, comma-separated, when several may be chosen), sent as the option's value.
func (ch *chatter) interactive(ctx context.Context, in io.Reader) error {
	prompt := isTerminal(in)
	if prompt {
		fmt.Fprintf(ch.errOut, "Chatting with %s at %s. /new starts a new session, /exit leaves.\n", ch.agent.Slug, ch.url)
	}
	lr := newLineReader(in)
	defer lr.close(ctx)
	ch.lines = lr
	for {
		if prompt {
			fmt.Fprint(ch.out, "> ")
		}
		r, ok := lr.read(ctx)
		if !ok {
			fmt.Fprintln(ch.out)
			return nil
		}
		if r.eof {
			if r.err != nil {
				return fmt.Errorf("read stdin: %w", r.err)
			}
			return nil
		}
		line := strings.TrimSpace(r.line)
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/new":
			ch.session, ch.choice = "", nil
			fmt.Fprintln(ch.errOut, "(new session)")
			continue
		}
		if ch.choice != nil {
			line = ch.choice.answer(line)
			ch.choice = nil
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

// choice is a question of the agent (ask_choice) waiting for the user's answer.
type choice struct {
	options []client.Option
	multi   bool
}

// answer turns a reply of option numbers ("2", or "1,3" when several may be chosen) into the
// options' values; any other reply is sent as it is.
func (c *choice) answer(line string) string {
	var values []string
	for _, part := range strings.Split(line, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > len(c.options) {
			return line
		}
		values = append(values, c.options[n-1].Value)
	}
	if len(values) > 1 && !c.multi {
		return line
	}
	return strings.Join(values, ", ")
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
	// "continue": a dropped connection does not end the turn, and reattach picks it up.
	req := client.ChatRequest{Message: message, SessionID: ch.session, Context: ch.ctx, Agent: ch.named, OnDisconnect: "continue"}
	for attempt := 0; ; attempt++ {
		rd := &chatRenderer{out: ch.out, errOut: ch.errOut, atLineStart: true, ch: ch, ctx: ctx}
		err = ch.c.ChatStream(ctx, ch.url, ch.token, req, rd.tracked)
		if err != nil && rd.session != "" && ctx.Err() == nil && droppedConnection(err) {
			err = ch.reattach(ctx, rd)
		}
		ch.choice = rd.choice
		if rd.session != "" {
			ch.session = rd.session
		}
		if attempt == 0 && !ch.direct && isUnauthorized(err) {
			if err := ch.mint(ctx); err != nil {
				return false, err
			}
			continue
		}
		rd.endLine()
		if ch.isNoActive(err) {
			return false, ch.noActive(ctx, err, "svc chat")
		}
		if advice := ch.refusedAdvice(err); advice != nil {
			return false, advice
		}
		if err != nil {
			return false, err // a runtime's refusal: the platform token's advice of explain does not apply
		}
		return rd.failed, rd.werr
	}
}

// reattachTries bounds the reattaches of one turn after dropped connections.
const reattachTries = 5

// reattach follows the turn of rd after its connection dropped: GET /chat/sessions/{id}/stream
// with the last frame id rd saw, up to reattachTries times, waiting a little longer each time.
func (ch *chatter) reattach(ctx context.Context, rd *chatRenderer) error {
	var err error
	for i := 1; i <= reattachTries; i++ {
		rd.endLine()
		fmt.Fprintf(ch.errOut, "(the connection dropped; reattaching, try %d of %d)\n", i, reattachTries)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i) * 200 * time.Millisecond):
		}
		err = ch.c.ResumeStream(ctx, ch.url, ch.token, rd.session, rd.lastID, rd.tracked)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, client.ErrNothingToResume):
			return fmt.Errorf("the connection dropped and the turn is gone (it ended over 5 minutes ago); its answer is in the session's history: svc chat --session %s", rd.session)
		case !droppedConnection(err):
			return err
		}
	}
	return fmt.Errorf("the connection dropped and %d reattaches failed (last: %w); the turn may still be running: svc chat --session %s continues the session", reattachTries, err, rd.session)
}

// droppedConnection reports whether err is a stream cut short, not a refusal: what reattach
// can mend.
func droppedConnection(err error) bool {
	var apiErr *client.Error
	if errors.As(err, &apiErr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, client.ErrStreamEnded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// chatRenderer prints a turn's frames, and asks the user the approvals the turn waits for.
type chatRenderer struct {
	out, errOut io.Writer
	atLineStart bool
	session     string
	failed      bool
	werr        error // the first error writing to out
	ch          *chatter
	ctx         context.Context
	choice      *choice // the turn's ask_choice, if any
	lastID      string  // the id of the last frame seen, for a reattach
}

// tracked is frame, noting the frame's id for a reattach.
func (r *chatRenderer) tracked(f client.Frame) error {
	if f.ID != "" {
		r.lastID = f.ID
	}
	return r.frame(f)
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
	case client.FrameInputRedacted:
		r.endLine()
		fmt.Fprintln(r.errOut, "(your message was redacted to:", f.Text+")")
	case client.FrameConfirmationRequired:
		r.endLine()
		return r.approve(f)
	case client.FrameApproved:
		r.print("(approved)\n")
	case client.FrameDenied:
		if f.TimedOut {
			r.print("(denied: no answer in time)\n")
		} else {
			r.print("(denied)\n")
		}
	case client.FrameAskChoice:
		r.endLine()
		r.print("? " + f.Question + "\n")
		for i, o := range f.Options {
			r.print(fmt.Sprintf("  %d) %s\n", i+1, o.Label))
		}
		if f.Multi {
			r.print("(answer with numbers, such as 1,3)\n")
		} else {
			r.print("(answer with a number)\n")
		}
		r.choice = &choice{options: f.Options, multi: f.Multi}
	case client.FrameAgentHandoff:
		r.endLine()
		msg := "(handed over to " + f.To
		if len(f.RemovedTools) > 0 {
			msg += "; tools no longer available: " + strings.Join(f.RemovedTools, ", ")
		}
		r.print(msg + ")\n")
	case client.FrameWidget:
		r.endLine()
		r.print("[" + f.WidgetType + "] " + clip(compactJSON(f.Data, "null"), maxResultShown) + "\n")
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

// approve asks the user whether the call of f may run, reading the answer from stdin, and sends
// it. Without an answer (stdin ended) the call is denied.
func (r *chatRenderer) approve(f client.Frame) error {
	what := f.Method + " " + f.Endpoint
	if f.ConnectionName != "" {
		what += " on " + f.ConnectionName
	}
	r.print("? " + f.ToolName + " wants to " + what)
	if f.Reason != "" {
		r.print(" (" + f.Reason + ")")
	}
	r.print("\n  " + compactJSON(f.Parameters, "{}") + "\n  approve? [y/N] ")
	approved := false
	if r.ch.lines != nil {
		line, ok := r.ch.lines.read(r.ctx)
		if !ok {
			return r.ctx.Err()
		}
		if line.eof {
			r.print("\n(no answer on stdin: denied)\n")
		}
		switch strings.ToLower(strings.TrimSpace(line.line)) {
		case "y", "yes":
			approved = true
		}
	}
	r.atLineStart = true
	if _, err := r.ch.c.AnswerApproval(r.ctx, r.ch.url, r.ch.token, r.session, f.CorrelationID, approved); err != nil {
		fmt.Fprintln(r.errOut, "error: answer the approval:", err)
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

package builder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"svc/agent"
	"svc/bundle"
	"svc/faults"
	"svc/registry"
)

// Build step names, in the order Build runs them.
const (
	StepValidate = "validate"
	StepCompile  = "compile"
	StepPack     = "pack"
	StepUpload   = "upload"
	StepVerify   = "verify"
)

// Step statuses.
const (
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
	StepSkipped   = "skipped" // not run because an earlier step failed
)

// BuildInput is what Build builds. Source is the tree (from FetchGit, bundle.ReadTarGz,
// bundle.FromFiles, or any fs.FS); Commit, Branch and SourceVersionID are recorded in the
// manifest as given.
type BuildInput struct {
	Source          fs.FS
	Commit          string
	Branch          string
	SourceVersionID string
	// AgentSlug names the agent in the bundle's object key: a DNS label (lower-case letters,
	// digits and hyphens, at most 63, not starting or ending with a hyphen).
	AgentSlug string
	// Limits bound the tree and the build's duration; zero fields take their defaults.
	Limits Limits
	// IsSet tells whether an env: name resolves to a value for the agent as a runtime resolves
	// it (its secrets, then the environment; Credentials.IsSet). The verify step asks it for
	// every reference of the agent (agent.EnvRefs) and warns about each one that is not set;
	// nil skips the check.
	IsSet func(ctx context.Context, name string) (bool, error)
}

// Step is one build step as it ran.
type Step struct {
	Name     string
	Status   string // StepSucceeded, StepFailed or StepSkipped
	Duration time.Duration
}

// Result describes a build. On failure Build still returns the steps (the failed one and the
// skipped ones after it) and SourceDigest when the tree could be read; the bundle fields are empty.
type Result struct {
	// BundleKey is the object key: bundle.Key(agentSlug, BundleDigest).
	BundleKey string
	// BundleDigest is "sha256:<hex>" of the bundle bytes.
	BundleDigest string
	// BundleSize is the bundle's length in bytes.
	BundleSize int64
	// SourceDigest is the Digest of the source tree.
	SourceDigest string
	Manifest     bundle.Manifest
	Steps        []Step
	// Uploaded is false when an identical bundle was already stored and the upload was skipped.
	Uploaded bool
	// Warnings are what the build found that does not fail it: the env: references of the
	// agent that are not set (see BuildInput.IsSet), one line each, also in the log.
	Warnings []string
}

var slugPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Build validates the source tree with agent.Load, collects the JavaScript compiled for each tool,
// packs a deterministic bundle (bundle.Pack: the same tree and metadata give the same bytes, hence
// the same key) and uploads it to obj under bundle.Key(agentSlug, digest), skipping the upload
// when that object already exists with the same size. log, when not nil, receives each log line with
// the step it belongs to; it is called from Build's goroutine only.
//
// The last step, verify, opens the stored bundle from obj exactly as a runner does (bundle.Read,
// then Bundle.Agent), so a build succeeds only with a bundle that loads, and then warns about
// each env: reference of the agent that in.IsSet says is not set (Result.Warnings).
//
// An invalid tree fails the validate step with a *BuildError listing every problem, each of which
// was also logged as one line. A failed build uploads nothing. ctx and in.Limits.Timeout are
// checked between steps (and bound the upload); on timeout the error wraps ErrTimeout.
func Build(ctx context.Context, in BuildInput, obj registry.Objects, log func(step, line string)) (Result, error) {
	if log == nil {
		log = func(string, string) {}
	}
	var res Result
	if in.Source == nil {
		return res, fmt.Errorf("%w: build input has no Source", ErrInvalidInput)
	}
	if !slugPattern.MatchString(in.AgentSlug) {
		return res, fmt.Errorf("%w: agent slug %q is not a DNS label", ErrInvalidInput, in.AgentSlug)
	}
	if obj == nil {
		return res, fmt.Errorf("%w: no object store", ErrInvalidInput)
	}
	limits := in.Limits.withDefaults()
	ctx, cancel := context.WithTimeoutCause(ctx, limits.Timeout, ErrTimeout)
	defer cancel()

	r := runner{res: &res, log: log}
	var (
		tree *bundle.Tree
		ag   *agent.Agent
		js   map[string]string
		data []byte
	)
	r.step(ctx, StepValidate, func() error {
		var err error
		tree, ag, err = validate(in.Source, limits, func(line string) { log(StepValidate, line) })
		if tree != nil {
			res.SourceDigest = tree.Digest()
		}
		return err
	})
	r.step(ctx, StepCompile, func() error {
		var err error
		js, err = collectJS(ag, func(line string) { log(StepCompile, line) })
		return err
	})
	r.step(ctx, StepPack, func() error {
		res.Manifest = bundle.NewManifest(ag, tree.Digest(), bundle.Origin{Commit: in.Commit, Branch: in.Branch, SourceVersionID: in.SourceVersionID})
		var err error
		data, err = bundle.Pack(tree, js, res.Manifest)
		if err != nil {
			return err
		}
		res.BundleDigest = bundle.DigestOf(data)
		res.BundleKey = bundle.Key(in.AgentSlug, res.BundleDigest)
		res.BundleSize = int64(len(data))
		log(StepPack, fmt.Sprintf("bundle %s: %s, %s, %s", res.BundleDigest, counted(len(data), "byte"), counted(tree.Len(), "source file"), counted(len(js), "tool")))
		return nil
	})
	r.step(ctx, StepUpload, func() error {
		faults.Point("build.upload")
		info, err := obj.Stat(ctx, res.BundleKey)
		switch {
		case err == nil && info.Size == res.BundleSize:
			log(StepUpload, "bundle already stored at "+res.BundleKey+"; upload skipped")
			return nil
		case err != nil && !errors.Is(err, registry.ErrNotFound):
			return fmt.Errorf("stat bundle %s: %w", res.BundleKey, err)
		}
		// build.upload.body: a fault point in the middle of the upload, the first half sent.
		body := faults.Reader("build.upload.body", bytes.NewReader(data), res.BundleSize)
		if err := obj.Put(ctx, res.BundleKey, body, res.BundleSize); err != nil {
			return fmt.Errorf("upload bundle %s: %w", res.BundleKey, err)
		}
		res.Uploaded = true
		log(StepUpload, "uploaded "+res.BundleKey)
		return nil
	})
	r.step(ctx, StepVerify, func() error {
		// Open the stored bundle as a runner does: from the object store, through the same reader.
		_, stored, err := OpenStored(ctx, obj, res.BundleKey)
		if err != nil {
			return fmt.Errorf("the stored bundle does not open as a runner opens it: %w", err)
		}
		log(StepVerify, "the stored bundle opens and loads as a runner loads it")
		// What the bundle cannot tell: whether the values it references are there. Unset ones
		// are warnings, not failures: the runtime starts without them, and only what uses one
		// fails until it is set (a secret set later applies without a rebuild).
		res.Warnings = unsetRefs(ctx, stored, in.AgentSlug, in.IsSet)
		for _, w := range res.Warnings {
			log(StepVerify, "warning: "+w)
		}
		return nil
	})
	if r.err != nil {
		res.BundleKey, res.BundleDigest, res.BundleSize = "", "", 0
		return res, r.err
	}
	return res, nil
}

// runner runs the steps of one Build in order, skipping the rest after a failure or once ctx is
// done. It lives for one call only.
type runner struct {
	res *Result
	log func(step, line string)
	err error
}

func (r *runner) step(ctx context.Context, name string, fn func() error) {
	if r.err == nil {
		if cause := context.Cause(ctx); cause != nil {
			r.err = fmt.Errorf("build cancelled before step %s: %w", name, cause)
			r.log(name, r.err.Error())
		}
	}
	if r.err != nil {
		r.res.Steps = append(r.res.Steps, Step{Name: name, Status: StepSkipped})
		return
	}
	start := time.Now()
	err := fn()
	// A step that finished is kept even if ctx ended meanwhile: the next step's check stops the
	// build, and an upload that completed is not reported as failed.
	s := Step{Name: name, Status: StepSucceeded, Duration: time.Since(start)}
	if err != nil {
		s.Status = StepFailed
		r.err = err
		var be *BuildError
		if !errors.As(err, &be) { // a BuildError's problems are already logged one per line
			r.log(name, "error: "+err.Error())
		}
	}
	r.res.Steps = append(r.res.Steps, s)
}

// validate reads the source within limits and loads it with agent.Load. Every problem is logged
// and returned in a *BuildError.
func validate(src fs.FS, limits Limits, log func(string)) (*bundle.Tree, *agent.Agent, error) {
	tree, err := bundle.Snapshot(src, limits.Tree)
	if err != nil {
		var se *bundle.SourceError
		if errors.As(err, &se) {
			be := &BuildError{Problems: agent.Problems{{File: se.Path, Message: se.Message}}}
			log(be.Problems[0].String())
			return nil, nil, be
		}
		return nil, nil, fmt.Errorf("read source: %w", err)
	}
	log(fmt.Sprintf("source %s: %d files, %d bytes", tree.Digest(), tree.Len(), tree.Size()))
	ag, err := agent.Load(tree)
	var problems agent.Problems
	if errors.As(err, &problems) {
		for _, p := range problems {
			log(strings.ReplaceAll(p.String(), "\n", " ")) // one line per problem
		}
		return tree, nil, &BuildError{Problems: problems}
	}
	if err != nil {
		return tree, nil, fmt.Errorf("load agent: %w", err)
	}
	log(fmt.Sprintf("agent %s %s: %s, %s, %s", ag.Config.Name, ag.Config.Version, counted(len(ag.Tools), "tool"), counted(len(ag.Agents), "agent"), counted(len(ag.Skills), "skill")))
	return tree, ag, nil
}

// collectJS returns the compiled JavaScript of every tool, by tool name.
func collectJS(ag *agent.Agent, log func(string)) (map[string]string, error) {
	js := make(map[string]string, len(ag.Tools))
	for _, name := range slices.Sorted(maps.Keys(ag.Tools)) {
		t := ag.Tools[name]
		if t.JS == "" {
			return nil, fmt.Errorf("tool %s: %s compiled to nothing", name, t.SourcePath)
		}
		js[name] = t.JS
		log(fmt.Sprintf("%s → build/tools/%s.js (%d bytes)", t.SourcePath, name, len(t.JS)))
	}
	if len(js) == 0 {
		log("no tools to compile")
	}
	return js, nil
}

// counted writes "1 skill", "3 skills".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// unsetRefs returns a warning for each env: name of ag that isSet says is not set (nil isSet
// checks nothing): where the agent uses it, what fails until it is set, and how to set it. A
// name used in several places is one warning. A failed check is a warning too: it never fails
// the build.
func unsetRefs(ctx context.Context, ag *agent.Agent, slug string, isSet func(context.Context, string) (bool, error)) []string {
	if isSet == nil {
		return nil
	}
	type use struct{ where, uses []string }
	var names []string
	byName := map[string]*use{}
	for _, r := range ag.EnvRefs() {
		u, ok := byName[r.Name]
		if !ok {
			u = &use{}
			byName[r.Name] = u
			names = append(names, r.Name)
		}
		where := r.File + " " + r.Field
		if r.Implicit {
			where = r.File + " " + strings.TrimSuffix(r.Field, ".apiKey") + ", which names no apiKey"
		}
		if !slices.Contains(u.where, where) {
			u.where = append(u.where, where)
		}
		if !slices.Contains(u.uses, r.Use) {
			u.uses = append(u.uses, r.Use)
		}
	}
	var out []string
	for _, name := range names {
		u := byName[name]
		set, err := isSet(ctx, name)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("env:%s (%s) could not be checked: %v", name, strings.Join(u.where, ", "), err))
		case !set:
			out = append(out, fmt.Sprintf("env:%s (%s) is not set: %s will fail until it is; set it with `svc secrets set %s %s` or in the runner's environment",
				name, strings.Join(u.where, ", "), strings.Join(u.uses, " and "), slug, name))
		}
	}
	return out
}

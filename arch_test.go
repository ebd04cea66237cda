// Package svc_test holds the repository-wide checks: the import boundaries of DESIGN.md.
package svc_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dependsOn is the "depends on" column of the README's layout table (DESIGN.md's, with a row for
// each package under runner/): the project folders that the code of each folder may import
// (besides its own sub-packages). Under runner/ each first-level package has its own row, named
// "runner/<name>", and its sub-packages share it unless they have a row of their own; an import of another runner package must be in
// the row. cmd depends on everything and is not checked. No golangci-lint is available on the
// machines, so this test is the depguard. Tests may wire real neighbours together and are not
// checked. TestLayoutTableMatchesRules keeps the README's table equal to this map, row for row.
var dependsOn = map[string][]string{
	"agent":       {},
	"bundle":      {"agent"},
	"api":         {"auth", "deploy", "registry", "webhook"},
	"deploy":      {"agent", "registry", "webhook", "workers"},
	"auth":        {},
	"webhook":     {},
	"builder":     {"agent", "bundle", "registry"},
	"registry":    {},
	"workers":     {"builder", "registry"},
	"migrations":  {},
	"errcode":     {},
	"client":      {},
	"githost":     {},
	"evals":       {"agent"},
	"automations": {"agent"},
	"faults":      {},
	"groupcommit": {},
	"traces":      {},
	"console":     {},
	"runner":      {"agent", "bundle", "runner/runtime"},
	// runner/: from the bottom of the import graph up.
	"runner/sse":            {},
	"runner/sandbox":        {},
	"runner/approvals":      {},
	"runner/attachments":    {},
	"runner/channels":       {},
	"runner/durable":        {},
	"runner/durable/engine": {"agent", "runner/durable", "runner/handlers", "runner/models", "runner/sse", "runner/tools"},
	"runner/access":         {},
	"runner/models":         {"runner/sse"},
	"runner/events":         {"runner/sse"},
	"runner/streams":        {},
	"runner/park":           {},
	"runner/tools":          {"agent", "runner/models", "runner/sse"},
	"runner/loop":           {"agent", "runner/models", "runner/sse", "runner/tools"},
	"runner/connections":    {"agent", "runner/models", "runner/tools"},
	"runner/stores":         {"agent", "runner/models", "runner/tools"},
	"runner/handlers":       {"agent", "runner/durable", "runner/models", "runner/sandbox", "runner/sse", "runner/tools"},
	"runner/sessions":       {"runner/loop", "runner/models"},
	"runner/turn":           {"agent", "runner/access", "runner/approvals", "runner/loop", "runner/models", "runner/sessions", "runner/sse", "runner/tools"},
	"runner/runtime": {"agent", "runner/access", "runner/approvals", "runner/attachments", "runner/channels", "runner/connections", "runner/durable",
		"runner/durable/engine", "runner/events", "runner/handlers", "runner/loop", "runner/models", "runner/sandbox", "runner/sessions",
		"runner/park", "runner/sse", "runner/stores", "runner/streams", "runner/tools", "runner/turn"},
}

// beyondDesign lists, with the reason, each import the code has that the column does not show.
// They are allowed and kept honest: an entry that no code needs any more fails the test, so this
// list only shrinks.
var beyondDesign = map[string]map[string]string{
	"api": {
		"agent":         "the snapshot route shows the loaded agent",
		"builder":       "source-version uploads are taken in by builder.Ingest",
		"bundle":        "the snapshot route shows the bundle's manifest; uploads are read with bundle.ReadTarGz and bundle.FromFiles",
		"errcode":       "the one error catalog, not in the table",
		"runner/access": "PUT /api/agents/{id}/access validates the document with access.ParseSettings, the decoder the runtime uses",
	},
	"builder": {
		"faults": "the fault points of the fault harness (SVC_FAULT, testing only)",
	},
	"deploy": {
		"builder": "a redeploy resolves the branch head (builder.BranchHead) and a push's branch filter reads the pushed svc.json (builder.FetchCommit), with the agent's git credentials (builder.Credentials); the lifecycle opens a bundle as a runner does (builder.OpenStored)",
		"bundle":  "Lifecycle.Open hands the opened bundle (its manifest) to the snapshot route",
		"faults":  "the fault points of the fault harness (SVC_FAULT, testing only)",
		"githost": "the eval policy (deploy.Evals) posts each svc/evals status to the agent's git host",
	},
	"evals": {
		"runner/models": "the judge is a runner/models.Provider",
		"runner/sse":    "a transcript is the runtime's runner/sse frames",
	},
	"registry": {
		"auth":       "record ids come from auth.NewID",
		"migrations": "some SQL differs by dialect (migrations.DialectOf)",
	},
	"workers": {
		"automations": "the scheduler reads the automation record and its schedule (automations.Decode, Due, Decide)",
		"faults":      "the fault points of the fault harness (SVC_FAULT, testing only)",
		"groupcommit": "dbqueue stores the done marks of finished jobs a group at a time",
		"migrations":  "dbqueue's claim differs by dialect",
	},
	"runner": {
		"errcode":       "the router writes the one error catalog",
		"registry":      "the router resolves a host to a registry.Deployment and reports runtimes on it",
		"runner/stores": "a bad stores entry of svc.json is the agent's error, not the platform's (stores.ErrConfig)",
	},
	"runner/tools": {
		"auth": "tool call ids are auth.NewID",
	},
	"runner/channels": {
		"automations": "the signed webhook channel checks and signs with the automations' event-trigger scheme (automations.VerifyEvent, Sign)",
	},
	"runner/durable": {
		"migrations": "the durable store's SQL differs by dialect (migrations.DialectOf)",
	},
	"runner/stores": {
		"migrations": "the stores of an agent's own database get their tables from the same versioned SQL, which differs by dialect",
	},
	"runner/sessions": {
		"auth":       "session ids are auth.NewID",
		"migrations": "dbstore's SQL differs by dialect",
		"registry":   "attachments are kept in the object store (objblobs); dbstore writes the sessions and runs tables as registry's rows (registry.SessionRow, registry.RunRow), which registry reads",
	},
	"runner/turn": {
		"auth":   "message and turn ids are auth.NewID",
		"faults": "the fault points of the fault harness (SVC_FAULT, testing only)",
	},
	"runner/durable/engine": {
		"auth": "run ids are auth.NewID",
	},
	"runner/runtime": {
		"auth":        "the runtime verifies runtime tokens",
		"automations": "the automation routes decode and validate the record against the agent and check event signatures (automations.Decode, Validate, VerifyEvent)",
		"errcode":     "the runtime answers MESSAGE_BLOCKED in the platform's envelope, as spec 7 fixes it",
		"groupcommit": "the channels' intake records concurrent deliveries in one commit",
		"registry":    "the runtime keeps feedback as registry.Feedback, automations in registry.Automations, and the channels' deliveries and outbox in registry.Channels",
	},
}

// noDatabase lists the folders whose code reaches the database only through the stores of
// others (registry's, runner/sessions'): they must not import gorm themselves. auth makes and
// verifies the credentials that registry stores; the runtime and a turn work on the stores they
// are handed.
var noDatabase = []string{"api", "deploy", "webhook", "auth", "runner/runtime", "runner/turn"}

// ruleOf is the dependsOn key of the file at path (slash-separated, from the repository root),
// or "" for a file at the root.
func ruleOf(path string) string {
	return folderOf(path[:max(strings.LastIndex(path, "/"), 0)])
}

// folderOf is the dependsOn key of a package directory (slash-separated, from the repository
// root): its top folder, or under runner the longest row that holds it (runner/<name>, or a
// deeper package with a row of its own, such as runner/durable/engine).
func folderOf(dir string) string {
	parts := strings.Split(dir, "/")
	if parts[0] != "runner" || len(parts) == 1 {
		return parts[0]
	}
	for n := len(parts); n > 2; n-- {
		if key := strings.Join(parts[:n], "/"); dependsOn[key] != nil {
			return key
		}
	}
	return "runner/" + parts[1]
}

// allowed reports whether code under rule may import the project folder dep (a dependsOn key):
// its own, a sub-package's or one in its row or in beyondDesign.
func allowed(rule, dep string) bool {
	_, extra := beyondDesign[rule][dep]
	return dep == rule || slices.Contains(dependsOn[rule], dep) || extra
}

// noHTTP lists the folders below the runtime's routes: a turn, the loop, the session stores and
// the tools, stores and approvals know nothing of HTTP requests (models and connections make their own calls).
var noHTTP = []string{"runner/turn", "runner/loop", "runner/sessions", "runner/tools", "runner/stores", "runner/approvals", "runner/handlers", "runner/sandbox", "runner/durable"}

// importProblems says what is wrong with one import p of the file at path (slash-separated, from
// the repository root), and records in used the project folder it reaches.
func importProblems(path, p string, used map[string]map[string]bool) []string {
	rule := ruleOf(path)
	var problems []string
	for _, dir := range noHTTP {
		if strings.HasPrefix(path, dir+"/") && (p == "net/http" || p == "svc/runner/runtime") {
			problems = append(problems, fmt.Sprintf("%s imports %s: %s knows nothing of HTTP requests", path, p, dir))
		}
	}
	if slices.Contains(noDatabase, rule) && strings.HasPrefix(p, "gorm.io/") {
		problems = append(problems, fmt.Sprintf("%s imports %s: %s reaches the database through the stores of others only", path, p, rule))
	}
	dir, ok := strings.CutPrefix(p, "svc/")
	if !ok {
		return problems
	}
	dep := folderOf(dir)
	if dep == rule {
		return problems
	}
	if used[rule] == nil {
		used[rule] = map[string]bool{}
	}
	used[rule][dep] = true
	if !allowed(rule, dep) {
		problems = append(problems, fmt.Sprintf("%s imports %s: %s must not depend on %s (the README's layout table)", path, p, rule, dep))
	}
	return problems
}

func TestImportBoundaries(t *testing.T) {
	fset := token.NewFileSet()
	used := map[string]map[string]bool{} // rule → project folders its code imports
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != "." {
			if _, statErr := os.Stat(filepath.Join(path, "go.mod")); statErr == nil {
				return filepath.SkipDir // a module of its own (scripts/bench-dbos): not this module's code
			}
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		path = filepath.ToSlash(path)
		rule := ruleOf(path)
		if rule == "" || rule == "cmd" {
			return nil
		}
		if _, ok := dependsOn[rule]; !ok {
			t.Errorf("%s: folder %s is not in dependsOn: add its row to the README's layout table and to dependsOn", path, rule)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			for _, problem := range importProblems(path, strings.Trim(imp.Path.Value, `"`), used) {
				t.Error(problem)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range slices.Sorted(maps.Keys(beyondDesign)) {
		for _, dep := range slices.Sorted(maps.Keys(beyondDesign[rule])) {
			if slices.Contains(dependsOn[rule], dep) {
				t.Errorf("beyondDesign[%q][%q] is in DESIGN.md's column already: remove it", rule, dep)
			}
			if !used[rule][dep] {
				t.Errorf("%s no longer imports %s: remove beyondDesign[%q][%q]", rule, dep, rule, dep)
			}
		}
	}
}

// TestImportRules checks the rule table itself: under runner/ every package's row forbids
// something, a forbidden import is reported for each package (runner/loop may not import
// runner/turn, for one), and the rows allow no cycle.
func TestImportRules(t *testing.T) {
	folders := slices.Sorted(maps.Keys(dependsOn))
	for _, rule := range folders {
		if rule != "runner" && !strings.HasPrefix(rule, "runner/") {
			continue
		}
		forbidden := 0
		for _, dep := range folders {
			if allowed(rule, dep) {
				continue
			}
			forbidden++
			if problems := importProblems(rule+"/x.go", "svc/"+dep, map[string]map[string]bool{}); len(problems) == 0 {
				t.Errorf("%s importing %s is not reported, though its row forbids it", rule, dep)
			}
		}
		if forbidden == 0 {
			t.Errorf("the row of %s allows every folder", rule)
		}
	}
	if problems := importProblems("runner/loop/loop.go", "svc/runner/turn", map[string]map[string]bool{}); len(problems) != 1 {
		t.Errorf("runner/loop importing runner/turn: %q, want one problem", problems)
	}
	if problems := importProblems("runner/sessions/live/cache.go", "svc/runner/sessions", map[string]map[string]bool{}); len(problems) != 0 {
		t.Errorf("a sub-package importing its own runner package: %q, want none", problems)
	}
	// No cycles: a depth-first walk over the rows and their beyondDesign entries.
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var visit func(rule string, path []string)
	visit = func(rule string, path []string) {
		switch state[rule] {
		case open:
			t.Errorf("the rules allow a cycle: %s", strings.Join(append(path, rule), " → "))
			return
		case done:
			return
		}
		state[rule] = open
		deps := slices.Concat(dependsOn[rule], slices.Collect(maps.Keys(beyondDesign[rule])))
		slices.Sort(deps)
		for _, dep := range deps {
			visit(dep, append(path, rule))
		}
		state[rule] = done
	}
	for _, rule := range folders {
		visit(rule, nil)
	}
}

// TestLayoutTableMatchesRules: the README's layout table says what arch_test enforces, row for
// row: each folder's "depends on" cell lists its dependsOn row, then its beyondDesign entries in
// parentheses ("—" for none).
func TestLayoutTableMatchesRules(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z/]+)` \\|.*\\| ([^|]*) \\|$")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		folder, cell := m[1], strings.TrimSpace(m[2])
		if _, ok := dependsOn[folder]; !ok {
			continue // examples, testdata, docs, cmd/svc: not checked
		}
		seen[folder] = true
		want := "—"
		if deps := dependsOn[folder]; len(deps) > 0 {
			want = strings.Join(slices.Sorted(slices.Values(deps)), ", ")
		}
		if extra := slices.Sorted(maps.Keys(beyondDesign[folder])); len(extra) > 0 {
			want += " (" + strings.Join(extra, ", ") + ")"
		}
		if cell != want {
			t.Errorf("README layout row %s says it depends on %q; arch_test.go allows %q", folder, cell, want)
		}
	}
	for _, folder := range slices.Sorted(maps.Keys(dependsOn)) {
		if !seen[folder] {
			t.Errorf("the README's layout table has no row for %s", folder)
		}
	}
}

// Package svc_test holds the repository-wide checks: the import boundaries of DESIGN.md.
package svc_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dependsOn is the "depends on" column of DESIGN.md's layout table: the project folders that the
// code of each folder may import (besides its own sub-packages). "runner/..." is the row of
// runner's sub-packages. cmd depends on everything and is not checked. errcode and client are not
// in the table; they are leaves and depend on nothing. No golangci-lint is available on the
// machines, so this test is the depguard. Tests may wire real neighbours together and are not
// checked.
var dependsOn = map[string][]string{
	"agent":      {},
	"bundle":     {"agent"},
	"api":        {"auth", "deploy", "registry", "webhook"},
	"deploy":     {"agent", "registry", "webhook", "workers"},
	"auth":       {},
	"webhook":    {},
	"builder":    {"agent", "bundle", "registry"},
	"registry":   {},
	"workers":    {"builder", "registry"},
	"runner":     {"agent", "bundle"},
	"runner/...": {"agent"},
	"migrations": {},
	"errcode":    {},
	"client":     {},
	"githost":    {},
	"evals":      {"agent"},
	"faults":     {},
	"traces":     {},
}

// beyondDesign lists, with the reason, each import the code has that the column does not show.
// They are allowed and kept honest: an entry that no code needs any more fails the test, so this
// list only shrinks.
var beyondDesign = map[string]map[string]string{
	"api": {
		"faults":  "the fault points of the fault harness (SVC_FAULT, testing only)",
		"agent":   "the snapshot route shows the loaded agent",
		"builder": "source-version uploads are taken in by builder.Ingest",
		"bundle":  "activate, promote, rollback and the snapshot open the bundle as a runner does; uploads are read with bundle.ReadTarGz and bundle.FromFiles",
		"errcode": "the one error catalog, not in the table",
	},
	"builder": {
		"faults": "the fault points of the fault harness (SVC_FAULT, testing only)",
	},
	"deploy": {
		"builder": "a redeploy resolves the branch head (builder.BranchHead) and a push's branch filter reads the pushed svc.json (builder.FetchCommit), with the agent's git credentials (builder.Credentials)",
	},
	"evals": {
		"runner": "the judge is a runner/models.Provider and a transcript is the runtime's runner/sse frames",
	},
	"registry": {
		"auth":       "record ids come from auth.NewID",
		"migrations": "some SQL differs by dialect (migrations.DialectOf)",
	},
	"workers": {
		"faults":     "the fault points of the fault harness (SVC_FAULT, testing only)",
		"migrations": "dbqueue's claim differs by dialect",
	},
	"runner": {
		"errcode":  "the router writes the one error catalog",
		"registry": "the router resolves a host to a registry.Deployment and reports runtimes on it",
	},
	"runner/...": {
		"faults":     "the fault points of the fault harness (SVC_FAULT, testing only)",
		"auth":       "the runtime verifies runtime tokens; tools and approvals mint ids",
		"registry":   "attachments are kept in the object store (runner/sessions/objblobs); the runtime keeps feedback as registry.Feedback",
		"errcode":    "the runtime answers MESSAGE_BLOCKED in the platform's envelope, as spec 7 fixes it",
		"migrations": "the stores of an agent's own database get their tables from the same versioned SQL (runner/stores), which differs by dialect",
	},
}

// noDatabase lists the folders whose code reaches the database only through registry's stores:
// they must not import gorm themselves.
var noDatabase = []string{"api", "deploy", "webhook"}

// ruleOf is the dependsOn key of the file at path (slash-separated, from the repository root),
// or "" for a file at the root.
func ruleOf(path string) string {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 1:
		return ""
	case parts[0] == "runner" && len(parts) > 2:
		return "runner/..."
	}
	return parts[0]
}

// noHTTP lists the folders below the runtime's routes: a turn, the loop, the session stores and
// the tools, stores and approvals know nothing of HTTP requests (models and connections make their own calls).
var noHTTP = []string{"runner/turn", "runner/loop", "runner/sessions", "runner/tools", "runner/stores", "runner/approvals", "runner/handlers", "runner/sandbox"}

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
		allowed, ok := dependsOn[rule]
		if !ok {
			t.Errorf("%s: folder %s is not in dependsOn: add its row of DESIGN.md's layout table", path, rule)
			return nil
		}
		top := strings.Split(rule, "/")[0]
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			for _, dir := range noHTTP {
				if strings.HasPrefix(path, dir+"/") && (p == "net/http" || p == "svc/runner/runtime") {
					t.Errorf("%s imports %s: %s knows nothing of HTTP requests", path, p, dir)
				}
			}
			if slices.Contains(noDatabase, rule) && strings.HasPrefix(p, "gorm.io/") {
				t.Errorf("%s imports %s: %s reaches the database through registry's stores only", path, p, rule)
			}
			dep, ok := strings.CutPrefix(p, "svc/")
			if !ok {
				continue
			}
			dep = strings.Split(dep, "/")[0]
			if dep == top {
				continue
			}
			if used[rule] == nil {
				used[rule] = map[string]bool{}
			}
			used[rule][dep] = true
			if _, extra := beyondDesign[rule][dep]; !slices.Contains(allowed, dep) && !extra {
				t.Errorf("%s imports %s: %s must not depend on %s (DESIGN.md)", path, p, rule, dep)
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

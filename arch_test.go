// Package svc_test holds the repository-wide checks: the import boundaries of DESIGN.md.
package svc_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbidden lists, per top-level folder, the project folders its code must not import: the
// "depends on" column of DESIGN.md. Tests may wire real neighbours together and are not checked.
// No golangci-lint is available on the machines, so this test is the depguard.
var forbidden = map[string][]string{
	"agent":      {"api", "auth", "builder", "bundle", "deploy", "registry", "runner", "webhook", "workers", "cmd"},
	"auth":       {"api", "agent", "builder", "bundle", "deploy", "registry", "runner", "webhook", "workers", "cmd"},
	"webhook":    {"api", "agent", "auth", "builder", "bundle", "deploy", "registry", "runner", "workers", "cmd"},
	"bundle":     {"api", "auth", "builder", "deploy", "errcode", "migrations", "registry", "runner", "webhook", "workers", "cmd", "client"},
	"registry":   {"api", "builder", "bundle", "deploy", "runner", "webhook", "workers", "cmd"},
	"builder":    {"api", "deploy", "runner", "webhook", "workers", "cmd"},
	"workers":    {"api", "bundle", "deploy", "runner", "webhook", "cmd"},
	"deploy":     {"api", "auth", "bundle", "runner", "cmd"},
	"runner":     {"api", "builder", "deploy", "webhook", "workers", "cmd"},
	"api":        {"runner", "workers", "cmd"},
	"migrations": {"api", "agent", "auth", "builder", "bundle", "deploy", "registry", "runner", "webhook", "workers", "cmd"},
	"client":     {"api", "agent", "auth", "builder", "bundle", "deploy", "registry", "runner", "webhook", "workers", "cmd"},
	"errcode":    {"api", "agent", "auth", "builder", "bundle", "deploy", "registry", "runner", "webhook", "workers", "cmd", "client"},
}

// noDatabase lists the folders whose code reaches the database only through registry's stores:
// they must not import gorm themselves.
var noDatabase = []string{"api", "deploy", "webhook"}

func TestImportBoundaries(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		top := strings.Split(filepath.ToSlash(path), "/")[0]
		banned, ok := forbidden[top]
		if !ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if slices.Contains(noDatabase, top) && strings.HasPrefix(p, "gorm.io/") {
				t.Errorf("%s imports %s: %s reaches the database through registry's stores only", path, p, top)
			}
			for _, b := range banned {
				if p == "svc/"+b || strings.HasPrefix(p, "svc/"+b+"/") {
					t.Errorf("%s imports %s: %s must not depend on %s (DESIGN.md)", path, p, top, b)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Package agenttest finds the example agent trees that tests across the repository share. They live
// in testdata/agents/ at the repository root (the folder that holds go.mod), so every package's
// tests read the same trees and nothing outside the repository.
package agenttest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Root is the repository root: the nearest folder at or above the working directory (a test's
// package folder) that holds go.mod. It fails the test when there is none.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("agenttest: working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("agenttest: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// Dir is the folder of the example agent tree name (hello, support-desk, broken, ...) under
// testdata/agents. It fails the test when the tree is missing.
func Dir(tb testing.TB, name string) string {
	tb.Helper()
	dir := filepath.Join(Root(tb), "testdata", "agents", name)
	if _, err := os.Stat(dir); err != nil {
		tb.Fatalf("agenttest: example agent %q: %v", name, err)
	}
	return dir
}

// Files reads every file of an example agent tree as {slash path: text}.
func Files(t testing.TB, name string) map[string]string {
	t.Helper()
	root := Dir(t, name)
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("read fixture %s: %v", name, err)
	}
	if len(files) == 0 {
		t.Fatalf("fixture %s is empty", name)
	}
	return files
}

// Write writes files (slash paths to text) into a new temporary folder and returns it: an agent
// tree of a test's own.
func Write(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

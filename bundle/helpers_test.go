package bundle

import (
	"io/fs"
	"testing"

	"svc/agent/agenttest"
)

// fixtureFiles reads every file of a shared example agent, by slash path.
func fixtureFiles(tb testing.TB, name string) map[string]string { return agenttest.Files(tb, name) }

// treeFiles returns every file of fsys as a map of path to content.
func treeFiles(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		files[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

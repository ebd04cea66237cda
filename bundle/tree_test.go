package bundle

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestMemFSConformance(t *testing.T) {
	fsys, err := FromFiles(map[string]string{"svc.json": "{}", "a/b/c.txt": "hello", "a/d.txt": ""}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "svc.json", "a/b/c.txt", "a/d.txt", "a", "a/b"); err != nil {
		t.Fatal(err)
	}
}

func TestMemFSLimitsRecheck(t *testing.T) {
	fsys, err := FromFiles(map[string]string{"a": "12345", "b": "1"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		limits Limits
		kind   error
	}{
		{Limits{MaxFileSize: 5, MaxTotalSize: 6, MaxFiles: 2}, nil},
		{Limits{MaxFileSize: 4}, ErrTooLarge},
		{Limits{MaxTotalSize: 5}, ErrTooLarge},
		{Limits{MaxFiles: 1}, ErrTooManyFiles},
	}
	for _, tt := range tests {
		if _, err := Snapshot(fsys, tt.limits); !errors.Is(err, tt.kind) {
			t.Errorf("snapshot under %+v: error = %v, want %v", tt.limits, err, tt.kind)
		}
	}
}

func TestMemFSReadDir(t *testing.T) {
	fsys, err := FromFiles(map[string]string{"z": "", "a/1": "", "m": ""}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"a", "m", "z"}, names); diff != "" {
		t.Errorf("ReadDir(.) (-want +got):\n%s", diff)
	}
	if _, err := fsys.Open("../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Open(../x) error = %v, want fs.ErrInvalid", err)
	}
	if _, err := fsys.Open("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(nope) error = %v, want fs.ErrNotExist", err)
	}
}

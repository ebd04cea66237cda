package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// deleted, as the content of a file in a treeCase, removes that file from the base tree.
const deleted = "\x00deleted"

// baseTree is the smallest valid tree; tests add or replace files in it.
func baseTree(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "t", "version": "1"}`)},
		"agents/default/AGENT.md":   {Data: []byte("# T\n\nBe brief.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default"}`)},
	}
	for name, text := range files {
		if text == deleted {
			delete(fsys, name)
			continue
		}
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}

// problemsOf loads fsys and returns its problems (nil for a valid tree).
func problemsOf(tb testing.TB, fsys fs.FS) (*Agent, Problems) {
	tb.Helper()
	a, err := Load(fsys)
	if a == nil {
		tb.Fatalf("Load returned no agent (err %v)", err)
	}
	if err == nil {
		return a, nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		tb.Fatalf("Load error is %T, want Problems: %v", err, err)
	}
	return a, ps
}

// treeCase is one small tree (the base tree plus files) and the exact problems it must give.
type treeCase struct {
	name  string
	files map[string]string
	want  []Problem
}

func runTreeCases(t *testing.T, cases []treeCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, got := problemsOf(t, baseTree(tt.files))
			if diff := cmp.Diff(tt.want, []Problem(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadValidBase(t *testing.T) {
	a, ps := problemsOf(t, baseTree(nil))
	if ps != nil {
		t.Fatalf("base tree has problems:\n%v", ps)
	}
	want := &NamedAgent{Name: "default", Instructions: "# T\n\nBe brief.\n"}
	if diff := cmp.Diff(want, a.DefaultAgent()); diff != "" {
		t.Errorf("DefaultAgent() (-want +got):\n%s", diff)
	}
}

func TestLoadLayout(t *testing.T) {
	runTreeCases(t, []treeCase{
		{name: "missing svc.json", files: map[string]string{"svc.json": deleted},
			want: []Problem{{File: "svc.json", Message: "missing svc.json (the agent's config file)"}}},
		{name: "unknown top-level files and folders are allowed",
			files: map[string]string{"README.md": "# hi", "docs/notes.txt": "x", "svc/README.md": "about"}},
		{name: "unknown files inside svc folders are allowed",
			files: map[string]string{
				"svc/tools/x/tool.json":    `{"name": "x", "parameters": {"type": "object"}}`,
				"svc/tools/x/handler.ts":   "export default async () => 1",
				"svc/tools/x/extra.bin":    "\x00\x01",
				"svc/knowledge/image.png":  "\x89PNG",
				"svc/stores/notes.txt":     "x",
				"svc/skills/README.md":     "x",
				"agents/default/notes.txt": "x",
				"evals/data.csv":           "a,b",
			}},
		{name: "unknown svc kind", files: map[string]string{"svc/widgets/a.json": "{}"},
			want: []Problem{{File: "svc/widgets", Message: "unknown folder svc/widgets: expected one of connections, knowledge, skills, stores, tools"}}},
		{name: "folder with only agent.json is not an agent",
			files: map[string]string{"agents/notes/agent.json": `{"name": "whatever", "bogus": 1}`}},
		{name: "AGENT.md without agent.json",
			files: map[string]string{"agents/helper/AGENT.md": "# Helper\nHelp."}},
		{name: "empty AGENT.md", files: map[string]string{"agents/default/AGENT.md": " \n"},
			want: []Problem{{File: "agents/default/AGENT.md", Message: "AGENT.md is empty; it holds the agent's instructions"}}},
		{name: "AGENT.md not UTF-8", files: map[string]string{"agents/default/AGENT.md": "\xff\xfe"},
			want: []Problem{{File: "agents/default/AGENT.md", Message: "not valid UTF-8"}}},
		{name: "skill folder without SKILL.md", files: map[string]string{"svc/skills/x/notes.md": "x"},
			want: []Problem{{File: "svc/skills/x/SKILL.md", Message: `missing SKILL.md of skill folder "x"`}}},
		{name: "connection without spec.json", files: map[string]string{"svc/connections/c/surface.md": "x"},
			want: []Problem{{File: "svc/connections/c/spec.json", Message: `missing spec.json of connection "c"`}}},
		{name: "invalid agent folder name", files: map[string]string{"agents/a b/AGENT.md": "x"},
			want: []Problem{{File: "agents/a b", Message: `invalid agent name "a b": use letters, digits, '_' and '-' (at most 64, starting with a letter or digit)`}}},
		{name: "invalid knowledge name", files: map[string]string{"svc/knowledge/_x.md": "---\ndescription: d\n---\n"},
			want: []Problem{{File: "svc/knowledge/_x.md", Message: `invalid knowledge document name "_x": use letters, digits, '_' and '-' (at most 64, starting with a letter or digit)`}}},
	})
}

func TestLoadPathsEscapingTree(t *testing.T) {
	tests := []struct {
		key  string
		want Problem
	}{
		{"../evil", Problem{File: "..", Message: `path escapes the tree (element "..")`}},
		{"a/../b", Problem{File: "a/..", Message: `path escapes the tree (element "..")`}},
		{"/abs", Problem{File: ".", Message: `path escapes the tree (element ".")`}},
		{"./c", Problem{File: ".", Message: `path escapes the tree (element ".")`}},
		{"a//b", Problem{File: "a/.", Message: `path escapes the tree (element ".")`}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			fsys := baseTree(nil)
			fsys[tt.key] = &fstest.MapFile{Data: []byte("x")}
			_, ps := problemsOf(t, fsys)
			if diff := cmp.Diff([]Problem{tt.want}, []Problem(ps)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadSymlinksInFS(t *testing.T) {
	link := func(target string) *fstest.MapFile {
		return &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte(target)}
	}
	tests := []struct {
		name   string
		target string
		want   []Problem
	}{
		{"inside to a file", "../agents/default/AGENT.md", nil},
		{"leaving the tree", "../../etc/passwd", []Problem{{File: "docs/link", Message: "symlink leaves the tree"}}},
		{"absolute", "/etc/passwd", []Problem{{File: "docs/link", Message: "symlink leaves the tree"}}},
		{"to a folder", "../agents", []Problem{{File: "docs/link", Message: "symlink to a folder is not supported"}}},
		{"broken", "missing", []Problem{{File: "docs/link", Message: "broken symlink"}}},
		{"back up after a name", "../agents/../svc.json", []Problem{{File: "docs/link", Message: `symlink target "../agents/../svc.json" goes back up after a name; use a plain relative path`}}},
		{"chain", "other", []Problem{{File: "docs/link", Message: "symlink points through another symlink (docs/other); link to the file itself"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := baseTree(nil)
			fsys["docs/link"] = link(tt.target)
			fsys["docs/other"] = link("../svc.json") // valid; the "chain" case links to it
			a, ps := problemsOf(t, fsys)
			if diff := cmp.Diff(tt.want, []Problem(ps)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if tt.want == nil && a.Files["docs/link"] != int64(len("# T\n\nBe brief.\n")) {
				t.Errorf("Files[docs/link] = %d, want the size of the target", a.Files["docs/link"])
			}
		})
	}
}

// noLinkFS hides fs.ReadLinkFS, as an fs.FS that cannot tell where a link goes.
type noLinkFS struct{ fs.ReadDirFS }

func TestLoadSymlinkUncheckable(t *testing.T) {
	fsys := baseTree(nil)
	fsys["docs/link"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("../svc.json")}
	_, ps := problemsOf(t, noLinkFS{fsys})
	want := []Problem{{File: "docs/link", Message: "symlink cannot be checked in this tree"}}
	if diff := cmp.Diff(want, []Problem(ps)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// writeTree writes files (slash paths) under dir.
func writeTree(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestLoadDirSymlinks(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "s3cret", "dir/x.md": "x"})
	root := filepath.Join(t.TempDir(), "agent")
	writeTree(t, root, map[string]string{
		"svc.json":                  `{"name": "t", "version": "1"}`,
		"agents/default/AGENT.md":   "# T\nBe brief.\n",
		"agents/default/agent.json": `{"name": "default"}`,
		"docs/real.md":              "real",
	})
	links := map[string]string{
		"docs/inside.md":      filepath.Join(root, "docs", "real.md"), // absolute but inside: fine on disk
		"docs/relative.md":    "real.md",
		"docs/outside.txt":    filepath.Join(outside, "secret.txt"),
		"docs/sneaky.txt":     "../../../" + filepath.Base(outside) + "/secret.txt",
		"svc/knowledge/x.md":  filepath.Join(outside, "dir", "x.md"),
		"docs/outside-folder": filepath.Join(outside, "dir"),
		"docs/inside-folder":  filepath.Join(root, "agents"),
	}
	for name, target := range links {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	a, err := LoadDir(root)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("LoadDir error = %v, want Problems", err)
	}
	want := []Problem{
		{File: "docs/inside-folder", Message: "symlink to a folder is not supported"},
		{File: "docs/outside-folder", Message: "symlink leaves the tree"},
		{File: "docs/outside.txt", Message: "symlink leaves the tree"},
		{File: "docs/sneaky.txt", Message: "symlink leaves the tree"},
		{File: "svc/knowledge/x.md", Message: "symlink leaves the tree"},
	}
	if diff := cmp.Diff(want, []Problem(ps)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	for _, name := range []string{"docs/inside.md", "docs/relative.md"} {
		if a.Files[name] != 4 {
			t.Errorf("Files[%s] = %d, want 4 (the link inside the tree is followed)", name, a.Files[name])
		}
	}
	if _, ok := a.Knowledge["x"]; ok {
		t.Error("knowledge behind a link leaving the tree was read")
	}
}

func TestLoadDirErrors(t *testing.T) {
	if _, err := LoadDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("LoadDir(missing folder) = nil error")
	}
	file := filepath.Join(t.TempDir(), "file")
	writeTree(t, filepath.Dir(file), map[string]string{"file": "x"})
	_, err := LoadDir(file)
	if err == nil || errors.As(err, new(Problems)) {
		t.Errorf("LoadDir(file) = %v, want a plain error", err)
	}
}

// sized returns a file of n bytes sharing one backing array, so big trees cost no memory per file.
func sized(buf []byte, n int) *fstest.MapFile { return &fstest.MapFile{Data: buf[:n]} }

func TestLoadFileSizeLimit(t *testing.T) {
	buf := make([]byte, MaxFileSize+1)
	tests := []struct {
		name string
		file string
		size int
		want []Problem
	}{
		{"unknown file at the limit", "data/blob.bin", MaxFileSize, nil},
		{"unknown file over the limit", "data/blob.bin", MaxFileSize + 1,
			[]Problem{{File: "data/blob.bin", Message: "file is 5242881 bytes, more than the limit of 5242880 (5 MiB)"}}},
		{"known file over the limit is not read", "svc.json", MaxFileSize + 1,
			[]Problem{{File: "svc.json", Message: "file is 5242881 bytes, more than the limit of 5242880 (5 MiB)"}}},
		{"tool source over the limit", "svc/tools/x/handler.ts", MaxFileSize + 1,
			[]Problem{{File: "svc/tools/x/handler.ts", Message: "file is 5242881 bytes, more than the limit of 5242880 (5 MiB)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := baseTree(nil)
			if strings.HasPrefix(tt.file, "svc/tools/x/") {
				fsys["svc/tools/x/tool.json"] = &fstest.MapFile{Data: []byte(`{"name": "x", "parameters": {"type": "object"}}`)}
			}
			fsys[tt.file] = sized(buf, tt.size)
			a, ps := problemsOf(t, fsys)
			if diff := cmp.Diff(tt.want, []Problem(ps)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if a.Files[tt.file] != int64(tt.size) {
				t.Errorf("Files[%s] = %d, want %d", tt.file, a.Files[tt.file], tt.size)
			}
		})
	}
}

func TestLoadTreeSizeLimit(t *testing.T) {
	buf := make([]byte, MaxFileSize)
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("limit+%d", extra), func(t *testing.T) {
			fsys := baseTree(nil)
			var base int
			for _, f := range fsys {
				base += len(f.Data)
			}
			// Nine full files and one that brings the tree to exactly MaxTreeSize (+extra).
			for i := range 9 {
				fsys[fmt.Sprintf("data/%d.bin", i)] = sized(buf, MaxFileSize)
			}
			fsys["data/last.bin"] = sized(buf, MaxFileSize-base+extra)
			_, ps := problemsOf(t, fsys)
			var want []Problem
			if extra > 0 {
				want = []Problem{{File: ".", Message: "tree is 52428801 bytes, more than the limit of 52428800 (50 MiB)"}}
			}
			if diff := cmp.Diff(want, []Problem(ps)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadFileCountLimit(t *testing.T) {
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("limit+%d", extra), func(t *testing.T) {
			fsys := baseTree(nil)
			for i := len(fsys); i < MaxFiles+extra; i++ {
				fsys[fmt.Sprintf("data/%05d", i)] = &fstest.MapFile{}
			}
			a, ps := problemsOf(t, fsys)
			var want []Problem
			if extra > 0 {
				want = []Problem{{File: ".", Message: "more than 10000 files (the limit)"}}
			} else if len(a.Files) != MaxFiles {
				t.Errorf("len(Files) = %d, want %d", len(a.Files), MaxFiles)
			}
			if diff := cmp.Diff(want, []Problem(ps)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// manyDirsFS is a base tree plus n empty folders empty00000... at its root, listed without the
// cost of a MapFS scan per folder.
type manyDirsFS struct {
	fstest.MapFS
	n int
}

type dirInfo string

func (d dirInfo) Name() string       { return string(d) }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }

func (m manyDirsFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if strings.HasPrefix(name, "empty") {
		return nil, nil
	}
	entries, err := m.MapFS.ReadDir(name)
	if name == "." {
		for i := range m.n {
			entries = append(entries, fs.FileInfoToDirEntry(dirInfo(fmt.Sprintf("empty%05d", i))))
		}
	}
	return entries, err
}

func TestLoadFolderCountLimit(t *testing.T) {
	base := baseTree(nil)
	const baseDirs = 2 // agents, agents/default
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("limit+%d", extra), func(t *testing.T) {
			_, ps := problemsOf(t, manyDirsFS{MapFS: base, n: MaxFolders - baseDirs + extra})
			var want []Problem
			if extra > 0 {
				want = []Problem{{File: ".", Message: "more than 10000 folders (the limit)"}}
			}
			if diff := cmp.Diff(want, []Problem(ps)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadToolTSLayout(t *testing.T) {
	a, ps := problemsOf(t, baseTree(map[string]string{
		"svc/tools/quick/tool.ts":   "export default async function (p: {n: number}) { return p.n + 1 }\n",
		"svc/tools/quick/tool.json": `{"this file": "is ignored", "name": 42}`,
		"svc/tools/bare/tool.ts":    "export default () => 'ok'\n",
	}))
	if ps != nil {
		t.Fatalf("problems:\n%v", ps)
	}
	for _, name := range []string{"quick", "bare"} {
		tool := a.Tools[name]
		if tool == nil {
			t.Fatalf("tool %s missing", name)
		}
		if tool.Layout != LayoutToolTS || tool.Name != name || tool.SourcePath != "svc/tools/"+name+"/tool.ts" || tool.JS == "" {
			t.Errorf("tool %s = {Layout %q, Name %q, SourcePath %q, JS %d bytes}, want the tool.ts layout", name, tool.Layout, tool.Name, tool.SourcePath, len(tool.JS))
		}
		if tool.Description != "" || tool.Parameters != nil {
			t.Errorf("tool %s took fields from tool.json: %+v", name, tool)
		}
	}
}

func TestProblemsError(t *testing.T) {
	_, ps := problemsOf(t, baseTree(map[string]string{"svc.json": `{"name": "t"}`, "svc/x/y": ""}))
	want := "agent: invalid source tree:\nsvc.json: missing required field \"version\"\nsvc/x: unknown folder svc/x: expected one of connections, knowledge, skills, stores, tools"
	if got := ps.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestLoadDepthLimit: a path of MaxDepth elements loads, one element more is a problem naming it.
func TestLoadDepthLimit(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("d/", n-1) + "f.md" }
	for _, n := range []int{MaxDepth, MaxDepth + 1} {
		_, ps := problemsOf(t, baseTree(map[string]string{deep(n): "x"}))
		var want []Problem
		if n > MaxDepth {
			want = []Problem{{File: deep(n), Message: "path is 33 elements deep, more than the limit of 32"}}
		}
		if diff := cmp.Diff(want, []Problem(ps)); diff != "" {
			t.Errorf("depth %d: problems (-want +got):\n%s", n, diff)
		}
	}
}

// TestLoadDirLeavesGitOut: a checkout's .git folder is not read by LoadDir.
func TestLoadDirLeavesGitOut(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"svc.json": `{"name": "t", "version": "1"}`, "agents/default/AGENT.md": "Be brief.",
		".git/HEAD": "ref: refs/heads/main\n", ".git/objects/aa/bb": strings.Repeat("x", MaxFileSize+1),
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir of a checkout = %v", err)
	}
	for p := range a.Files {
		if strings.HasPrefix(p, ".git") {
			t.Errorf("LoadDir read %s", p)
		}
	}
}

package svc_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// trackedFiles lists the files git tracks or would track (untracked but not ignored), as slash
// paths from the repository root: what a clone of the committed change holds.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (git is required for the repository checks)", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, err := os.Lstat(f); err == nil { // deleted in the work tree: not in the next commit
			files = append(files, f)
		}
	}
	return files
}

var (
	// machinePath matches an absolute path of one particular machine: a home or work folder.
	machinePath = regexp.MustCompile(`(^|[\s"'(=:` + "`" + `])/(work|root|home|Users)/[A-Za-z0-9._-]`)
	// climbing matches a relative path that starts by going up one folder or more.
	climbing = regexp.MustCompile(`(^|[\s"'(=` + "`" + `])((\.\./)+[A-Za-z0-9._/-]*)`)
)

// TestNoPathsOutsideRepository keeps the repository standing on its own: no file names a folder of
// one machine, and no relative path climbs out of the repository from the file that names it (a Go
// test runs in its package folder, a Markdown link resolves from its file). A path that climbs to
// etc/ is a traversal attack that tests feed to the code on purpose, and is allowed.
func TestNoPathsOutsideRepository(t *testing.T) {
	for _, f := range trackedFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 || strings.HasPrefix(f, "testdata/agents/") && strings.HasSuffix(f, "README.md") {
			continue // binary, or an example tree's own notes
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if m := machinePath.FindString(line); m != "" {
				t.Errorf("%s:%d names a path of one machine: %s", f, n, strings.TrimSpace(line))
			}
			for _, m := range climbing.FindAllStringSubmatch(line, -1) {
				target := path.Join(path.Dir(f), m[2])
				if !strings.HasPrefix(target, "../") && target != ".." {
					continue
				}
				if outside := strings.TrimLeft(target, "./"); outside == "" || strings.HasPrefix(outside, "etc/") || outside == "etc" {
					continue
				}
				t.Errorf("%s:%d names %q, which leaves the repository", f, n, m[2])
			}
		}
	}
}

// TestFreshCopy copies the files a clone would hold into an empty folder with nothing beside it
// and runs go vet over all of it and the tests of the agent package there: a test that reads a
// neighbour of the checkout fails here, not only on a new user's machine.
func TestFreshCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("copies and vets the whole repository")
	}
	dir := filepath.Join(t.TempDir(), "repo")
	for _, f := range trackedFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./agent/..."}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s in a fresh copy: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// mdLink matches the target of a Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestMarkdownLinksResolve checks that every relative link of every Markdown file names a file or
// folder of the repository.
func TestMarkdownLinksResolve(t *testing.T) {
	files := trackedFiles(t)
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := path.Join(path.Dir(f), target)
			if _, err := os.Stat(filepath.FromSlash(p)); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", f, m[1])
			}
		}
	}
}

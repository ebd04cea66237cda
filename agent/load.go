package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Limits of a source tree, the one statement of them: the builder (upload, git fetch, build, the
// bundle reader) and the CLI's packer apply the same. A tree at a limit is valid; one byte, one
// file, one folder or one level more is a problem.
const (
	MaxFileSize = 5 << 20  // bytes per file (5 MiB)
	MaxFiles    = 10_000   // regular files per tree
	MaxTreeSize = 50 << 20 // bytes across all files (50 MiB)
	MaxFolders  = MaxFiles // folders per tree, counting every folder a path passes through
	MaxDepth    = 32       // elements of the longest path ("a/b/c.md" is 3)
)

// ConfigFile is the path of the agent's config file in a source tree.
const ConfigFile = "svc.json"

// ConnectionToolName is the tool that calls the agent's connections (CONTRACT §7), which a
// handler may list in uses.tools when the agent has connections.
const ConnectionToolName = "request"

// BuiltinTools returns the names of the built-in tools an agent.json may list, in a fresh slice.
// They are reserved: no folder of svc/tools may take one.
func BuiltinTools() []string { return []string{"load_skill", "load_knowledge", "ask_user", "handoff"} }

// Load reads the source tree rooted at fsys into an Agent and validates it. It always returns the
// Agent it could build; when anything is wrong, the error is a Problems listing every problem.
// Symbolic links are followed only when fsys can read them (fs.ReadLinkFS) and they stay inside the tree.
func Load(fsys fs.FS) (*Agent, error) {
	return load(fsys, nil)
}

// LoadDir is Load for a folder on disk. Symbolic links that resolve outside the folder are problems
// and are never read. It returns a plain error, not Problems, when dir is not a readable folder.
func LoadDir(dir string) (*Agent, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("load agent: %w", err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("load agent: %w", err)
	}
	info, err := os.Lstat(root)
	if err != nil {
		return nil, fmt.Errorf("load agent: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("load agent: %s is not a directory", dir)
	}
	inside := func(name string) error {
		real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return errBrokenLink // the error names host paths, which problems must not show
		}
		rel, err := filepath.Rel(root, real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
			return errLinkLeavesTree
		}
		return nil
	}
	return load(os.DirFS(root), inside)
}

var (
	errLinkLeavesTree = errors.New("symlink leaves the tree")
	errBrokenLink     = errors.New("broken symlink")
)

// collector gathers problems.
type collector struct {
	problems Problems
}

func (c *collector) add(file string, line int, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: file, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (c *collector) addJSON(file string, issues []lineIssue) {
	for _, is := range issues {
		c.problems = append(c.problems, Problem{File: file, Line: is.line, Message: is.message})
	}
}

// loader holds the state of one Load.
type loader struct {
	fsys      fs.FS
	checkLink func(name string) error // set by LoadDir (a folder on disk): real resolution of a link
	c         collector
	agent     *Agent
	files     []string        // every regular file, sorted
	dirs      map[string]bool // every directory
	tooBig    map[string]bool // files over MaxFileSize, not read
	// JSON positions of files checked again after everything is parsed.
	configDoc *jsonDoc // svc.json's
	toolDocs  map[string]*jsonDoc
	agentDocs map[string]*jsonDoc
}

func load(fsys fs.FS, checkLink func(string) error) (*Agent, error) {
	l := &loader{
		fsys:      fsys,
		checkLink: checkLink,
		agent: &Agent{
			Connections: map[string]*Connection{},
			Knowledge:   map[string]*Knowledge{},
			Skills:      map[string]*Skill{},
			Stores:      map[string]*Store{},
			Tools:       map[string]*Tool{},
			Agents:      map[string]*NamedAgent{},
			Evals:       map[string]*Eval{},
			Files:       map[string]int64{},
		},
		dirs:      map[string]bool{},
		tooBig:    map[string]bool{},
		toolDocs:  map[string]*jsonDoc{},
		agentDocs: map[string]*jsonDoc{},
	}
	if l.walk() {
		l.parse()
	}
	if len(l.c.problems) == 0 {
		return l.agent, nil
	}
	l.c.problems.sort()
	return l.agent, l.c.problems
}

// walk lists the tree into l.files and l.dirs, checking names, links and limits. It reports
// whether the contents may be parsed (false when a tree-wide limit is exceeded).
func (l *loader) walk() bool {
	var total int64
	pending := []string{"."}
	for len(pending) > 0 {
		dir := pending[0]
		pending = pending[1:]
		entries, err := fs.ReadDir(l.fsys, dir)
		if err != nil {
			l.c.add(dir, 0, "cannot read folder: %v", err)
			continue
		}
		for _, e := range entries {
			name := e.Name()
			p := name
			if dir != "." {
				p = dir + "/" + name
			}
			if msg := checkPathElem(name); msg != "" {
				l.c.add(p, 0, "%s", msg)
				continue
			}
			if l.checkLink != nil && name == ".git" {
				continue // LoadDir: a checkout's repository is not part of the agent (`svc deploy --dir` leaves it out too)
			}
			if n := strings.Count(p, "/") + 1; n > MaxDepth {
				l.c.add(p, 0, "path is %d elements deep, more than the limit of %d", n, MaxDepth)
				continue
			}
			mode := e.Type()
			if mode&fs.ModeSymlink != 0 {
				var ok bool
				if mode, ok = l.followLink(p); !ok {
					continue
				}
			}
			switch {
			case mode.IsDir():
				l.dirs[p] = true
				if len(l.dirs) > MaxFolders {
					l.c.add(".", 0, "more than %d folders (the limit)", MaxFolders)
					return false
				}
				pending = append(pending, p)
			case mode.IsRegular():
				size, ok := l.size(p, e)
				if !ok {
					continue
				}
				l.files = append(l.files, p)
				l.agent.Files[p] = size
				if len(l.files) > MaxFiles {
					l.c.add(".", 0, "more than %d files (the limit)", MaxFiles)
					return false
				}
				total += size
				if size > MaxFileSize {
					l.tooBig[p] = true
					l.c.add(p, 0, "file is %d bytes, more than the limit of %d (5 MiB)", size, MaxFileSize)
				}
			default:
				l.c.add(p, 0, "not a regular file or folder (%v)", mode.Type())
			}
		}
	}
	slices.Sort(l.files)
	if total > MaxTreeSize {
		l.c.add(".", 0, "tree is %d bytes, more than the limit of %d (50 MiB)", total, MaxTreeSize)
		return false
	}
	return true
}

// checkPathElem returns a problem message when a directory entry name could escape or confuse the tree.
func checkPathElem(name string) string {
	switch {
	case name == "." || name == "..":
		return fmt.Sprintf("path escapes the tree (element %q)", name)
	case name == "" || strings.ContainsAny(name, "/\\\x00") || !fs.ValidPath(name):
		return fmt.Sprintf("invalid path element %q", name)
	}
	return ""
}

// followLink checks the symlink at p and returns the mode of its target; ok is false (and a problem
// recorded) when the link may not be followed.
func (l *loader) followLink(p string) (fs.FileMode, bool) {
	if l.checkLink != nil {
		if err := l.checkLink(p); err != nil {
			l.c.add(p, 0, "%v", err)
			return 0, false
		}
	} else {
		rl, isLinkFS := l.fsys.(fs.ReadLinkFS)
		if !isLinkFS {
			l.c.add(p, 0, "symlink cannot be checked in this tree")
			return 0, false
		}
		target, err := rl.ReadLink(p)
		if err != nil {
			l.c.add(p, 0, "cannot read symlink: %v", err)
			return 0, false
		}
		joined := path.Join(path.Dir(p), target)
		if path.IsAbs(target) || joined == ".." || strings.HasPrefix(joined, "../") {
			l.c.add(p, 0, "%v", errLinkLeavesTree)
			return 0, false
		}
		if msg := checkLinkTarget(rl, target, joined); msg != "" {
			l.c.add(p, 0, "%s", msg)
			return 0, false
		}
	}
	info, err := fs.Stat(l.fsys, p)
	if err != nil {
		l.c.add(p, 0, "%v", errBrokenLink)
		return 0, false
	}
	if info.IsDir() {
		l.c.add(p, 0, "symlink to a folder is not supported")
		return 0, false
	}
	return info.Mode(), true
}

// checkLinkTarget makes sure a link resolves where its text says: the real resolution equals the
// lexical one (joined) only when no ".." follows a name and no step of the way is itself a link.
func checkLinkTarget(rl fs.ReadLinkFS, target, joined string) string {
	named := false
	for elem := range strings.SplitSeq(target, "/") {
		switch elem {
		case "..":
			if named {
				return fmt.Sprintf("symlink target %q goes back up after a name; use a plain relative path", target)
			}
		case "", ".":
		default:
			named = true
		}
	}
	prefix := ""
	for elem := range strings.SplitSeq(joined, "/") {
		prefix = path.Join(prefix, elem)
		info, err := rl.Lstat(prefix)
		if err != nil {
			return errBrokenLink.Error()
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return fmt.Sprintf("symlink points through another symlink (%s); link to the file itself", prefix)
		}
	}
	return ""
}

func (l *loader) size(p string, e fs.DirEntry) (int64, bool) {
	var info fs.FileInfo
	var err error
	if e.Type()&fs.ModeSymlink != 0 {
		info, err = fs.Stat(l.fsys, p)
	} else {
		info, err = e.Info()
	}
	if err != nil {
		l.c.add(p, 0, "cannot read file: %v", err)
		return 0, false
	}
	return info.Size(), true
}

// has reports whether the tree holds the regular file p.
func (l *loader) has(p string) bool {
	_, ok := l.agent.Files[p]
	return ok
}

// read returns the contents of file p; ok is false (with a problem recorded when needed) when the
// file is absent, too large or unreadable.
func (l *loader) read(p string) ([]byte, bool) {
	if !l.has(p) || l.tooBig[p] {
		return nil, false
	}
	f, err := l.fsys.Open(p)
	if err != nil {
		l.c.add(p, 0, "cannot read file: %v", err)
		return nil, false
	}
	defer f.Close() //nolint:errcheck // read-only file
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		l.c.add(p, 0, "cannot read file: %v", err)
		return nil, false
	}
	if len(data) > MaxFileSize {
		l.c.add(p, 0, "file is more than the limit of %d bytes (5 MiB)", MaxFileSize)
		return nil, false
	}
	return data, true
}

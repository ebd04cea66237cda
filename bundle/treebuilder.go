package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TreeBuilder collects the entries of a source tree from any origin (a git tree, a tar archive, a
// map, an fs.FS), checks every name and limit as entries arrive, and turns the result into an
// immutable in-memory tree. Symbolic links are kept aside and resolved at the end: a link to a
// file inside the tree becomes a copy of that file; a link that leaves the tree, a link to a
// folder and a broken link are errors naming the link. Since no folder link survives, a target is
// read lexically from the link's folder (".." cancels the element before it), which is also how
// every hop of a chain is checked against the root. Errors are *SourceError values naming the
// entry. A TreeBuilder is used by one goroutine, once.
type TreeBuilder struct {
	limits Limits
	files  map[string][]byte
	links  map[string]string // link path → target as stored
	dirs   map[string]bool   // every folder, explicit or implied by a path under it; "." excluded
	total  int64
}

// NewTreeBuilder returns an empty builder of a tree within limits (zero fields take their
// defaults).
func NewTreeBuilder(limits Limits) *TreeBuilder {
	return &TreeBuilder{
		limits: limits.withDefaults(),
		files:  map[string][]byte{},
		links:  map[string]string{},
		dirs:   map[string]bool{},
	}
}

// cleanPath checks an entry name and returns it as a slash path relative to the root: leading
// "./" elements and, when dir is true, a trailing "/" are removed. It refuses the empty name, an
// absolute name, ".." elements, empty or "." elements in the middle, backslashes, NUL bytes and
// names that are not valid UTF-8 (named quoted, as with backslashes and NUL bytes). The
// root itself comes back as ".".
func cleanPath(name string, dir bool) (string, error) {
	p := name
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	if dir {
		p = strings.TrimSuffix(p, "/")
	}
	switch {
	case name == "":
		return "", sourceErr(`""`, ErrUnsafePath, "empty path")
	case strings.HasPrefix(name, "/"):
		return "", sourceErr(name, ErrUnsafePath, "absolute path, outside the tree")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return "", sourceErr(name, ErrUnsafePath, `path escapes the tree (".." element)`)
	case strings.ContainsAny(name, "\\\x00"):
		return "", sourceErr(strconv.Quote(name), ErrUnsafePath, "invalid path (backslash or NUL byte)")
	case !utf8.ValidString(name):
		return "", sourceErr(strconv.Quote(name), ErrUnsafePath, "file name is not valid UTF-8")
	case p == "" || p == ".":
		return ".", nil
	case !fs.ValidPath(p):
		return "", sourceErr(name, ErrUnsafePath, `invalid path (empty or "." element)`)
	}
	return p, nil
}

// AddDir records a folder (and its parents).
func (b *TreeBuilder) AddDir(name string) error {
	p, err := cleanPath(name, true)
	if err != nil {
		return err
	}
	if err := b.checkDepth(p); err != nil {
		return err
	}
	return b.addParents(p, true)
}

// checkDepth refuses a path of more than MaxDepth elements.
func (b *TreeBuilder) checkDepth(p string) error {
	if n := strings.Count(p, "/") + 1; p != "." && n > b.limits.MaxDepth {
		return sourceErr(p, ErrTooDeep, "path is %d elements deep, more than the limit of %d", n, b.limits.MaxDepth)
	}
	return nil
}

// addParents records the folders above p, and p itself when self is true.
func (b *TreeBuilder) addParents(p string, self bool) error {
	d := p
	if !self {
		d = path.Dir(p)
	}
	for d != "." && !b.dirs[d] {
		b.dirs[d] = true
		if len(b.dirs) > b.limits.MaxFiles {
			return sourceErr(".", ErrTooManyFiles, "more than %d folders (the limit)", b.limits.MaxFiles)
		}
		d = path.Dir(d)
	}
	return nil
}

// claim checks that p is new and that one more file fits the count limit.
func (b *TreeBuilder) claim(name, p string) error {
	if p == "." {
		return sourceErr(name, ErrUnsafePath, "a file cannot be the root of the tree")
	}
	if _, ok := b.files[p]; ok {
		return sourceErr(p, ErrUnsupportedFile, "duplicate entry")
	}
	if _, ok := b.links[p]; ok {
		return sourceErr(p, ErrUnsupportedFile, "duplicate entry")
	}
	if len(b.files)+len(b.links) >= b.limits.MaxFiles {
		return sourceErr(".", ErrTooManyFiles, "more than %d files (the limit), at %s", b.limits.MaxFiles, p)
	}
	if err := b.checkDepth(p); err != nil {
		return err
	}
	return b.addParents(p, false)
}

// AddFile records a regular file of the given size; read is called only when the size fits the
// limits and must return exactly size bytes.
func (b *TreeBuilder) AddFile(name string, size int64, read func() ([]byte, error)) error {
	p, err := cleanPath(name, false)
	if err != nil {
		return err
	}
	if err := b.claim(name, p); err != nil {
		return err
	}
	if err := b.checkSize(p, size); err != nil {
		return err
	}
	data, err := read()
	if err != nil {
		return sourceErr(p, ErrUnsupportedFile, "cannot read file: %v", err)
	}
	if int64(len(data)) != size {
		return sourceErr(p, ErrUnsupportedFile, "file changed while read (%d bytes, expected %d)", len(data), size)
	}
	b.files[p] = data
	b.total += int64(len(data))
	return nil
}

// checkSize refuses a file over MaxFileSize or one that takes the total over MaxTotalSize.
func (b *TreeBuilder) checkSize(p string, size int64) error {
	if size > b.limits.MaxFileSize {
		return sourceErr(p, ErrTooLarge, "file is %d bytes, more than the limit of %d bytes", size, b.limits.MaxFileSize)
	}
	if b.total+size > b.limits.MaxTotalSize {
		return sourceErr(".", ErrTooLarge, "files total more than the limit of %d bytes (reached at %s)", b.limits.MaxTotalSize, p)
	}
	return nil
}

// AddLink records a symbolic link. A target that is absolute or leaves the tree by its ".."
// elements is refused at once; the rest is checked when the link is resolved (Finish).
func (b *TreeBuilder) AddLink(name, target string) error {
	p, err := cleanPath(name, false)
	if err != nil {
		return err
	}
	if err := checkLinkTarget(p, target); err != nil {
		return err
	}
	if err := b.claim(name, p); err != nil {
		return err
	}
	b.links[p] = target
	return nil
}

// checkLinkTarget refuses a link target that is empty, absolute or leaves the tree when joined to
// the link's folder.
func checkLinkTarget(link, target string) error {
	switch {
	case target == "":
		return sourceErr(link, ErrUnsupportedFile, "symlink with an empty target")
	case path.IsAbs(target) || strings.ContainsAny(target, "\\\x00"):
		return sourceErr(link, ErrUnsafePath, "symlink to %q leaves the tree", target)
	}
	if j := path.Join(path.Dir(link), target); j == ".." || strings.HasPrefix(j, "../") {
		return sourceErr(link, ErrUnsafePath, "symlink to %q leaves the tree", target)
	}
	return nil
}

// resolve follows the links on the way to link (itself a link) and returns the regular file it
// names. Every hop is checked again, so a chain through a folder link cannot leave the tree.
func (b *TreeBuilder) resolve(link string) (string, error) {
	hops := 0
	rest := strings.Split(link, "/")
	cur := "."
	for len(rest) > 0 {
		next := path.Join(cur, rest[0])
		rest = rest[1:]
		if target, ok := b.links[next]; ok {
			if hops++; hops > maxLinkHops {
				return "", sourceErr(link, ErrUnsupportedFile, "too many levels of symbolic links")
			}
			if err := checkLinkTarget(next, target); err != nil {
				return "", sourceErr(link, ErrUnsafePath, "symlink leaves the tree (through %s → %q)", next, target)
			}
			joined := path.Join(path.Dir(next), target)
			cur = "."
			if joined != "." {
				rest = append(strings.Split(joined, "/"), rest...)
			}
			continue
		}
		if _, ok := b.files[next]; ok {
			if len(rest) > 0 {
				return "", sourceErr(link, ErrUnsupportedFile, "broken symlink (%s is a file, not a folder)", next)
			}
			return next, nil
		}
		if !b.dirs[next] {
			return "", sourceErr(link, ErrUnsupportedFile, "broken symlink (%s does not exist)", next)
		}
		cur = next
	}
	return "", sourceErr(link, ErrUnsupportedFile, "symlink to a folder is not supported")
}

// Finish checks that no file sits under another file or link, resolves the links and returns the
// tree.
func (b *TreeBuilder) Finish() (*Tree, error) {
	for _, p := range sortedKeys(b.files) {
		if err := b.checkParents(p); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedKeys(b.links) {
		if err := b.checkParents(p); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedKeys(b.links) {
		target, err := b.resolve(p)
		if err != nil {
			return nil, err
		}
		data := b.files[target]
		if err := b.checkSize(p, int64(len(data))); err != nil {
			return nil, err
		}
		b.total += int64(len(data))
	}
	files := make(map[string][]byte, len(b.files)+len(b.links))
	for p, data := range b.files {
		files[p] = data
	}
	for p := range b.links {
		target, err := b.resolve(p)
		if err != nil {
			return nil, err
		}
		files[p] = b.files[target]
	}
	return newTree(files, b.dirs), nil
}

// checkParents refuses a path whose folder is a file or a link, or that is also a folder.
func (b *TreeBuilder) checkParents(p string) error {
	if b.dirs[p] {
		return sourceErr(p, ErrUnsupportedFile, "both a file and a folder")
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if _, ok := b.files[d]; ok {
			return sourceErr(p, ErrUnsupportedFile, "%s is a file, not a folder", d)
		}
		if _, ok := b.links[d]; ok {
			return sourceErr(p, ErrUnsupportedFile, "%s is a symlink; entries under a symlink are not supported", d)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FromFiles builds a source tree from a map of slash paths to file contents (the JSON form of a
// hosted source version, CONTRACT §3). Paths are checked as ReadTarGz checks them, and limits
// applies (zero fields take their defaults).
func FromFiles(files map[string]string, limits Limits) (fs.FS, error) {
	b := NewTreeBuilder(limits)
	for _, name := range sortedKeys(files) {
		content := files[name]
		if err := b.AddFile(name, int64(len(content)), func() ([]byte, error) { return []byte(content), nil }); err != nil {
			return nil, err
		}
	}
	return asFS(b.Finish())
}

// asFS returns a Finish result as an fs.FS, nil (not a nil *Tree) on error.
func asFS(t *Tree, err error) (fs.FS, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Digest returns "sha256:<hex>" of the canonical form of the tree: for each regular file in byte
// order of its slash path, the path, a NUL byte, its size in decimal, a NUL byte, the hex SHA-256
// of its content and a newline, all hashed with SHA-256. Folders, modification times and modes
// play no part, so the same files give the same digest whatever their origin or order. A symbolic
// link inside the tree counts as a copy of its target; trees that break the rules of ReadTarGz or
// exceed DefaultLimits are refused (a tree built by this package under larger limits is digested
// as it is).
func Digest(fsys fs.FS) (string, error) {
	m, err := Snapshot(fsys, Limits{})
	if err != nil {
		return "", err
	}
	return m.Digest(), nil
}

// digestFiles computes the Digest of a map of files.
func digestFiles(files map[string][]byte) string {
	h := sha256.New()
	var line []byte
	for _, p := range sortedKeys(files) {
		data := files[p]
		sum := sha256.Sum256(data)
		line = append(line[:0], p...)
		line = append(line, 0)
		line = strconv.AppendInt(line, int64(len(data)), 10)
		line = append(line, 0)
		line = hex.AppendEncode(line, sum[:])
		line = append(line, '\n')
		h.Write(line) //nolint:errcheck // hash writes do not fail
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Snapshot returns fsys as an in-memory tree within limits (zero fields take their defaults). A
// Tree is returned as it is once its totals are checked; any other fs.FS is read in full, with
// symbolic links read through fs.ReadLinkFS, under the rules of TreeBuilder.
func Snapshot(fsys fs.FS, limits Limits) (*Tree, error) {
	if m, ok := fsys.(*Tree); ok {
		if err := m.check(limits.withDefaults()); err != nil {
			return nil, err
		}
		return m, nil
	}
	b := NewTreeBuilder(limits)
	pending := []string{"."}
	for len(pending) > 0 {
		dir := pending[0]
		pending = pending[1:]
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return nil, sourceErr(dir, ErrUnsupportedFile, "cannot read folder: %v", err)
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if strings.Contains(e.Name(), "/") {
				return nil, sourceErr(p, ErrUnsafePath, "invalid name %q", e.Name())
			}
			switch mode := e.Type(); {
			case mode.IsDir():
				if err := b.AddDir(p); err != nil {
					return nil, err
				}
				pending = append(pending, p)
			case mode&fs.ModeSymlink != 0:
				target, err := fs.ReadLink(fsys, p)
				if err != nil {
					return nil, sourceErr(p, ErrUnsupportedFile, "cannot read symlink: %v", err)
				}
				if err := b.AddLink(p, target); err != nil {
					return nil, err
				}
			case mode.IsRegular():
				info, err := e.Info()
				if err != nil {
					return nil, sourceErr(p, ErrUnsupportedFile, "cannot read file: %v", err)
				}
				if err := b.AddFile(p, info.Size(), readFile(fsys, p, info.Size())); err != nil {
					return nil, err
				}
			default:
				return nil, sourceErr(p, ErrUnsupportedFile, "not a regular file or folder (%v)", mode)
			}
		}
	}
	return b.Finish()
}

// readFile returns a function reading file p of fsys, which was listed with the given size.
func readFile(fsys fs.FS, p string, size int64) func() ([]byte, error) {
	return func() ([]byte, error) {
		f, err := fsys.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close() //nolint:errcheck // read-only file
		return readExactly(f, size)
	}
}

// readExactly reads size bytes from r into a buffer of that size, and fails when r holds fewer
// or more (a file that changed since it was listed).
func readExactly(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("shorter than its %d bytes: %w", size, err)
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n > 0 {
		return nil, fmt.Errorf("longer than its %d bytes", size)
	}
	return data, nil
}

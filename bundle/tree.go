package bundle

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tree is an immutable in-memory source tree: regular files and folders only, read-only modes
// (0444 files, 0555 folders), zero modification times, within the Limits it was built under.
// Every tree this package returns is one (a TreeBuilder makes them), so it can be shared between
// goroutines and digested once.
type Tree struct {
	files   map[string][]byte
	dirs    map[string][]fs.DirEntry // folder ("." for the root) → entries sorted by name
	total   int64
	largest string // path of the largest file ("" for an empty tree)

	digestOnce sync.Once
	digest     string
}

var (
	_ fs.ReadFileFS = (*Tree)(nil)
	_ fs.ReadDirFS  = (*Tree)(nil)
	_ fs.StatFS     = (*Tree)(nil)
)

// newTree builds the tree from its files and folders (folders above every file must be in dirs).
// It takes ownership of both maps' contents.
func newTree(files map[string][]byte, dirs map[string]bool) *Tree {
	m := &Tree{files: files, dirs: map[string][]fs.DirEntry{".": nil}}
	for d := range dirs {
		m.dirs[d] = m.dirs[d] // keep empty folders
		parent := path.Dir(d)
		m.dirs[parent] = append(m.dirs[parent], fs.FileInfoToDirEntry(dirInfo(d)))
	}
	for p, data := range files {
		parent := path.Dir(p)
		m.dirs[parent] = append(m.dirs[parent], fs.FileInfoToDirEntry(fileInfo{name: path.Base(p), size: int64(len(data))}))
		m.total += int64(len(data))
		if m.largest == "" || len(data) > len(files[m.largest]) || (len(data) == len(files[m.largest]) && p < m.largest) {
			m.largest = p
		}
	}
	for _, entries := range m.dirs {
		slices.SortFunc(entries, func(a, b fs.DirEntry) int {
			switch {
			case a.Name() < b.Name():
				return -1
			case a.Name() > b.Name():
				return 1
			}
			return 0
		})
	}
	return m
}

// check applies limits to a tree already built (possibly under other limits).
func (m *Tree) check(limits Limits) error {
	if len(m.files) > limits.MaxFiles {
		return sourceErr(".", ErrTooManyFiles, "more than %d files (the limit)", limits.MaxFiles)
	}
	if len(m.dirs)-1 > limits.MaxFiles {
		return sourceErr(".", ErrTooManyFiles, "more than %d folders (the limit)", limits.MaxFiles)
	}
	for d := range m.dirs {
		for _, e := range m.dirs[d] {
			if p := path.Join(d, e.Name()); strings.Count(p, "/")+1 > limits.MaxDepth {
				return sourceErr(p, ErrTooDeep, "path is %d elements deep, more than the limit of %d", strings.Count(p, "/")+1, limits.MaxDepth)
			}
		}
	}
	if m.largest != "" && int64(len(m.files[m.largest])) > limits.MaxFileSize {
		return sourceErr(m.largest, ErrTooLarge, "file is %d bytes, more than the limit of %d bytes", len(m.files[m.largest]), limits.MaxFileSize)
	}
	if m.total > limits.MaxTotalSize {
		return sourceErr(".", ErrTooLarge, "files total %d bytes, more than the limit of %d bytes", m.total, limits.MaxTotalSize)
	}
	return nil
}

// Digest returns the tree's Digest, computed on first use.
func (m *Tree) Digest() string {
	m.digestOnce.Do(func() { m.digest = digestFiles(m.files) })
	return m.digest
}

// Len is the number of files of the tree.
func (m *Tree) Len() int { return len(m.files) }

// Size is the sum of the sizes of the tree's files, in bytes.
func (m *Tree) Size() int64 { return m.total }

// Open opens the named file or folder.
func (m *Tree) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return &memFile{info: fileInfo{name: path.Base(name), size: int64(len(data))}, Reader: bytes.NewReader(data)}, nil
	}
	if entries, ok := m.dirs[name]; ok {
		return &memDir{info: dirInfo(name), entries: entries}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile returns a copy of the named file's content.
func (m *Tree) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	data, ok := m.files[name]
	if !ok {
		if _, isDir := m.dirs[name]; isDir {
			return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
		}
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(data), nil
}

// ReadDir returns the entries of the named folder, sorted by name.
func (m *Tree) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	entries, ok := m.dirs[name]
	if !ok {
		if _, isFile := m.files[name]; isFile {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
		}
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(entries), nil
}

// Stat describes the named file or folder.
func (m *Tree) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return fileInfo{name: path.Base(name), size: int64(len(data))}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return dirInfo(name), nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// fileInfo describes a file or folder of a Tree.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func dirInfo(p string) fileInfo { return fileInfo{name: path.Base(p), dir: true} }

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.dir }
func (fi fileInfo) Sys() any           { return nil }
func (fi fileInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

// memFile is an open regular file of a Tree.
type memFile struct {
	info fileInfo
	*bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// memDir is an open folder of a Tree.
type memDir struct {
	info    fileInfo
	entries []fs.DirEntry
	offset  int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}

// ReadDir returns the next n entries (all remaining when n <= 0), as fs.ReadDirFile specifies.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.offset:]
	if n <= 0 {
		d.offset = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.offset += n
	return slices.Clone(rest[:n]), nil
}

package fsobjects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"svc/registry"
)

// tempPattern names the temporary files that Put and Copy write before
// renaming them into place. The name contains a backslash, which
// registry.ValidateKey forbids in keys, so a temporary file can never be
// taken for an object, and List and Get never show one, even one left
// behind by a crash.
const tempPattern = ".tmp\\*"

// dirPerm is the permission of the directories the store creates.
const dirPerm = 0o750

// Store keeps each object as a regular file under a root directory, at the
// key's path. It implements registry.Objects; wrap it with registry.Checked,
// which validates keys before they reach the Store.
type Store struct {
	root string
}

var _ registry.Objects = (*Store)(nil)

// New returns a Store rooted at root, creating the directory when missing.
func New(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("fsobjects: root directory is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsobjects: root directory %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("fsobjects: create root directory: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("fsobjects: root directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fsobjects: root %q is not a directory", abs)
	}
	return &Store{root: abs}, nil
}

// path maps key to its file. Keys arrive validated by registry.Checked; the
// IsLocal test is only a last guard against leaving the root if a caller
// ever forgets to wrap the Store.
func (s *Store) path(key string) (string, error) {
	rel := filepath.FromSlash(key)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: key %q leaves the store's root", registry.ErrInvalidKey, key)
	}
	return filepath.Join(s.root, rel), nil
}

// Put writes r to a temporary file next to the object, syncs it and renames
// it over the object, so readers see the old or the whole new file.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, _ int64) error {
	p, err := s.path(key)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), dirPerm); err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	err = writeAtomic(ctx, p, func(f *os.File) error {
		_, err := io.Copy(f, r)
		return err
	})
	if err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	return nil
}

// Get opens the object's file. The open file keeps reading the version it
// opened even if a Put replaces the object meanwhile.
func (s *Store) Get(_ context.Context, key string) (io.ReadCloser, registry.Info, error) {
	f, info, err := s.open(key)
	if err != nil {
		return nil, registry.Info{}, fmt.Errorf("get %q: %w", key, err)
	}
	return f, info, nil
}

// Stat describes the object's file.
func (s *Store) Stat(_ context.Context, key string) (registry.Info, error) {
	p, err := s.path(key)
	if err != nil {
		return registry.Info{}, fmt.Errorf("stat: %w", err)
	}
	fi, err := os.Stat(p)
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist // a directory holds other keys; it is not an object
	}
	if err != nil {
		return registry.Info{}, fmt.Errorf("stat %q: %w", key, notFound(err))
	}
	return registry.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Copy copies src's bytes into a temporary file next to dst (in-kernel with
// copy_file_range where the filesystem has it) and renames it over dst.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	in, _, err := s.open(src)
	if err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	defer func() { _ = in.Close() }() // read-only: a Close error cannot lose data
	p, err := s.path(dst)
	if err != nil {
		return fmt.Errorf("copy to: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), dirPerm); err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	err = writeAtomic(ctx, p, func(f *os.File) error {
		_, err := io.Copy(f, in)
		return err
	})
	if err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	return nil
}

// Delete removes the object's file. Empty directories are left in place: a
// concurrent Put may be about to write into them.
func (s *Store) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return nil // a directory holds other keys; no object has this key
	}
	if err := os.Remove(p); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	return nil
}

// List walks the directory that holds prefix's complete segments, skipping
// subdirectories that cannot match and temporary files.
func (s *Store) List(ctx context.Context, prefix string) ([]registry.Info, error) {
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		p, err := s.path(prefix[:i])
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		start = p
	}
	var out []registry.Info
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotFound(err) {
				return nil // removed during the walk, or the prefix's directory does not exist
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == s.root {
			return nil
		}
		if strings.ContainsRune(d.Name(), '\\') {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil // a temporary file (tempPattern)
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			dirKey := key + "/"
			if !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if isNotFound(err) {
				return nil // deleted during the walk
			}
			return err
		}
		out = append(out, registry.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	// The walk is in file-name order per directory, which is not key order
	// ("a-b" sorts before "a/b" but its file comes after directory "a").
	slices.SortFunc(out, func(a, b registry.Info) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// open opens key's file for reading; a missing key or a directory is
// registry.ErrNotFound.
func (s *Store) open(key string) (*os.File, registry.Info, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, registry.Info{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, registry.Info{}, notFound(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		_ = f.Close() // the Stat error is the one to report
		return nil, registry.Info{}, notFound(err)
	}
	return f, registry.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// writeAtomic creates a temporary file in p's directory, lets fill write
// it, syncs it, and renames it to p, then syncs the directory so the rename
// survives a crash. On any failure, ctx being done included, the temporary
// file is removed and p is untouched.
func writeAtomic(ctx context.Context, p string, fill func(*os.File) error) (err error) {
	dir := filepath.Dir(p)
	f, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				_ = f.Close() // already failing; the first error is the one to report
			}
			_ = os.Remove(tmp) // best effort; List and Get ignore temporary files anyway
		}
	}()
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir flushes a directory's entries to disk. Filesystems that cannot
// sync a directory (EINVAL) are left as they are.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	cerr := d.Close()
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync directory: %w", err)
	}
	return cerr
}

// isNotFound reports whether err means that no file is at the path: it or
// one of its parents is missing, or a parent is a file (ENOTDIR).
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// notFound turns a missing file into registry.ErrNotFound and returns other
// errors unchanged.
func notFound(err error) error {
	if isNotFound(err) {
		return registry.ErrNotFound
	}
	return err
}

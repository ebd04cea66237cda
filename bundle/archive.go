package bundle

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// The source archive is how a hosted source version is uploaded (POST .../source-versions with a
// tar.gz body) and how it is stored (registry.SourceVersions keeps the bytes WriteTarGz gives):
// a gzip-compressed tar of the tree. ReadTarGz reads any such archive; WriteTarGz writes the
// canonical one.

// ReadTarGz reads a gzip-compressed tar archive of a source tree (a hosted source version, CONTRACT
// §3) into an in-memory tree. The archive's root is the tree's root (a leading "./" is allowed).
// Regular files and folders are kept; a symbolic or hard link to a file inside the tree becomes a
// copy of it. The first of these refuses the whole archive, with the entry named: an absolute path
// or ".." element (ErrUnsafePath), a link that leaves the tree (ErrUnsafePath), a link to a folder,
// a device, pipe or other special entry, a duplicate path (ErrUnsupportedFile), a file, the total or
// the file count over limits (ErrTooLarge, ErrTooManyFiles). Zero fields of limits take their
// defaults. Bytes after the archive's end are ignored.
func ReadTarGz(r io.Reader, limits Limits) (fs.FS, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("read tar.gz: %w", err)
	}
	defer zr.Close() //nolint:errcheck // the reader has been consumed or the error below says more
	b := NewTreeBuilder(limits)
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tar.gz: %w", err)
		}
		if err := b.addTarEntry(hdr, tr); err != nil {
			return nil, err
		}
	}
	return asFS(b.Finish())
}

// addTarEntry records one archive entry.
func (b *TreeBuilder) addTarEntry(hdr *tar.Header, tr *tar.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA still appears in old archives
		return b.AddFile(hdr.Name, hdr.Size, func() ([]byte, error) { return readExactly(tr, hdr.Size) })
	case tar.TypeDir:
		return b.AddDir(hdr.Name)
	case tar.TypeSymlink:
		return b.AddLink(hdr.Name, hdr.Linkname)
	case tar.TypeLink:
		// A hard link names another entry by its path from the archive's root; record it as a
		// symbolic link relative to the link's folder so both resolve alike.
		target, err := cleanPath(hdr.Linkname, false)
		if err != nil {
			p, _ := cleanPath(hdr.Name, false)
			if p == "" {
				p = hdr.Name
			}
			return sourceErr(p, ErrUnsafePath, "hard link to %q leaves the tree", hdr.Linkname)
		}
		p, err := cleanPath(hdr.Name, false)
		if err != nil {
			return err
		}
		return b.AddLink(p, relativeTo(path.Dir(p), target))
	case tar.TypeXGlobalHeader:
		return nil // metadata only; archive/tar applies it
	default:
		p, err := cleanPath(hdr.Name, false)
		if err != nil {
			return err
		}
		return sourceErr(p, ErrUnsupportedFile, "not a regular file, folder or link (tar type %q)", hdr.Typeflag)
	}
}

// relativeTo returns the relative path from folder dir to target, both clean slash paths from the
// root.
func relativeTo(dir, target string) string {
	if dir == "." {
		return target
	}
	up := ""
	for d := dir; d != "."; d = path.Dir(d) {
		up += "../"
	}
	return up + target
}

// WriteTarGz writes the regular files of fsys to w as a deterministic tar.gz: entries in path
// order, folders implied, mode 0644, zero times and owners. The same files give the same bytes,
// and ReadTarGz reads them back into the same tree. A symbolic link or other special file of fsys
// is an error (a Tree holds none).
func WriteTarGz(w io.Writer, fsys fs.FS) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("pack source tree: %w", err)
	}
	tw := tar.NewWriter(zw)
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(data))}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return fmt.Errorf("pack source tree: %w", err)
	}
	return nil
}

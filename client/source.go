package client

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Limits of a source tree packed by PackDir; they are the platform's own (CONTRACT §5), checked
// before anything is sent so that the error names the file. A tree exactly at a limit is packed.
const (
	MaxSourceFileSize  = 5 << 20  // bytes per file
	MaxSourceTotalSize = 50 << 20 // bytes over all files
	MaxSourceFiles     = 10000    // files and links
)

// ErrStreamCut is wrapped by FollowLogs's error when the connection broke while the log streamed
// (the server went away): the build itself goes on.
var ErrStreamCut = errors.New("client: the server closed the log stream before the build finished")

// ErrSourceTooLarge is wrapped by PackDir's errors for a file, a total or a file count over the
// limits above.
var ErrSourceTooLarge = errors.New("client: source tree over the limits")

// PackDir writes the folder dir to w as a gzip-compressed tar archive rooted at the folder: regular
// files and symbolic links (kept as links; the platform refuses those that leave the tree), in
// lexical order, with fixed modes, owners and times, so the same tree always gives the same bytes.
// Every .git folder or file is left out, nothing else. Other kinds of entries (sockets, devices) are
// refused, naming the path.
func PackDir(dir string, w io.Writer) error {
	return packDir(dir, w, packLimits{file: MaxSourceFileSize, total: MaxSourceTotalSize, files: MaxSourceFiles})
}

// packLimits are the limits packDir enforces (tests use small ones to reach the edges cheaply).
type packLimits struct {
	file, total int64
	files       int
}

func packDir(dir string, w io.Writer, limits packLimits) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("pack %s: not a folder", dir)
	}
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	tw := tar.NewWriter(zw)
	var files int
	var total int64
	epoch := time.Unix(0, 0).UTC()
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		hdr := &tar.Header{Name: name, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, filepath.ToSlash(target), 0o777
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Size() > limits.file {
				return fmt.Errorf("%s is %d bytes, more than the limit of %d bytes: %w", name, info.Size(), limits.file, ErrSourceTooLarge)
			}
			total += info.Size()
			if total > limits.total {
				return fmt.Errorf("files total more than the limit of %d bytes (reached at %s): %w", limits.total, name, ErrSourceTooLarge)
			}
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, info.Size(), 0o644
		default:
			return fmt.Errorf("%s is not a regular file, folder or link", name)
		}
		files++
		if files > limits.files {
			return fmt.Errorf("more than %d files (the limit), at %s: %w", limits.files, name, ErrSourceTooLarge)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			return copyFile(tw, p, hdr.Size)
		}
		return nil
	})
	if walkErr != nil {
		return fmt.Errorf("pack %s: %w", dir, walkErr)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return nil
}

// copyFile copies exactly size bytes of the file at p into w; a file that changed size while
// being packed is an error.
func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only file
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%s changed while being packed", p)
	}
	return nil
}

// UploadSource saves a tar.gz source tree as a new source version of the agent. A tree the platform
// refuses is a *Error with Code INVALID_SOURCE and every Problem.
func (c *Client) UploadSource(ctx context.Context, agentID string, archive io.Reader) (SourceVersion, error) {
	req, err := c.newRequest(ctx, http.MethodPost, c.endpoint("/api/agents/%s/source-versions", agentID), nil)
	if err != nil {
		return SourceVersion{}, err
	}
	req.Body = io.NopCloser(archive)
	if b, ok := archive.(*bytes.Reader); ok {
		req.ContentLength = int64(b.Len())
		snapshot := *b
		req.GetBody = func() (io.ReadCloser, error) { r := snapshot; return io.NopCloser(&r), nil }
	}
	if p, ok := archive.(*progressReader); ok {
		req.ContentLength = p.total
	}
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := c.send(req)
	if err != nil {
		return SourceVersion{}, fmt.Errorf("upload source of %s: %w", agentID, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	var sv SourceVersion
	if err := decodeBody(resp, &sv); err != nil {
		return SourceVersion{}, fmt.Errorf("upload source of %s: %w", agentID, err)
	}
	return sv, nil
}

// UploadDir packs the folder dir with PackDir and saves it as a new source version of the agent.
func (c *Client) UploadDir(ctx context.Context, agentID, dir string) (SourceVersion, error) {
	return c.UploadDirProgress(ctx, agentID, dir, nil)
}

// UploadDirProgress is UploadDir that calls progress (when not nil) once the folder is packed,
// with sent 0, and then as the archive is sent, with the bytes sent so far and the total.
func (c *Client) UploadDirProgress(ctx context.Context, agentID, dir string, progress func(sent, total int64)) (SourceVersion, error) {
	var buf bytes.Buffer
	if err := PackDir(dir, &buf); err != nil {
		return SourceVersion{}, err
	}
	if progress == nil {
		return c.UploadSource(ctx, agentID, bytes.NewReader(buf.Bytes()))
	}
	total := int64(buf.Len())
	progress(0, total)
	return c.UploadSource(ctx, agentID, &progressReader{r: bytes.NewReader(buf.Bytes()), total: total, report: progress})
}

// progressReader reports the bytes read through it.
type progressReader struct {
	r           io.Reader
	sent, total int64
	report      func(sent, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.sent += int64(n)
		p.report(p.sent, p.total)
	}
	return n, err
}

// Package bundletest makes source archives for tests: tar.gz bytes holding any entries in any
// order, with any modes and times, including the ones bundle.ReadTarGz must refuse.
package bundletest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
	"testing"
	"time"
)

// Entry is one entry of a test archive.
type Entry struct {
	Name string
	Body string
	// Size, when Body is empty and Size > 0, makes the file that many zero bytes.
	Size int64
	// Type is the tar type flag; tar.TypeReg when 0.
	Type    byte
	Link    string
	Mode    int64 // 0644 when 0
	ModTime time.Time
}

// TarGz builds a gzip-compressed tar archive of entries, in the order given.
func TarGz(tb testing.TB, entries []Entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	// Stored blocks: the archives of the limit tests are 50 MiB of zeros, cheap to copy, slow to deflate under -race.
	zw, err := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	if err != nil {
		tb.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	zeros := make([]byte, 1<<20)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Linkname: e.Link, Mode: e.Mode, ModTime: e.ModTime}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
			if e.Body == "" {
				hdr.Size = e.Size
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if e.Body != "" {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		for left := e.Size; left > 0; {
			n := min(left, int64(len(zeros)))
			if _, err := tw.Write(zeros[:n]); err != nil {
				tb.Fatal(err)
			}
			left -= n
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Entries lists files (slash path → content) as archive entries in byte order of their paths.
func Entries(files map[string]string) []Entry {
	entries := make([]Entry, 0, len(files))
	for p, body := range files {
		entries = append(entries, Entry{Name: p, Body: body})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries
}

package objectstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/registry"
)

// NewStore makes a fresh, empty store for one test or benchmark; it
// registers its own cleanup with tb. It may return the backend bare or
// already wrapped: Run and Bench wrap it with registry.Checked, as every
// production caller does.
type NewStore func(tb testing.TB) registry.Objects

// Run runs the registry.Objects conformance suite, one subtest per
// behaviour of the contract, each on a fresh store from newStore.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, s registry.Objects)
	}{
		{"PutGetRoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"Stat", testStat},
		{"MissingKey", testMissing},
		{"DeleteIdempotent", testDelete},
		{"CopyIndependence", testCopy},
		{"ListPrefixSorted", testList},
		{"InvalidKeys", testInvalidKeys},
		{"MaxKeyLen", testMaxKeyLen},
		{"SizeMismatch", testSizeMismatch},
		{"FailedPutLeavesNothing", testFailedPut},
		{"LargeObject", testLarge},
		{"ConcurrentPutsSameKey", testConcurrentPuts},
		{"ContextCancelled", testContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, registry.Checked(newStore(t)))
		})
	}
}

func testRoundTrip(t *testing.T, s registry.Objects) {
	tests := []struct {
		name string
		key  string
		data []byte
	}{
		{"empty", "rt/empty", nil},
		{"one byte", "rt/one", []byte{0}},
		{"text", "rt/text.txt", []byte("hello, objects\n")},
		{"binary 64KiB+3", "rt/deep/er/blob.bin", randomBytes(64<<10+3, 1)},
		{"unicode and spaces", "rt/ünï cödé/with space & symbols+=.txt", []byte("ü")},
		{"top level", "toplevel", []byte("top")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			put(t, s, tt.key, tt.data)
			got, info := get(t, s, tt.key)
			if !bytes.Equal(got, tt.data) {
				t.Errorf("Get(%q) = %d bytes, want the %d put", tt.key, len(got), len(tt.data))
			}
			if info.Key != tt.key || info.Size != int64(len(tt.data)) || info.ModTime.IsZero() {
				t.Errorf("Get(%q) info = %+v, want key %q, size %d and a ModTime", tt.key, info, tt.key, len(tt.data))
			}
			st, err := s.Stat(ctx, tt.key)
			if err != nil {
				t.Fatalf("Stat(%q) = %v", tt.key, err)
			}
			if st.Key != info.Key || st.Size != info.Size {
				t.Errorf("Stat(%q) = %+v, want the Get info %+v", tt.key, st, info)
			}
		})
	}
}

func testOverwrite(t *testing.T, s registry.Objects) {
	long, short := randomBytes(100<<10, 2), []byte("short")
	put(t, s, "ow/key", long)
	put(t, s, "ow/key", short)
	got, info := get(t, s, "ow/key")
	if !bytes.Equal(got, short) || info.Size != int64(len(short)) {
		t.Errorf("after overwrite Get = %q (size %d), want %q: no bytes of the old version may remain", trunc(got), info.Size, short)
	}
	put(t, s, "ow/key", long)
	if got, _ := get(t, s, "ow/key"); !bytes.Equal(got, long) {
		t.Errorf("after second overwrite Get = %d bytes, want the %d of the long version", len(got), len(long))
	}
}

func testStat(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	data := randomBytes(12345, 3)
	put(t, s, "stat/obj", data)
	got, err := s.Stat(ctx, "stat/obj")
	if err != nil {
		t.Fatalf("Stat = %v", err)
	}
	if got.Key != "stat/obj" || got.Size != int64(len(data)) || got.ModTime.IsZero() {
		t.Errorf("Stat = %+v, want key stat/obj, size %d, a ModTime", got, len(data))
	}
	put(t, s, "stat/obj", data[:7])
	if got, err := s.Stat(ctx, "stat/obj"); err != nil || got.Size != 7 {
		t.Errorf("Stat after overwrite = %+v, %v; want size 7", got, err)
	}
}

func testMissing(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	put(t, s, "m/file", []byte("f"))
	put(t, s, "m/dir/child", []byte("c"))
	put(t, s, "m/dst", []byte("dst"))
	for _, key := range []string{
		"m/never",
		"m/file/below", // under an object: a file on filesystems
		"m/dir",        // above an object: a directory on filesystems
		"elsewhere/x",
	} {
		t.Run(key, func(t *testing.T) {
			rc, info, err := s.Get(ctx, key)
			if !errors.Is(err, registry.ErrNotFound) || rc != nil {
				t.Errorf("Get(%q) = (%v, %+v, %v), want (nil, {}, ErrNotFound)", key, rc, info, err)
			}
			if rc != nil {
				_ = rc.Close() // already failing the test
			}
			if _, err := s.Stat(ctx, key); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("Stat(%q) = %v, want ErrNotFound", key, err)
			}
			if err := s.Copy(ctx, key, "m/dst"); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("Copy(%q, m/dst) = %v, want ErrNotFound", key, err)
			}
			if got, _ := get(t, s, "m/dst"); string(got) != "dst" {
				t.Errorf("failed Copy changed m/dst to %q", trunc(got))
			}
		})
	}
}

func testDelete(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	put(t, s, "del/a", []byte("a"))
	put(t, s, "del/dir/keep", []byte("keep"))
	if err := s.Delete(ctx, "del/a"); err != nil {
		t.Fatalf("Delete(del/a) = %v", err)
	}
	if _, err := s.Stat(ctx, "del/a"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("Stat after Delete = %v, want ErrNotFound", err)
	}
	for _, key := range []string{"del/a", "del/never", "nowhere/at/all", "del/dir", "del/dir/keep/below"} {
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) of a missing key = %v, want nil", key, err)
		}
	}
	if got, _ := get(t, s, "del/dir/keep"); string(got) != "keep" {
		t.Errorf("deleting the missing key del/dir removed del/dir/keep (now %q)", trunc(got))
	}
	put(t, s, "del/a", []byte("again"))
	if got, _ := get(t, s, "del/a"); string(got) != "again" {
		t.Errorf("Put after Delete: Get = %q, want again", trunc(got))
	}
}

func testCopy(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	v1, v2 := randomBytes(70<<10, 4), []byte("version two")
	put(t, s, "cp/src", v1)
	if err := s.Copy(ctx, "cp/src", "cp/deep/er/dst"); err != nil {
		t.Fatalf("Copy = %v", err)
	}
	if got, info := get(t, s, "cp/deep/er/dst"); !bytes.Equal(got, v1) || info.Size != int64(len(v1)) || info.Key != "cp/deep/er/dst" {
		t.Fatalf("copy = %d bytes, info %+v; want the %d bytes of src under its own key", len(got), info, len(v1))
	}
	put(t, s, "cp/src", v2)
	if got, _ := get(t, s, "cp/deep/er/dst"); !bytes.Equal(got, v1) {
		t.Errorf("overwriting src changed the copy to %q", trunc(got))
	}
	if err := s.Delete(ctx, "cp/src"); err != nil {
		t.Fatal(err)
	}
	if got, _ := get(t, s, "cp/deep/er/dst"); !bytes.Equal(got, v1) {
		t.Errorf("deleting src changed the copy to %q", trunc(got))
	}
	// Copy replaces an existing destination, and the new copy is independent too.
	put(t, s, "cp/src", v2)
	if err := s.Copy(ctx, "cp/src", "cp/deep/er/dst"); err != nil {
		t.Fatalf("Copy onto existing = %v", err)
	}
	if got, _ := get(t, s, "cp/deep/er/dst"); !bytes.Equal(got, v2) {
		t.Errorf("Copy onto existing dst: Get = %q, want %q", trunc(got), v2)
	}
	put(t, s, "cp/deep/er/dst", []byte("changed dst"))
	if got, _ := get(t, s, "cp/src"); !bytes.Equal(got, v2) {
		t.Errorf("overwriting the copy changed src to %q", trunc(got))
	}
	// Copy onto itself is a no-op that still requires the object.
	if err := s.Copy(ctx, "cp/src", "cp/src"); err != nil {
		t.Errorf("Copy onto itself = %v, want nil", err)
	}
	if got, _ := get(t, s, "cp/src"); !bytes.Equal(got, v2) {
		t.Errorf("Copy onto itself changed it to %q", trunc(got))
	}
	if err := s.Copy(ctx, "cp/none", "cp/none"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("Copy of a missing key onto itself = %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	// Put in an order that is neither sorted nor reverse sorted.
	keys := []string{"list/b/x", "list/a/c/d", "other/z", "list/ab", "list/a/b", "list/a-b", "list/a.b/c"}
	for i, key := range keys {
		put(t, s, key, bytes.Repeat([]byte{'x'}, i+1))
	}
	sizes := map[string]int64{}
	for i, key := range keys {
		sizes[key] = int64(i + 1)
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"list/a-b", "list/a.b/c", "list/a/b", "list/a/c/d", "list/ab", "list/b/x", "other/z"}},
		{"list/", []string{"list/a-b", "list/a.b/c", "list/a/b", "list/a/c/d", "list/ab", "list/b/x"}},
		{"list/a", []string{"list/a-b", "list/a.b/c", "list/a/b", "list/a/c/d", "list/ab"}},
		{"list/a/", []string{"list/a/b", "list/a/c/d"}},
		{"list/a/c", []string{"list/a/c/d"}},
		{"list/a/c/d", []string{"list/a/c/d"}},
		{"list/a/c/d/", nil},
		{"li", []string{"list/a-b", "list/a.b/c", "list/a/b", "list/a/c/d", "list/ab", "list/b/x"}},
		{"nothing/", nil},
		{"nothing", nil},
		{"list/a/..", nil}, // a partial last segment is a string prefix, not a path step
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("prefix %q", tt.prefix), func(t *testing.T) {
			infos, err := s.List(ctx, tt.prefix)
			if err != nil {
				t.Fatalf("List(%q) = %v", tt.prefix, err)
			}
			var got []string
			for _, info := range infos {
				got = append(got, info.Key)
				if info.Size != sizes[info.Key] || info.ModTime.IsZero() {
					t.Errorf("List(%q) info %+v, want size %d and a ModTime", tt.prefix, info, sizes[info.Key])
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("List(%q) keys (-want +got):\n%s", tt.prefix, diff)
			}
		})
	}
	if err := s.Delete(ctx, "list/a/b"); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "list/a/")
	if err != nil || len(infos) != 1 || infos[0].Key != "list/a/c/d" {
		t.Errorf("List after Delete = %+v, %v; want only list/a/c/d", infos, err)
	}
}

// invalidKeys breaks each rule of registry.ValidateKey once.
var invalidKeys = []string{
	"",
	"/abs",
	"a//b",
	"trailing/",
	"../escape",
	"a/../b",
	"a/./b",
	".",
	"..",
	`back\slash`,
	"nul\x00byte",
	"bad-utf8-\xff",
	strings.Repeat("k", registry.MaxKeyLen+1),
}

func testInvalidKeys(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	put(t, s, "valid", []byte("v"))
	for _, key := range invalidKeys {
		t.Run(fmt.Sprintf("%.20q", key), func(t *testing.T) {
			checks := map[string]error{
				"Put":          s.Put(ctx, key, strings.NewReader("x"), 1),
				"Stat":         second(s.Stat(ctx, key)),
				"Delete":       s.Delete(ctx, key),
				"Copy src":     s.Copy(ctx, key, "valid-copy"),
				"Copy dst":     s.Copy(ctx, "valid", key),
				"List (as is)": second(s.List(ctx, key)),
			}
			rc, _, err := s.Get(ctx, key)
			if rc != nil {
				_ = rc.Close() // already failing the test
			}
			checks["Get"] = err
			for op, err := range checks {
				if op == "List (as is)" && (key == "" || strings.HasSuffix(key, "/") || key == "." || key == ".." ||
					strings.HasSuffix(key, "/..")) {
					continue // valid as a prefix: empty, or a partial or empty last segment
				}
				if !errors.Is(err, registry.ErrInvalidKey) {
					t.Errorf("%s(%.40q) = %v, want ErrInvalidKey", op, key, err)
				}
			}
		})
	}
	for _, prefix := range []string{"/a", "../", "a//", `a\`, "a/../b", "x\x00"} {
		if _, err := s.List(ctx, prefix); !errors.Is(err, registry.ErrInvalidKey) {
			t.Errorf("List(%q) = %v, want ErrInvalidKey", prefix, err)
		}
	}
	infos, err := s.List(ctx, "")
	if err != nil || len(infos) != 1 {
		t.Errorf("after the rejected calls List = %+v, %v; want only the key valid", infos, err)
	}
}

func testMaxKeyLen(t *testing.T, s registry.Objects) {
	// Segments of 200 bytes stay within every filesystem's name limit.
	var b strings.Builder
	for b.Len() < registry.MaxKeyLen {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.Repeat("s", min(200, registry.MaxKeyLen-b.Len())))
	}
	key := b.String()
	if len(key) != registry.MaxKeyLen || strings.HasSuffix(key, "/") {
		t.Fatalf("test key has %d bytes, want %d without a trailing slash", len(key), registry.MaxKeyLen)
	}
	put(t, s, key, []byte("longest"))
	if got, info := get(t, s, key); string(got) != "longest" || info.Key != key {
		t.Errorf("Get(longest key) = %q, %+v", trunc(got), info)
	}
	infos, err := s.List(t.Context(), key)
	if err != nil || len(infos) != 1 || infos[0].Key != key {
		t.Errorf("List(longest key) = %d infos, %v; want 1", len(infos), err)
	}
	if err := s.Put(t.Context(), key+"s", strings.NewReader("x"), 1); !errors.Is(err, registry.ErrInvalidKey) {
		t.Errorf("Put(key of %d bytes) = %v, want ErrInvalidKey", len(key)+1, err)
	}
}

func testSizeMismatch(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	put(t, s, "size/existing", []byte("old"))
	tests := []struct {
		name string
		data string
		size int64
	}{
		{"shorter than size", "12345", 10},
		{"longer than size", "12345", 3},
		{"longer than size 0", "1", 0},
		{"one byte longer", "123456", 5},
		{"one byte longer, 64KiB", strings.Repeat("x", 64<<10+1), 64 << 10},
		{"shorter, 64KiB", strings.Repeat("x", 64<<10-1), 64 << 10},
		{"negative size", "12345", -2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Put(ctx, "size/new", strings.NewReader(tt.data), tt.size); err == nil {
				t.Errorf("Put(%d bytes, size %d) = nil, want an error", len(tt.data), tt.size)
			}
			if _, err := s.Stat(ctx, "size/new"); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("after the failed Put, Stat = %v, want ErrNotFound", err)
			}
			if err := s.Put(ctx, "size/existing", strings.NewReader(tt.data), tt.size); err == nil {
				t.Errorf("Put over existing (%d bytes, size %d) = nil, want an error", len(tt.data), tt.size)
			}
			if got, _ := get(t, s, "size/existing"); string(got) != "old" {
				t.Errorf("failed Put changed the object to %q", trunc(got))
			}
		})
	}
	if err := s.Put(ctx, "size/nil", nil, 0); err == nil {
		t.Error("Put(nil reader) = nil, want an error")
	}
}

func testFailedPut(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	boom := errors.New("objectstest: reader failed")
	for _, size := range []int64{-1, 1 << 20} {
		t.Run(fmt.Sprintf("size %d", size), func(t *testing.T) {
			failing := func() io.Reader {
				return io.MultiReader(bytes.NewReader(randomBytes(256<<10, 5)), errReader{boom})
			}
			if err := s.Put(ctx, "fail/new", failing(), size); err == nil {
				t.Fatal("Put of a failing reader = nil, want an error")
			}
			if _, err := s.Stat(ctx, "fail/new"); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("after the failed Put, Stat = %v, want ErrNotFound", err)
			}
			put(t, s, "fail/old", []byte("old"))
			if err := s.Put(ctx, "fail/old", failing(), size); err == nil {
				t.Fatal("Put of a failing reader = nil, want an error")
			}
			if got, _ := get(t, s, "fail/old"); string(got) != "old" {
				t.Errorf("failed Put changed the object to %q", trunc(got))
			}
			infos, err := s.List(ctx, "")
			if err != nil || len(infos) != 1 || infos[0].Key != "fail/old" {
				t.Errorf("List after failed Puts = %+v, %v; want only fail/old", infos, err)
			}
		})
	}
}

func testLarge(t *testing.T, s registry.Objects) {
	const size = 6 << 20
	tests := []struct {
		name string
		size int64 // passed to Put
	}{
		{"unknown size", -1},
		{"known size", size},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			data := randomBytes(size, uint64(10+i))
			// Hide bytes.Reader's Len, Seek and WriterTo: a plain stream.
			if err := s.Put(ctx, "large/obj", struct{ io.Reader }{bytes.NewReader(data)}, tt.size); err != nil {
				t.Fatalf("Put(6 MiB, size %d) = %v", tt.size, err)
			}
			st, err := s.Stat(ctx, "large/obj")
			if err != nil || st.Size != size {
				t.Fatalf("Stat = %+v, %v; want size %d", st, err, size)
			}
			rc, info, err := s.Get(ctx, "large/obj")
			if err != nil {
				t.Fatalf("Get = %v", err)
			}
			defer func() { _ = rc.Close() }() // read-only
			h := sha256.New()
			n, err := io.Copy(h, rc)
			if err != nil || n != size || info.Size != size {
				t.Fatalf("read %d bytes (info size %d), %v; want %d", n, info.Size, err, size)
			}
			if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
				t.Error("Get returned different bytes than were put")
			}
		})
	}
}

func testConcurrentPuts(t *testing.T, s registry.Objects) {
	ctx := t.Context()
	const (
		writers  = 8
		readers  = 3
		size     = 256 << 10
		maxReads = 200
	)
	version := func(i int) []byte { return bytes.Repeat([]byte{byte('A' + i)}, size) }
	put(t, s, "conc/key", version(writers)) // readers never see a missing key

	// whole reports whether data is one complete version.
	whole := func(data []byte) bool {
		return len(data) == size && bytes.Count(data, data[:1]) == size
	}
	done := make(chan struct{})
	var readersWG, writersWG sync.WaitGroup
	for range readers {
		readersWG.Go(func() {
			for range maxReads {
				select {
				case <-done:
					return
				default:
				}
				rc, _, err := s.Get(ctx, "conc/key")
				if err != nil {
					t.Errorf("concurrent Get = %v", err)
					return
				}
				data, err := io.ReadAll(rc)
				_ = rc.Close() // read-only
				if err != nil {
					t.Errorf("concurrent read = %v", err)
					return
				}
				if !whole(data) {
					t.Errorf("a reader saw a partial or mixed version (%d bytes)", len(data))
					return
				}
			}
		})
	}
	for i := range writers {
		writersWG.Go(func() {
			if err := s.Put(ctx, "conc/key", bytes.NewReader(version(i)), size); err != nil {
				t.Errorf("concurrent Put %d = %v", i, err)
			}
		})
	}
	writersWG.Wait()
	close(done)
	readersWG.Wait()

	got, _ := get(t, s, "conc/key")
	if !whole(got) || got[0] == byte('A'+writers) {
		t.Errorf("after concurrent Puts the object is %d bytes starting %q, want one whole written version", len(got), trunc(got))
	}
	infos, err := s.List(ctx, "")
	if err != nil || len(infos) != 1 {
		t.Errorf("List after concurrent Puts = %+v, %v; want only conc/key", infos, err)
	}
}

func testContextCancelled(t *testing.T, s registry.Objects) {
	put(t, s, "ctx/existing", []byte("old"))

	t.Run("already cancelled", func(t *testing.T) {
		cause := errors.New("objectstest: gave up")
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(cause)
		checks := map[string]error{
			"Put":    s.Put(ctx, "ctx/new", strings.NewReader("x"), 1),
			"Stat":   second(s.Stat(ctx, "ctx/existing")),
			"Copy":   s.Copy(ctx, "ctx/existing", "ctx/copy"),
			"Delete": s.Delete(ctx, "ctx/existing"),
			"List":   second(s.List(ctx, "")),
		}
		rc, _, err := s.Get(ctx, "ctx/existing")
		if rc != nil {
			_ = rc.Close() // already failing the test
		}
		checks["Get"] = err
		for op, err := range checks {
			if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
				t.Errorf("%s with a cancelled ctx = %v, want context.Canceled with its cause", op, err)
			}
		}
		infos, err := s.List(t.Context(), "")
		if err != nil || len(infos) != 1 || infos[0].Key != "ctx/existing" {
			t.Errorf("after the cancelled calls List = %+v, %v; want only ctx/existing", infos, err)
		}
	})

	for _, size := range []int64{-1, 8 << 20} {
		t.Run(fmt.Sprintf("during Put size %d", size), func(t *testing.T) {
			for _, key := range []string{"ctx/new", "ctx/existing"} {
				ctx, cancel := context.WithCancel(t.Context())
				r := &cancellingReader{left: 8 << 20, cancelAfter: 1 << 20, cancel: cancel}
				err := s.Put(ctx, key, r, size)
				cancel()
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Put(%q) cancelled midway = %v, want context.Canceled", key, err)
				}
			}
			if _, err := s.Stat(t.Context(), "ctx/new"); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("after the cancelled Put, Stat(ctx/new) = %v, want ErrNotFound", err)
			}
			if got, _ := get(t, s, "ctx/existing"); string(got) != "old" {
				t.Errorf("the cancelled Put changed ctx/existing to %q", trunc(got))
			}
		})
	}
}

// cancellingReader yields left zero bytes and calls cancel once cancelAfter
// bytes have been read.
type cancellingReader struct {
	left, cancelAfter int64
	read              int64
	cancel            func()
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left, 64<<10))
	clear(p[:n])
	r.left -= int64(n)
	r.read += int64(n)
	if r.read >= r.cancelAfter {
		r.cancel()
	}
	return n, nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// put stores data under key or fails the test.
func put(t testing.TB, s registry.Objects, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q, %d bytes) = %v", key, len(data), err)
	}
}

// get reads the object at key or fails the test.
func get(t testing.TB, s registry.Objects, key string) ([]byte, registry.Info) {
	t.Helper()
	rc, info, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) = %v", key, err)
	}
	defer func() { _ = rc.Close() }() // read-only
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return data, info
}

// randomBytes returns n bytes from a generator seeded with seed.
func randomBytes(n int, seed uint64) []byte {
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	_, _ = rng.Read(b) // ChaCha8.Read never fails
	return b
}

// trunc shortens data for a failure message.
func trunc(data []byte) []byte {
	if len(data) > 32 {
		return data[:32]
	}
	return data
}

// second returns the error of a (value, error) pair.
func second[T any](_ T, err error) error { return err }

package objectstest

// The edges of the contract: invalid and longest keys, short and failed bodies, large objects,
// concurrent writers and cancelled contexts.

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

	"svc/registry"
)

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

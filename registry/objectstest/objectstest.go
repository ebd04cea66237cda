package objectstest

import (
	"bytes"
	"errors"
	"fmt"
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

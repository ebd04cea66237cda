package objectstest

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"svc/registry"
)

// Bench benchmarks Put and Get of 1 KiB and 1 MiB objects on a store from
// newStore (wrapped with registry.Checked), reporting bytes per second.
func Bench(b *testing.B, newStore NewStore) {
	for _, size := range []int{1 << 10, 1 << 20} {
		data := randomBytes(size, 99)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("Put/"+name, func(b *testing.B) {
			s := registry.Checked(newStore(b))
			ctx := b.Context()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Put(ctx, "bench/put", bytes.NewReader(data), int64(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Get/"+name, func(b *testing.B) {
			s := registry.Checked(newStore(b))
			ctx := b.Context()
			put(b, s, "bench/get", data)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				rc, _, err := s.Get(ctx, "bench/get")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, rc)
				if cerr := rc.Close(); err == nil {
					err = cerr
				}
				if err != nil || n != int64(size) {
					b.Fatalf("read %d bytes, %v; want %d", n, err, size)
				}
			}
		})
	}
}

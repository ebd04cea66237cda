package s3objects_test

import (
	"strings"
	"testing"

	"svc/registry"
	"svc/registry/objectstest"
	"svc/registry/s3objects"
	"svc/registry/s3objects/s3test"
)

// storeFactory starts one S3 server for tb and returns a constructor of
// stores on fresh buckets of it.
func storeFactory(tb testing.TB) objectstest.NewStore {
	server := s3test.Start(tb)
	return func(tb testing.TB) registry.Objects {
		tb.Helper()
		s, err := s3objects.New(tb.Context(), s3test.FreshBucket(tb, server))
		if err != nil {
			tb.Fatalf("New = %v", err)
		}
		return registry.Checked(s)
	}
}

func TestConformance(t *testing.T) {
	objectstest.Run(t, storeFactory(t))
}

func BenchmarkStore(b *testing.B) {
	objectstest.Bench(b, storeFactory(b))
}

func TestNewCreatesBucketOnce(t *testing.T) {
	cfg := s3test.Start(t)
	ctx := t.Context()
	first, err := s3objects.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New (bucket missing) = %v", err)
	}
	if err := first.Put(ctx, "k", strings.NewReader("v"), 1); err != nil {
		t.Fatal(err)
	}
	second, err := s3objects.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New (bucket exists) = %v", err)
	}
	if info, err := second.Stat(ctx, "k"); err != nil || info.Size != 1 {
		t.Errorf("Stat through a second Store = %+v, %v; want the object", info, err)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := s3objects.Config{Endpoint: "127.0.0.1:1", Bucket: "bucket", AccessKey: "a", SecretKey: "s"}
	tests := []struct {
		name    string
		edit    func(*s3objects.Config)
		wantErr string
	}{
		{"no endpoint", func(c *s3objects.Config) { c.Endpoint = "" }, "Config.Endpoint is empty"},
		{"scheme", func(c *s3objects.Config) { c.Endpoint = "http://127.0.0.1:9000" }, "without a scheme"},
		{"path", func(c *s3objects.Config) { c.Endpoint = "127.0.0.1:9000/x" }, "without a path"},
		{"no bucket", func(c *s3objects.Config) { c.Bucket = "" }, "Config.Bucket is empty"},
		{"bad bucket", func(c *s3objects.Config) { c.Bucket = "Bad_Bucket" }, "Config.Bucket"},
		{"short bucket", func(c *s3objects.Config) { c.Bucket = "ab" }, "Config.Bucket"},
		{"access key alone", func(c *s3objects.Config) { c.SecretKey = "" }, "set together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			_, err := s3objects.New(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New(%+v) = %v, want error containing %q", cfg, err, tt.wantErr)
			}
		})
	}
}

package s3objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"svc/registry"
)

// partSize is the part size of multipart uploads, S3's minimum. A Put of
// unknown size buffers one part in memory at a time, and a Put of known size
// above it goes up in parts of this size.
const partSize = 5 << 20

// Config locates the S3 bucket that holds the objects.
type Config struct {
	// Endpoint is the server's host[:port], without a scheme
	// ("127.0.0.1:9000", "s3.amazonaws.com").
	Endpoint string
	// Bucket is the bucket's name; New creates it when missing.
	Bucket string
	// AccessKey and SecretKey are the static credentials; both empty means
	// anonymous access.
	AccessKey string
	// SecretKey is the secret that goes with AccessKey.
	SecretKey string
	// UseSSL selects https.
	UseSSL bool
	// Region is the bucket's region; empty lets the client discover it (and
	// creates a missing bucket in us-east-1).
	Region string
}

// validate reports the first unusable field, by name.
func (c Config) validate() error {
	switch {
	case c.Endpoint == "":
		return errors.New("s3objects: Config.Endpoint is empty")
	case strings.Contains(c.Endpoint, "://"):
		return fmt.Errorf("s3objects: Config.Endpoint %q must be host[:port] without a scheme (set UseSSL for https)", c.Endpoint)
	case strings.ContainsAny(c.Endpoint, "/?#"):
		return fmt.Errorf("s3objects: Config.Endpoint %q must be host[:port] without a path", c.Endpoint)
	case c.Bucket == "":
		return errors.New("s3objects: Config.Bucket is empty")
	case (c.AccessKey == "") != (c.SecretKey == ""):
		return errors.New("s3objects: Config.AccessKey and Config.SecretKey must be set together")
	}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return fmt.Errorf("s3objects: Config.Bucket %q: %w", c.Bucket, err)
	}
	return nil
}

// Store keeps objects in one S3 bucket, under their keys. It implements
// registry.Objects; wrap it with registry.Checked, which validates keys
// before they reach the Store. S3 itself makes Put and Copy atomic.
type Store struct {
	client *minio.Client
	bucket string
}

var _ registry.Objects = (*Store)(nil)

// New connects to the bucket of cfg and creates it when missing.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		// Empty keys make minio-go send anonymous requests.
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: cfg.UseSSL,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3objects: client for %q: %w", cfg.Endpoint, err)
	}
	exists, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("s3objects: check bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !exists {
		err := client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region})
		if err != nil && errCode(err) != minio.BucketAlreadyOwnedByYou {
			return nil, fmt.Errorf("s3objects: create bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
		}
	}
	return &Store{client: client, bucket: cfg.Bucket}, nil
}

// Put uploads r in one request when size is known and at most one part,
// and as a multipart upload otherwise; S3 makes the object visible only
// when the upload completes, and minio-go aborts a failed multipart upload.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    partSize,
	})
	if err != nil {
		return fmt.Errorf("put %q: %w", key, translate(ctx, err))
	}
	return nil
}

// Get starts a GET of the object; the body streams under ctx.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, registry.Info, error) {
	body, oi, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, registry.Info{}, fmt.Errorf("get %q: %w", key, translate(ctx, err))
	}
	return body, registry.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Stat sends a HEAD for the object.
func (s *Store) Stat(ctx context.Context, key string) (registry.Info, error) {
	oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return registry.Info{}, fmt.Errorf("stat %q: %w", key, translate(ctx, err))
	}
	return registry.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Copy asks the server to copy the object (CopyObject, one request, up to
// S3's 5 GiB limit for a single copy); no bytes pass through this process.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	_, err := s.client.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.bucket, Object: dst},
		minio.CopySrcOptions{Bucket: s.bucket, Object: src})
	if err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, translate(ctx, err))
	}
	return nil
}

// Delete removes the object; S3 answers a missing key with success.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err == nil {
		return nil
	}
	if err = translate(ctx, err); errors.Is(err, registry.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("delete %q: %w", key, err)
}

// List pages through ListObjectsV2 under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]registry.Info, error) {
	// Cancel on return so that the listing stops if we stop reading early.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(errors.New("s3objects: list returned"))
	var out []registry.Info
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return nil, fmt.Errorf("list %q: %w", prefix, translate(ctx, oi.Err))
		}
		if strings.HasSuffix(oi.Key, "/") {
			continue // a directory marker (posix-backed servers), never a valid key
		}
		out = append(out, registry.Info{Key: oi.Key, Size: oi.Size, ModTime: oi.LastModified})
	}
	// S3 lists in UTF-8 byte order already; some S3-compatible servers do not.
	slices.SortFunc(out, func(a, b registry.Info) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// translate maps a minio error at the boundary: a missing key or bucket
// becomes registry.ErrNotFound, and an error caused by ctx being done wraps
// ctx's error so that callers can match context.Canceled.
func translate(ctx context.Context, err error) error {
	switch errCode(err) {
	case minio.NoSuchKey, minio.NoSuchBucket, "NotFound":
		return registry.ErrNotFound
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	return err
}

// errCode returns the S3 error code of err, or "" when err is not an S3
// error response. A 404 without a code (the answer to a HEAD) is
// "NotFound".
func errCode(err error) string {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return ""
	}
	if resp.Code == "" && resp.StatusCode == http.StatusNotFound {
		return "NotFound"
	}
	return resp.Code
}

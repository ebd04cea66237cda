package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ErrNotFound is returned (possibly wrapped) by Objects.Get, Objects.Stat and
// Objects.Copy when the object does not exist. Match it with errors.Is.
var ErrNotFound = errors.New("registry: object not found")

// ErrInvalidKey is returned (wrapped, with the key and the reason) by every
// Objects method that Checked guards when a key or list prefix breaks the key
// rules of ValidateKey. Match it with errors.Is.
var ErrInvalidKey = errors.New("registry: invalid object key")

// Info describes one stored object.
type Info struct {
	// Key is the object's key, as given to Put.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// ModTime is when the object was last written (by Put or Copy), as the
	// backend reports it; its precision depends on the backend (S3: seconds).
	ModTime time.Time
}

// Objects is a flat store of immutable-once-written byte objects addressed by
// slash-separated keys such as "bundles/<agent>/<digest>.tar.zst".
//
// Contract, for every implementation:
//
//   - Keys follow ValidateKey. Implementations assume valid keys: callers
//     always hold an implementation wrapped by Checked, which validates
//     once, so backends do not repeat it.
//   - All methods are safe for concurrent use, from one process or several
//     sharing the same backing store.
//   - Put is atomic: a concurrent or later reader sees either the previous
//     object or the whole new one, never a partial one; of several
//     concurrent Puts to one key, exactly one whole version remains. A Put
//     that returns an error (a reader error, a size mismatch, a cancelled
//     ctx) leaves the key as it was before, with nothing new visible.
//   - Copy is atomic in the same way, and the copy is independent of its
//     source: a later Put or Delete of either key does not change the other.
//   - ctx bounds the call. A ctx that is already done fails the call with an
//     error that wraps ctx's error. For Get, ctx must stay live while the
//     returned reader is read: some backends stream the body under it.
//   - A key that is a whole-segment prefix of another key ("a/b" and
//     "a/b/c") cannot exist at the same time on backends backed by a
//     directory tree (fsobjects, versitygw's posix S3 backend): the second
//     Put fails. Key layouts must not need both.
type Objects interface {
	// Put stores the content of r under key, replacing any object there.
	// size is the exact length of r's content, or -1 when unknown; a known
	// size that r does not match fails the Put.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object at key. On success the caller must Close the
	// reader; the Info describes the version being read. A missing object
	// returns (nil, Info{}, error wrapping ErrNotFound).
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat describes the object at key; a missing object returns an error
	// wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// Copy stores a copy of the object at src under dst, replacing any
	// object there. A missing src returns an error wrapping ErrNotFound and
	// leaves dst unchanged.
	Copy(ctx context.Context, src, dst string) error
	// Delete removes the object at key. Deleting a missing key is not an
	// error.
	Delete(ctx context.Context, key string) error
	// List returns every object whose key starts with prefix (a plain string
	// prefix: "a/b" matches "a/b/c" and "a/bc"), sorted by key in byte
	// order. The empty prefix lists everything; no match is an empty list.
	List(ctx context.Context, prefix string) ([]Info, error)
}

// MaxKeyLen is the longest object key, in bytes, that ValidateKey accepts.
const MaxKeyLen = 1024

// ValidateKey reports whether key is a valid object key: non-empty, at most
// MaxKeyLen bytes of valid UTF-8, no leading "/", no backslash, no NUL, and
// made of non-empty "/"-separated segments none of which is "." or "..". The
// rules keep a key one portable name on every backend: on a filesystem it
// cannot leave the store's root or alias another key, and S3 accepts it as
// is. The error wraps ErrInvalidKey and names the key and the broken rule.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	}
	return checkPath(key, false)
}

// validatePrefix applies ValidateKey's rules to a List prefix, except that
// the empty prefix is allowed and the last segment may be empty (a trailing
// "/") or partial ("." or ".." as the start of a longer name).
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return checkPath(prefix, true)
}

func checkPath(s string, isPrefix bool) error {
	what := "key"
	if isPrefix {
		what = "prefix"
	}
	switch {
	case len(s) > MaxKeyLen:
		return fmt.Errorf("%w: %s %.40q... is %d bytes, more than %d", ErrInvalidKey, what, s, len(s), MaxKeyLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidKey, what, s)
	case strings.HasPrefix(s, "/"):
		return fmt.Errorf("%w: %s %q starts with \"/\"", ErrInvalidKey, what, s)
	case strings.ContainsRune(s, '\\'):
		return fmt.Errorf("%w: %s %q contains a backslash", ErrInvalidKey, what, s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalidKey, what, s)
	}
	segments := strings.Split(s, "/")
	for i, seg := range segments {
		if isPrefix && i == len(segments)-1 {
			break // the last segment of a prefix may be partial or empty
		}
		switch seg {
		case "":
			return fmt.Errorf("%w: %s %q has an empty path segment", ErrInvalidKey, what, s)
		case ".", "..":
			return fmt.Errorf("%w: %s %q has a %q path segment", ErrInvalidKey, what, s, seg)
		}
	}
	return nil
}

// Checked wraps o so that every call is checked before it reaches o: keys
// and prefixes with ValidateKey's rules, a ctx that is already done, Put's
// size argument and that r yields exactly size bytes, and Copy onto itself
// (reduced to a Stat of src, since some backends refuse it). This is the one
// place those rules live (the pattern of distribution's driver/base):
// whoever constructs a backend wraps it once, and backends rely on it.
// Wrapping an already checked store returns it unchanged.
func Checked(o Objects) Objects {
	if c, ok := o.(checked); ok {
		return c
	}
	return checked{next: o}
}

// checked is the Objects wrapper returned by Checked.
type checked struct {
	next Objects
}

func (c checked) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if err := ctxDone(ctx); err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	if r == nil {
		return fmt.Errorf("put %q: reader is nil", key)
	}
	if size < -1 {
		return fmt.Errorf("put %q: size %d is invalid (want the length in bytes, or -1 when unknown)", key, size)
	}
	body := &putBody{
		// A closure rather than a field, so that no struct holds the ctx.
		read: func(p []byte) (int, error) {
			if err := ctxDone(ctx); err != nil {
				return 0, err
			}
			return r.Read(p)
		},
		size: size,
		left: size,
	}
	if size == 0 {
		// A backend may never read an empty body, so check it here.
		if err := body.probe(); !errors.Is(err, io.EOF) {
			return fmt.Errorf("put %q: %w", key, err)
		}
	}
	err := c.next.Put(ctx, key, body, size)
	bodyErr := body.failure()
	switch {
	case bodyErr == nil:
		return err
	case err == nil:
		// The backend stored the object although its body failed: only a
		// backend that ignores read errors does that.
		return fmt.Errorf("put %q: the body failed but the backend stored the object: %w", key, bodyErr)
	case errors.Is(err, bodyErr):
		return err
	default:
		// Backends (HTTP clients above all) may report a failed body as a
		// broken connection; the body's own error is the cause.
		return fmt.Errorf("put %q: %w (backend: %w)", key, bodyErr, err)
	}
}

func (c checked) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, fmt.Errorf("get: %w", err)
	}
	if err := ctxDone(ctx); err != nil {
		return nil, Info{}, fmt.Errorf("get %q: %w", key, err)
	}
	rc, info, err := c.next.Get(ctx, key)
	if err != nil {
		if rc != nil {
			_ = rc.Close() // the error being returned says more than Close's
		}
		return nil, Info{}, err
	}
	return rc, info, nil
}

func (c checked) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, fmt.Errorf("stat: %w", err)
	}
	if err := ctxDone(ctx); err != nil {
		return Info{}, fmt.Errorf("stat %q: %w", key, err)
	}
	return c.next.Stat(ctx, key)
}

func (c checked) Copy(ctx context.Context, src, dst string) error {
	if err := ValidateKey(src); err != nil {
		return fmt.Errorf("copy source: %w", err)
	}
	if err := ValidateKey(dst); err != nil {
		return fmt.Errorf("copy destination: %w", err)
	}
	if err := ctxDone(ctx); err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	if src == dst {
		if _, err := c.next.Stat(ctx, src); err != nil {
			return fmt.Errorf("copy %q onto itself: %w", src, err)
		}
		return nil
	}
	return c.next.Copy(ctx, src, dst)
}

func (c checked) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := ctxDone(ctx); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	return c.next.Delete(ctx, key)
}

func (c checked) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if err := ctxDone(ctx); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	return c.next.List(ctx, prefix)
}

// ctxDone returns nil while ctx is live, else ctx's error joined with its
// cause when the cause says more (context.WithCancelCause).
func ctxDone(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// readerFunc adapts a function to io.Reader.
type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// putBody is the reader a backend's Put gets. It fails once ctx is done,
// so a Put of a long stream stops at the next read on every backend; with
// a known size it fails when the content is shorter or longer; and it
// records the first failure, so Put can report it even when a backend
// reports something vaguer.
type putBody struct {
	read func(p []byte) (int, error) // reads the caller's reader under ctx
	size int64                       // declared size, or -1
	left int64                       // bytes still expected when size >= 0

	mu  sync.Mutex // guards err: a backend may read in its own goroutine
	err error      // first error other than io.EOF returned by Read
}

func (b *putBody) Read(p []byte) (int, error) {
	n, err := b.readExact(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// failure returns the first error Read returned, other than io.EOF.
func (b *putBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *putBody) readExact(p []byte) (int, error) {
	if b.size < 0 {
		return b.read(p)
	}
	if b.left == 0 {
		return 0, b.probe()
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.read(p)
	b.left -= int64(n)
	switch {
	case errors.Is(err, io.EOF) && b.left > 0:
		return n, fmt.Errorf("reader ended after %d of the declared %d bytes: %w", b.size-b.left, b.size, io.ErrUnexpectedEOF)
	case err != nil:
		return n, err
	case b.left == 0:
		// Check for more content before handing over the last bytes: a
		// consumer that stops after size bytes (io.ReadFull) would drop an
		// error returned together with them. Returning 0 bytes instead
		// makes it see the error.
		if err := b.probe(); !errors.Is(err, io.EOF) {
			return 0, err
		}
		return n, io.EOF
	}
	return n, nil
}

// probe reads one byte past the declared size: io.EOF when there is none.
func (b *putBody) probe() error {
	var one [1]byte
	n, err := io.ReadFull(readerFunc(b.read), one[:])
	switch {
	case n > 0:
		return fmt.Errorf("reader has more than the declared %d bytes", b.size)
	case errors.Is(err, io.EOF):
		return io.EOF
	default:
		return err
	}
}

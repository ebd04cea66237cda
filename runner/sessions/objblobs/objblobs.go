// Package objblobs keeps attachment content in the platform's object store, one object per
// content and session under attachments/<agent id>/<session folder>/<hex sha256>, so that history
// rows hold references only, the same file sent twice in a session is stored once, and deleting a
// session deletes its files. The session folder is the first 32 hex digits of the SHA-256 of the
// session id: a client-chosen id may hold characters an object key may not.
package objblobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"svc/registry"
	"svc/runner/sessions"
)

// MaxBlobSize bounds what Get reads back: the largest attachment a chat request can carry.
const MaxBlobSize = 64 << 20

// Blobs is a sessions.Blobs over an object store, for one agent.
type Blobs struct {
	objects registry.Objects
	prefix  string
}

var _ sessions.Blobs = (*Blobs)(nil)

// New returns the attachment store of agentID in objects.
func New(objects registry.Objects, agentID string) *Blobs {
	return &Blobs{objects: objects, prefix: "attachments/" + agentID + "/"}
}

func (b *Blobs) folder(session string) string {
	sum := sha256.Sum256([]byte(session))
	return b.prefix + hex.EncodeToString(sum[:16]) + "/"
}

func (b *Blobs) key(session, ref string) (string, error) {
	hexSum, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(hexSum) != 64 || strings.Trim(hexSum, "0123456789abcdef") != "" {
		return "", fmt.Errorf("objblobs: invalid ref %q", ref)
	}
	return b.folder(session) + hexSum, nil
}

// Put implements sessions.Blobs: content already stored is not written again.
func (b *Blobs) Put(ctx context.Context, session, ref string, data []byte) error {
	key, err := b.key(session, ref)
	if err != nil {
		return err
	}
	if got := sessions.BlobRef(data); got != ref {
		return fmt.Errorf("objblobs: put attachment: ref %s is not the content's (%s)", ref, got)
	}
	if info, err := b.objects.Stat(ctx, key); err == nil && info.Size == int64(len(data)) {
		return nil
	} else if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("objblobs: stat %s: %w", key, err)
	}
	if err := b.objects.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("objblobs: put %s: %w", key, err)
	}
	return nil
}

// Get implements sessions.Blobs.
func (b *Blobs) Get(ctx context.Context, session, ref string) ([]byte, error) {
	key, err := b.key(session, ref)
	if err != nil {
		return nil, err
	}
	rc, _, err := b.objects.Get(ctx, key)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, sessions.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("objblobs: get %s: %w", key, err)
	}
	defer rc.Close() //nolint:errcheck // read-only
	data, err := io.ReadAll(io.LimitReader(rc, MaxBlobSize+1))
	if err != nil {
		return nil, fmt.Errorf("objblobs: read %s: %w", key, err)
	}
	if len(data) > MaxBlobSize || sessions.BlobRef(data) != ref {
		return nil, fmt.Errorf("objblobs: %s does not hold the content of %s", key, ref)
	}
	return data, nil
}

// Drop implements sessions.Blobs: it deletes every object of the session's folder.
func (b *Blobs) Drop(ctx context.Context, session string) error {
	infos, err := b.objects.List(ctx, b.folder(session))
	if err != nil {
		return fmt.Errorf("objblobs: list the attachments of a session: %w", err)
	}
	for _, info := range infos {
		if err := b.objects.Delete(ctx, info.Key); err != nil {
			return fmt.Errorf("objblobs: delete %s: %w", info.Key, err)
		}
	}
	return nil
}

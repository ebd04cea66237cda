package memstore

import (
	"context"
	"fmt"
	"sync"

	"svc/runner/sessions"
)

// Blobs is an in-memory sessions.Blobs, for svc dev and tests: content lives as long as the
// process. The zero value is ready to use.
type Blobs struct {
	mu    sync.RWMutex
	blobs map[string][]byte
}

var _ sessions.Blobs = (*Blobs)(nil)

// Put implements sessions.Blobs.
func (b *Blobs) Put(_ context.Context, ref string, data []byte) error {
	if got := sessions.BlobRef(data); got != ref {
		return fmt.Errorf("memstore: put attachment: ref %s is not the content's (%s)", ref, got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blobs == nil {
		b.blobs = map[string][]byte{}
	}
	if _, ok := b.blobs[ref]; !ok {
		b.blobs[ref] = data
	}
	return nil
}

// Get implements sessions.Blobs. The returned slice is shared and must not be changed.
func (b *Blobs) Get(_ context.Context, ref string) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	data, ok := b.blobs[ref]
	if !ok {
		return nil, sessions.ErrBlobNotFound
	}
	return data, nil
}

package memstore

import (
	"context"
	"fmt"
	"sync"

	"svc/runner/sessions"
)

// Blobs is an in-memory sessions.Blobs, for svc dev and tests: content lives as long as the
// process, or until its session is dropped. The zero value is ready to use.
type Blobs struct {
	mu       sync.RWMutex
	sessions map[string]map[string][]byte // session → ref → content
}

var _ sessions.Blobs = (*Blobs)(nil)

// Put implements sessions.Blobs.
func (b *Blobs) Put(_ context.Context, session, ref string, data []byte) error {
	if got := sessions.BlobRef(data); got != ref {
		return fmt.Errorf("memstore: put attachment: ref %s is not the content's (%s)", ref, got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions == nil {
		b.sessions = map[string]map[string][]byte{}
	}
	refs := b.sessions[session]
	if refs == nil {
		refs = map[string][]byte{}
		b.sessions[session] = refs
	}
	if _, ok := refs[ref]; !ok {
		refs[ref] = data
	}
	return nil
}

// Get implements sessions.Blobs. The returned slice is shared and must not be changed.
func (b *Blobs) Get(_ context.Context, session, ref string) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	data, ok := b.sessions[session][ref]
	if !ok {
		return nil, sessions.ErrBlobNotFound
	}
	return data, nil
}

// Drop implements sessions.Blobs.
func (b *Blobs) Drop(_ context.Context, session string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sessions, session)
	return nil
}

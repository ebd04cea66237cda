// Package sse owns the frames of a chat stream (spec §6.1) and their wire form.
//
// Frames are encoded with a hand-written, append-based JSON encoder instead of encoding/json:
// a chat turn writes one frame per model text chunk, and this is the runtime's hot path. A
// Writer reuses one buffer for every frame of a stream, gives each frame an `id:` line so a
// client can tell exactly where it stopped, and flushes after every frame.
package sse

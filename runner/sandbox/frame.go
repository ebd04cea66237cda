package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFrameTooBig is returned by ReadFrame for a frame over its limit.
var ErrFrameTooBig = errors.New("sandbox: frame too big")

// WriteFrame writes b as one frame: its length as 4 bytes big-endian, then b, in one write.
func WriteFrame(w io.Writer, b []byte) error {
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame of at most limit bytes. io.EOF means the other side closed
// between frames; io.ErrUnexpectedEOF that it closed inside one.
func ReadFrame(r *bufio.Reader, limit int) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(head[:]))
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrFrameTooBig, n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

package models

import (
	"bufio"
	"errors"
	"io"
)

// dechunker reads a chunked HTTP/1.1 body (RFC 9112 §7.1) into its caller's buffer and takes
// the framing out there, in place. net/http's chunked reader reads through a buffer of its own,
// so that a streamed answer held two, the transport's and the provider's event reader's: 0.6 KiB
// more of every open stream. It reads what the head's reader had buffered past the head first,
// then gives that reader back and reads the connection. Trailer fields are read and dropped (a
// model call has no use for them).
type dechunker struct {
	br      *bufio.Reader       // the head's reader while it holds bytes of the body, then nil
	release func(*bufio.Reader) // takes br back once it is drained
	conn    io.Reader
	state   int8
	size    uint64 // the chunk's size while its line is read, then what is left of its data
	line    int    // bytes of the size or trailer line so far
	extra   bool   // bytes followed the body's end: the connection cannot serve another call
}

// The states of a dechunker.
const (
	chunkSize    = iota // the hex digits of a chunk's size
	chunkExt            // after them, to the line's end: extensions, which are dropped
	chunkData           // the chunk's data
	chunkDataCR         // the CR after the data
	chunkDataLF         // the LF after the data
	chunkTrailer        // a trailer line, or the empty line that ends the body
	chunkEnd            // the body has ended
)

// maxChunkLine bounds a size line with its extensions, and a trailer line.
const maxChunkLine = 4 << 10

var errMalformedChunk = errors.New("models: malformed chunked encoding in the answer")

// drained reports whether the body ended with nothing after it, the head's reader included.
func (d *dechunker) drained() bool {
	return d.state == chunkEnd && !d.extra && (d.br == nil || d.br.Buffered() == 0)
}

func (d *dechunker) Read(p []byte) (int, error) {
	for len(p) > 0 {
		if d.state == chunkEnd {
			return 0, io.EOF
		}
		n, err := d.read(p)
		w, perr := d.parse(p[:n])
		switch {
		case perr != nil:
			return w, perr
		case d.state == chunkEnd:
			return w, io.EOF
		case w > 0 && err == nil:
			return w, nil
		case err == io.EOF:
			return w, io.ErrUnexpectedEOF
		case err != nil:
			return w, err
		}
		// Only framing came: read on.
	}
	return 0, nil
}

// read reads the body's next bytes: the head reader's, then the connection's.
func (d *dechunker) read(p []byte) (int, error) {
	if d.br != nil {
		if d.br.Buffered() > 0 {
			return d.br.Read(p) // what is buffered, and no read of the connection
		}
		d.release(d.br)
		d.br = nil
	}
	return d.conn.Read(p)
}

// parse takes the framing out of b, which holds the next bytes of the body, moving the data to
// b's front, and returns how many bytes of data there are.
func (d *dechunker) parse(b []byte) (int, error) {
	w := 0
	for i := 0; i < len(b); {
		switch d.state {
		case chunkData:
			n := min(uint64(len(b)-i), d.size)
			w += copy(b[w:], b[i:i+int(n)])
			i += int(n)
			if d.size -= n; d.size == 0 {
				d.state = chunkDataCR
			}
			continue
		case chunkEnd:
			d.extra = true // what no call asked for
			return w, nil
		}
		c := b[i]
		i++
		switch d.state {
		case chunkSize:
			switch v := hexDigit(c); {
			case v >= 0:
				if d.size > 1<<59 {
					return w, errMalformedChunk // a chunk larger than any body
				}
				d.size = d.size<<4 | uint64(v)
				d.line++
			case d.line == 0:
				return w, errMalformedChunk // no size
			case c == '\n':
				d.endSizeLine()
			default: // ';' (an extension), whitespace, CR: to the line's end
				d.state = chunkExt
			}
		case chunkExt:
			if c == '\n' {
				d.endSizeLine()
			} else if d.line++; d.line > maxChunkLine {
				return w, errMalformedChunk
			}
		case chunkDataCR:
			if c != '\r' {
				return w, errMalformedChunk
			}
			d.state = chunkDataLF
		case chunkDataLF:
			if c != '\n' {
				return w, errMalformedChunk
			}
			d.state, d.size, d.line = chunkSize, 0, 0
		case chunkTrailer:
			switch {
			case c == '\n' && d.line == 0:
				d.state = chunkEnd
			case c == '\n':
				d.line = 0
			case c == '\r':
			default:
				if d.line++; d.line > maxChunkLine {
					return w, errMalformedChunk
				}
			}
		}
	}
	return w, nil
}

// endSizeLine ends a size line: the chunk's data follows, or, after the last chunk (size 0),
// the trailer.
func (d *dechunker) endSizeLine() {
	d.line = 0
	if d.size == 0 {
		d.state = chunkTrailer
		return
	}
	d.state = chunkData
}

func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

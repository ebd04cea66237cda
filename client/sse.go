package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxEventSize bounds the data of one server-sent event (the data lines joined); a bigger event
// ends the stream with ErrEventTooLarge.
const MaxEventSize = 8 << 20

// ErrEventTooLarge is returned for an event whose data is over MaxEventSize.
var ErrEventTooLarge = errors.New("client: server-sent event over the size limit")

// event is one dispatched server-sent event.
type event struct {
	id   string // the last event id seen on the stream (ids persist across events)
	name string // the event: field, "" when absent
	data []byte // the data lines joined with "\n"
}

// sseReader parses a text/event-stream as the HTML standard describes it: lines end with "\n",
// "\r\n" or "\r"; a blank line dispatches the event; lines starting with ":" are comments; each
// field's value loses one leading space; several data lines join with "\n"; "id" persists (unless
// it holds NUL); "retry" and unknown fields are ignored; an event left unfinished at the end of the
// stream is discarded.
type sseReader struct {
	r       *bufio.Reader
	max     int
	line    []byte
	data    []byte
	name    string
	lastID  string
	skipLF  bool // the previous line ended with "\r": a "\n" right after it belongs to it
	started bool // past a leading byte order mark
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next returns the next event, io.EOF at the end of the stream, or the read error.
func (s *sseReader) next() (event, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return event{}, err
		}
		if len(line) == 0 {
			if len(s.data) == 0 {
				s.name = ""
				continue
			}
			ev := event{id: s.lastID, name: s.name, data: bytes.Clone(s.data[:len(s.data)-1])}
			s.data, s.name = s.data[:0], ""
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "data":
			s.data = append(append(s.data, value...), '\n')
			if len(s.data)-1 > s.max {
				return event{}, fmt.Errorf("%w: more than %d bytes of data", ErrEventTooLarge, s.max)
			}
		case "event":
			s.name = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		}
	}
}

// readLine returns the next line without its ending; the slice is valid until the next call. A
// line longer than the data limit plus room for a field name is ErrEventTooLarge.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	limit := s.max + 64
	for {
		if s.r.Buffered() == 0 {
			if _, err := s.r.Peek(1); err != nil {
				return nil, err // an unfinished line (and its event) is discarded
			}
		}
		buf, _ := s.r.Peek(s.r.Buffered()) // what is buffered can always be peeked
		if s.skipLF {
			s.skipLF = false
			if buf[0] == '\n' {
				_, _ = s.r.Discard(1) // buffered, so Discard cannot fail
				continue
			}
		}
		if !s.started {
			s.started = true
			if buf[0] == 0xEF {
				if bom, err := s.r.Peek(3); err == nil && bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
					_, _ = s.r.Discard(3)
					continue
				}
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			i = len(buf)
		}
		if len(s.line)+i > limit {
			return nil, fmt.Errorf("%w: a line of more than %d bytes", ErrEventTooLarge, limit)
		}
		s.line = append(s.line, buf[:i]...)
		if i == len(buf) {
			_, _ = s.r.Discard(i)
			continue
		}
		s.skipLF = buf[i] == '\r'
		_, _ = s.r.Discard(i + 1)
		return s.line, nil
	}
}

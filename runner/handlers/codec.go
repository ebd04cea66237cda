package handlers

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"svc/runner/durable"
)

// The encoding of the frames between a runner and its sandbox workers (wire.go). Both ends are
// the same executable, so it needs no versions. It is not JSON because encoding/json's
// reflection cost 3 µs to encode or decode a reply and 10 µs to decode a call, on each side,
// several times a call: as much as the rest of a crossing.
//
// A struct is a list of fields, each a tag byte then its value: a varint for a number (a
// uvarint for Seq and Loan), a uvarint length then the bytes for a string, raw JSON or a nested
// struct, nothing for a true flag. Zero values are left out; a list repeats its tag once per
// element. A decoder refuses unknown tags, values cut short and numbers out of range: the
// runner reads what a worker writes, and a worker runs code nobody trusts (though that code
// cannot write frames itself).

// errBadFrame is wrapped by the error of a frame that does not decode.
var errBadFrame = errors.New("handlers: bad frame")

// Tags of message.
const (
	tagOp = iota + 1
	tagCall
	tagDigest
	tagJS
	tagSeq
	tagLoan
	tagMethod
	tagName
	tagTask
	tagArgs
	tagFiles
	tagKey
	tagValue
	tagError
	tagStop
	tagFrame
	tagOutcome
)

// encode appends the encoding of m to b.
func (m *message) encode(b []byte) []byte {
	b = appendString(b, tagOp, m.Op)
	if m.Call != nil {
		b = appendNested(b, tagCall, m.Call.encode)
	}
	b = appendString(b, tagDigest, m.Digest)
	b = appendString(b, tagJS, m.JS)
	b = appendUint(b, tagSeq, m.Seq)
	b = appendUint(b, tagLoan, m.Loan)
	b = appendString(b, tagMethod, m.Method)
	b = appendString(b, tagName, m.Name)
	b = appendString(b, tagTask, m.Task)
	b = appendString(b, tagArgs, string(m.Args))
	for _, f := range m.Files {
		b = appendElem(b, tagFiles, f)
	}
	b = appendString(b, tagKey, m.Key)
	b = appendString(b, tagValue, string(m.Value))
	b = appendString(b, tagError, m.Error)
	b = appendFlag(b, tagStop, m.Stop)
	if m.Frame != nil {
		b = appendNested(b, tagFrame, m.Frame.encode)
	}
	if m.Outcome != nil {
		b = appendNested(b, tagOutcome, m.Outcome.encode)
	}
	return b
}

// decodeMessage decodes a frame. Raw JSON values (Args, Value, a call's arguments and
// records, an outcome's data) share b's memory.
func decodeMessage(b []byte) (message, error) {
	var m message
	d := decoder{b: b}
	for tag := range d.fields() {
		switch tag {
		case tagOp:
			m.Op = d.string()
		case tagCall:
			m.Call = &callSpec{}
			d.nested(m.Call.decode)
		case tagDigest:
			m.Digest = d.string()
		case tagJS:
			m.JS = d.string()
		case tagSeq:
			m.Seq = d.uvarint()
		case tagLoan:
			m.Loan = d.uvarint()
		case tagMethod:
			m.Method = d.string()
		case tagName:
			m.Name = d.string()
		case tagTask:
			m.Task = d.string()
		case tagArgs:
			m.Args = d.raw()
		case tagFiles:
			m.Files = append(m.Files, d.string())
		case tagKey:
			m.Key = d.string()
		case tagValue:
			m.Value = d.raw()
		case tagError:
			m.Error = d.string()
		case tagStop:
			m.Stop = true
		case tagFrame:
			m.Frame = &emitFrame{}
			d.nested(m.Frame.decode)
		case tagOutcome:
			m.Outcome = &outcome{}
			d.nested(m.Outcome.decode)
		default:
			d.unknown(tag)
		}
	}
	if d.err != nil {
		return message{}, d.err
	}
	return m, nil
}

// Tags of callSpec.
const (
	specTool = iota + 1
	specDigest
	specSourcePath
	specLayout
	specUsesTools
	specUsesAgents
	specChildren
	specSubagents
	specMaxResultBytes
	specMaxLogLines
	specMaxLogBytes
	specMaxDepth
	specDepth
	specID
	specSessionID
	specArgs
	specFiles
	specDurable
	specRecorded
)

func (s *callSpec) encode(b []byte) []byte {
	b = appendString(b, specTool, s.Tool)
	b = appendString(b, specDigest, s.Digest)
	b = appendString(b, specSourcePath, s.SourcePath)
	b = appendString(b, specLayout, s.Layout)
	for _, t := range s.UsesTools {
		b = appendElem(b, specUsesTools, t)
	}
	for _, a := range s.UsesAgents {
		b = appendElem(b, specUsesAgents, a)
	}
	b = appendFlag(b, specChildren, s.Children)
	b = appendFlag(b, specSubagents, s.Subagents)
	b = appendInt(b, specMaxResultBytes, s.MaxResultBytes)
	b = appendInt(b, specMaxLogLines, s.MaxLogLines)
	b = appendInt(b, specMaxLogBytes, s.MaxLogBytes)
	b = appendInt(b, specMaxDepth, s.MaxDepth)
	b = appendInt(b, specDepth, s.Depth)
	b = appendString(b, specID, s.ID)
	b = appendString(b, specSessionID, s.SessionID)
	b = appendString(b, specArgs, string(s.Args))
	for i := range s.Files {
		b = appendNested(b, specFiles, s.Files[i].encode)
	}
	b = appendFlag(b, specDurable, s.Durable)
	for k, v := range s.Recorded {
		b = appendNested(b, specRecorded, func(b []byte) []byte {
			b = appendElem(b, 1, k)
			return appendElem(b, 2, string(v))
		})
	}
	return b
}

func (s *callSpec) decode(d *decoder) {
	for tag := range d.fields() {
		switch tag {
		case specTool:
			s.Tool = d.string()
		case specDigest:
			s.Digest = d.string()
		case specSourcePath:
			s.SourcePath = d.string()
		case specLayout:
			s.Layout = d.string()
		case specUsesTools:
			s.UsesTools = append(s.UsesTools, d.string())
		case specUsesAgents:
			s.UsesAgents = append(s.UsesAgents, d.string())
		case specChildren:
			s.Children = true
		case specSubagents:
			s.Subagents = true
		case specMaxResultBytes:
			s.MaxResultBytes = d.int()
		case specMaxLogLines:
			s.MaxLogLines = d.int()
		case specMaxLogBytes:
			s.MaxLogBytes = d.int()
		case specMaxDepth:
			s.MaxDepth = d.int()
		case specDepth:
			s.Depth = d.int()
		case specID:
			s.ID = d.string()
		case specSessionID:
			s.SessionID = d.string()
		case specArgs:
			s.Args = d.raw()
		case specFiles:
			var f fileInfo
			d.nested(f.decode)
			s.Files = append(s.Files, f)
		case specDurable:
			s.Durable = true
		case specRecorded:
			var key string
			var value json.RawMessage
			d.nested(func(d *decoder) {
				for tag := range d.fields() {
					switch tag {
					case 1:
						key = d.string()
					case 2:
						value = d.raw()
					default:
						d.unknown(tag)
					}
				}
			})
			if s.Recorded == nil {
				s.Recorded = map[string]json.RawMessage{}
			}
			s.Recorded[key] = value
		default:
			d.unknown(tag)
		}
	}
}

func (f *fileInfo) encode(b []byte) []byte {
	b = appendString(b, 1, f.Filename)
	b = appendString(b, 2, f.MimeType)
	b = appendString(b, 3, f.Delivery)
	return appendInt(b, 4, f.Size)
}

func (f *fileInfo) decode(d *decoder) {
	for tag := range d.fields() {
		switch tag {
		case 1:
			f.Filename = d.string()
		case 2:
			f.MimeType = d.string()
		case 3:
			f.Delivery = d.string()
		case 4:
			f.Size = d.int()
		default:
			d.unknown(tag)
		}
	}
}

func (f *emitFrame) encode(b []byte) []byte {
	b = appendString(b, 1, f.Type)
	b = appendString(b, 2, f.Message)
	b = appendString(b, 3, f.RunningLabel)
	b = appendString(b, 4, f.CompletedLabel)
	b = appendString(b, 5, f.WidgetType)
	return appendString(b, 6, string(f.Data))
}

func (f *emitFrame) decode(d *decoder) {
	for tag := range d.fields() {
		switch tag {
		case 1:
			f.Type = d.string()
		case 2:
			f.Message = d.string()
		case 3:
			f.RunningLabel = d.string()
		case 4:
			f.CompletedLabel = d.string()
		case 5:
			f.WidgetType = d.string()
		case 6:
			f.Data = json.RawMessage(d.raw())
		default:
			d.unknown(tag)
		}
	}
}

func (o *outcome) encode(b []byte) []byte {
	b = appendString(b, 1, o.Content)
	b = appendString(b, 2, string(o.Data))
	if o.Pause != nil {
		// A pause is rare and has many fields: JSON, as the journal keeps it.
		p, err := json.Marshal(o.Pause)
		if err != nil {
			p = nil // plain values, which cannot fail; the host says the outcome is broken
		}
		b = appendElem(b, 3, string(p))
	}
	if o.Err != nil {
		b = appendNested(b, 4, o.Err.encode)
	}
	return b
}

func (o *outcome) decode(d *decoder) {
	for tag := range d.fields() {
		switch tag {
		case 1:
			o.Content = d.string()
		case 2:
			o.Data = d.raw()
		case 3:
			o.Pause = &durable.Pause{}
			if err := json.Unmarshal(d.raw(), o.Pause); err != nil {
				d.fail(fmt.Errorf("%w: a pause: %v", errBadFrame, err)) //nolint:errorlint // one sentinel; the JSON error is described
			}
		case 4:
			o.Err = &wireError{}
			d.nested(o.Err.decode)
		default:
			d.unknown(tag)
		}
	}
}

func (e *wireError) encode(b []byte) []byte {
	b = appendString(b, 1, e.Kind)
	b = appendString(b, 2, e.Message)
	b = appendString(b, 3, e.Tool)
	b = appendString(b, 4, e.File)
	b = appendInt(b, 5, e.Line)
	return appendInt(b, 6, e.Column)
}

func (e *wireError) decode(d *decoder) {
	for tag := range d.fields() {
		switch tag {
		case 1:
			e.Kind = d.string()
		case 2:
			e.Message = d.string()
		case 3:
			e.Tool = d.string()
		case 4:
			e.File = d.string()
		case 5:
			e.Line = d.int()
		case 6:
			e.Column = d.int()
		default:
			d.unknown(tag)
		}
	}
}

// appendElem appends a string field, even an empty one (an element of a list, a map entry).
func appendElem(b []byte, tag byte, s string) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, tag byte, s string) []byte {
	if s == "" {
		return b
	}
	return appendElem(b, tag, s)
}

func appendUint(b []byte, tag byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(append(b, tag), v)
}

func appendInt(b []byte, tag byte, v int) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendVarint(append(b, tag), int64(v))
}

func appendFlag(b []byte, tag byte, v bool) []byte {
	if !v {
		return b
	}
	return append(b, tag)
}

// appendNested appends a struct field: its length, then what enc appends.
func appendNested(b []byte, tag byte, enc func([]byte) []byte) []byte {
	b = append(b, tag)
	// The length comes first but is known last: reserve the most a uvarint of a frame's
	// length takes, then move the struct back over what the length did not use.
	const room = binary.MaxVarintLen32
	at := len(b)
	b = enc(append(b, make([]byte, room)...))
	n := len(b) - at - room
	var head [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(head[:], uint64(n))
	copy(b[at:], head[:k])
	copy(b[at+k:], b[at+room:])
	return b[:at+k+n]
}

// decoder reads the fields of one struct; the first error stops it and is kept.
type decoder struct {
	b   []byte
	err error
}

// fields yields the tag of each field in turn; the caller reads its value.
func (d *decoder) fields() func(yield func(byte) bool) {
	return func(yield func(byte) bool) {
		for d.err == nil && len(d.b) > 0 {
			tag := d.b[0]
			d.b = d.b[1:]
			if !yield(tag) {
				return
			}
		}
	}
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) unknown(tag byte) {
	d.fail(fmt.Errorf("%w: unknown field %d", errBadFrame, tag))
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(fmt.Errorf("%w: a number cut short", errBadFrame))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(fmt.Errorf("%w: a number cut short", errBadFrame))
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

// raw is the next length-prefixed value, sharing the frame's memory.
func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("%w: a value of %d bytes, %d left", errBadFrame, n, len(d.b)))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return string(d.raw()) }

// nested decodes a struct field with dec.
func (d *decoder) nested(dec func(*decoder)) {
	v := d.raw()
	if d.err != nil {
		return
	}
	inner := decoder{b: v}
	dec(&inner)
	if inner.err != nil {
		d.fail(inner.err)
	}
}

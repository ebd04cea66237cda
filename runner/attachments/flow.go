package attachments

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// flow collects the text of a document as its reader walks the XML: paragraphs become lines,
// and a table becomes one line per row with its cells joined by " | ". Paragraphs and tables
// may nest (a table in a cell, a text box in a paragraph).
type flow struct {
	out   strings.Builder
	stack []*block
}

type blockKind int

const (
	blockPara blockKind = iota
	blockTable
	blockRow
	blockCell
)

type block struct {
	kind  blockKind
	text  strings.Builder // para and cell
	rows  []string        // table
	cells []string        // row
}

func (f *flow) top() *block {
	if len(f.stack) == 0 {
		return nil
	}
	return f.stack[len(f.stack)-1]
}

func (f *flow) push(k blockKind) { f.stack = append(f.stack, &block{kind: k}) }

// pop removes the innermost block of kind k (and anything left open inside it).
func (f *flow) pop(k blockKind) *block {
	for i := len(f.stack) - 1; i >= 0; i-- {
		if f.stack[i].kind == k {
			b := f.stack[i]
			f.stack = f.stack[:i]
			return b
		}
	}
	return nil
}

// text adds run text to the current paragraph or cell; text outside both is a line of its own.
func (f *flow) text(s string) {
	if s == "" {
		return
	}
	if b := f.top(); b != nil && (b.kind == blockPara || b.kind == blockCell) {
		b.text.WriteString(s)
		return
	}
	f.out.WriteString(s)
}

// line delivers a finished paragraph or table to the enclosing block.
func (f *flow) line(s string) {
	b := f.top()
	switch {
	case b != nil && b.kind == blockCell:
		s = strings.Join(strings.Fields(s), " ")
		if s == "" {
			return
		}
		if b.text.Len() > 0 {
			b.text.WriteByte(' ')
		}
		b.text.WriteString(s)
	default:
		// A paragraph inside a paragraph (a text box) is written before its anchor.
		f.out.WriteString(s)
		f.out.WriteByte('\n')
	}
}

func (f *flow) startPara() { f.push(blockPara) }

func (f *flow) endPara() {
	if b := f.pop(blockPara); b != nil {
		f.line(b.text.String())
	}
}

// heading writes a line of its own, such as a slide or sheet title.
func (f *flow) heading(s string) {
	f.out.WriteString("\n" + s + "\n")
}

func (f *flow) startTable() { f.push(blockTable) }
func (f *flow) startRow()   { f.push(blockRow) }
func (f *flow) startCell()  { f.push(blockCell) }

func (f *flow) endCell() { f.endCellRepeated(1) }

// endCellRepeated ends a cell that stands for n equal cells (ODF number-columns-repeated).
func (f *flow) endCellRepeated(n int) {
	c := f.pop(blockCell)
	if c == nil {
		return
	}
	s := strings.Join(strings.Fields(c.text.String()), " ")
	if r := f.top(); r != nil && r.kind == blockRow {
		for range n {
			r.cells = append(r.cells, s)
		}
		return
	}
	f.line(s)
}

func (f *flow) endRow() {
	r := f.pop(blockRow)
	if r == nil {
		return
	}
	cells := r.cells
	for len(cells) > 0 && cells[len(cells)-1] == "" {
		cells = cells[:len(cells)-1]
	}
	if len(cells) == 0 {
		return
	}
	s := strings.Join(cells, " | ")
	if t := f.top(); t != nil && t.kind == blockTable {
		t.rows = append(t.rows, s)
		return
	}
	f.line(s)
}

func (f *flow) endTable() {
	t := f.pop(blockTable)
	if t == nil || len(t.rows) == 0 {
		return
	}
	if b := f.top(); b != nil && b.kind == blockCell {
		f.line(strings.Join(t.rows, " / "))
		return
	}
	f.out.WriteString(strings.Join(t.rows, "\n"))
	f.out.WriteString("\n\n")
}

// String returns the collected text, closing whatever is still open.
func (f *flow) String() string {
	for len(f.stack) > 0 {
		switch f.top().kind {
		case blockPara:
			f.endPara()
		case blockCell:
			f.endCell()
		case blockRow:
			f.endRow()
		case blockTable:
			f.endTable()
		}
	}
	return f.out.String()
}

// walkXML streams the elements of an XML part to fn. fn returns skip to pass over the
// element's content. Syntax errors name the part.
func walkXML(name string, data []byte, fn func(d *xml.Decoder, tok xml.Token) (skip bool)) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = func(charset string, r io.Reader) (io.Reader, error) {
		// Office writes UTF-8; accept a mislabelled declaration rather than fail.
		return r, nil
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s is not valid XML: %v", ErrCorrupt, name, err)
		}
		if fn(d, tok) {
			if err := d.Skip(); err != nil {
				return fmt.Errorf("%w: %s is not valid XML: %v", ErrCorrupt, name, err)
			}
		}
	}
}

// attr returns the value of the attribute with the local name local (any namespace).
func attr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// attrNS returns the value of the attribute local in the namespace whose URI ends in suffix.
func attrNS(se xml.StartElement, suffix, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local && strings.HasSuffix(a.Name.Space, suffix) {
			return a.Value
		}
	}
	return ""
}

// rels reads a relationships part: Id → Target, resolved against dir.
func rels(a *archive, name, dir string) (map[string]string, error) {
	data, err := a.read(name)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "Relationship" {
			if attr(se, "TargetMode") == "External" {
				return false
			}
			out[attr(se, "Id")] = resolve(dir, attr(se, "Target"))
		}
		return false
	})
	return out, err
}

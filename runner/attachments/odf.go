package attachments

import (
	"encoding/xml"
	"strconv"
	"strings"
)

// maxRepeat caps the repetition of one ODF cell (table:number-columns-repeated), which
// spreadsheets use to fill rows out to thousands of empty columns.
const maxRepeat = 256

// odfText reads content.xml of an OpenDocument file: paragraphs and headings (text:p,
// text:h), lists, tables cell by cell, each sheet of a spreadsheet under "Sheet: <name>" and
// each page of a presentation under "--- Slide N ---". Annotations, tracked deletions and
// speaker notes are skipped.
func odfText(a *archive) (string, error) {
	const name = "content.xml"
	data, err := a.read(name)
	if err != nil {
		return "", err
	}
	var f flow
	var (
		spreadsheet bool
		slide       int
		repeat      []int // columns-repeated of the open cells
	)
	err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "spreadsheet":
				spreadsheet = true
			case "p", "h":
				if strings.HasSuffix(t.Name.Space, ":text:1.0") {
					f.startPara()
				}
			case "page":
				if strings.HasSuffix(t.Name.Space, ":drawing:1.0") {
					slide++
					f.heading("--- Slide " + strconv.Itoa(slide) + " ---")
				}
			case "table":
				if spreadsheet {
					f.heading("Sheet: " + attrNS(t, ":table:1.0", "name"))
				}
				f.startTable()
			case "table-row":
				f.startRow()
			case "table-cell", "covered-table-cell":
				n, err := strconv.Atoi(attrNS(t, ":table:1.0", "number-columns-repeated"))
				if err != nil || n < 1 {
					n = 1
				}
				repeat = append(repeat, min(n, maxRepeat))
				f.startCell()
			case "s":
				n, err := strconv.Atoi(attrNS(t, ":text:1.0", "c"))
				if err != nil || n < 1 {
					n = 1
				}
				f.text(strings.Repeat(" ", min(n, maxRepeat)))
			case "tab":
				f.text("\t")
			case "line-break":
				f.text("\n")
			case "annotation", "tracked-changes", "notes", "note-citation", "forms", "scripts", "font-face-decls", "automatic-styles":
				return true
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "p", "h":
				if strings.HasSuffix(t.Name.Space, ":text:1.0") {
					f.endPara()
				}
			case "table":
				f.endTable()
			case "table-row":
				f.endRow()
			case "table-cell", "covered-table-cell":
				n := 1
				if len(repeat) > 0 {
					n = repeat[len(repeat)-1]
					repeat = repeat[:len(repeat)-1]
				}
				f.endCellRepeated(n)
			}
		case xml.CharData:
			if b := f.top(); b != nil && b.kind == blockPara {
				f.text(string(t))
			}
		}
		return false
	})
	if err != nil {
		return "", err
	}
	return f.String(), nil
}

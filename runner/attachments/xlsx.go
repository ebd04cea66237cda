package attachments

import (
	"encoding/xml"
	"errors"
	"strings"
)

// maxColumns caps the width of a row; XLSX allows 16,384 columns and a cell reference could
// otherwise make a short row expand to all of them.
const maxColumns = 1024

// xlsxText reads each worksheet in workbook order under a "Sheet: <name>" heading, one line per
// non-empty row with the cells joined by " | " in column order (empty cells keep their
// place). Values are the cached values the file stores: shared and inline strings, numbers as
// written (dates stay serial numbers), booleans as TRUE/FALSE.
func xlsxText(a *archive) (string, error) {
	shared, err := sharedStrings(a)
	if err != nil {
		return "", err
	}
	sheets, err := sheetList(a)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, s := range sheets {
		data, err := a.read(s.part)
		if errors.Is(err, errMissing) {
			continue
		}
		if err != nil {
			return "", err
		}
		rows, err := sheetRows(s.part, data, shared)
		if err != nil {
			return "", err
		}
		b.WriteString("Sheet: " + s.name + "\n")
		for _, r := range rows {
			b.WriteString(r + "\n")
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

type sheetRef struct{ name, part string }

// sheetList reads the sheets of xl/workbook.xml and their parts.
func sheetList(a *archive) ([]sheetRef, error) {
	const name = "xl/workbook.xml"
	data, err := a.read(name)
	if err != nil {
		return nil, err
	}
	targets, err := rels(a, "xl/_rels/workbook.xml.rels", "xl")
	if err != nil && !errors.Is(err, errMissing) {
		return nil, err
	}
	var out []sheetRef
	err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "sheet" {
			if part, ok := targets[attrNS(se, "/relationships", "id")]; ok {
				out = append(out, sheetRef{name: attr(se, "name"), part: part})
			}
		}
		return false
	})
	return out, err
}

// sharedStrings reads xl/sharedStrings.xml (optional): the text of each si, phonetic runs
// left out.
func sharedStrings(a *archive) ([]string, error) {
	const name = "xl/sharedStrings.xml"
	data, err := a.read(name)
	if errors.Is(err, errMissing) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	var cur strings.Builder
	inT := false
	err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				cur.Reset()
			case "t":
				inT = true
			case "rPh":
				return true
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "si":
				out = append(out, cur.String())
			case "t":
				inT = false
			}
		case xml.CharData:
			if inT {
				cur.Write(t)
			}
		}
		return false
	})
	return out, err
}

// sheetRows reads the rows of a worksheet part.
func sheetRows(name string, data []byte, shared []string) ([]string, error) {
	var rows []string
	var cells []string
	var (
		col      = -1 // column of the current cell
		typ      string
		val      strings.Builder
		inV, inT bool
	)
	err := walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "row":
				cells = cells[:0]
			case "c":
				typ = attr(t, "t")
				val.Reset()
				if c, ok := columnOf(attr(t, "r")); ok {
					col = c
				} else {
					col = len(cells)
				}
			case "v":
				inV = true
			case "t":
				inT = true
			case "f", "rPh", "extLst":
				return true
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "c":
				if col >= maxColumns {
					return false
				}
				s := cellValue(typ, val.String(), shared)
				for len(cells) < col {
					cells = append(cells, "")
				}
				if col < len(cells) {
					cells[col] = s
				} else {
					cells = append(cells, s)
				}
			case "row":
				for len(cells) > 0 && cells[len(cells)-1] == "" {
					cells = cells[:len(cells)-1]
				}
				if len(cells) > 0 {
					rows = append(rows, strings.Join(cells, " | "))
				}
			case "v":
				inV = false
			case "t":
				inT = false
			}
		case xml.CharData:
			if inV || inT {
				val.Write(t)
			}
		}
		return false
	})
	return rows, err
}

// cellValue renders a cell's stored value by its type.
func cellValue(typ, v string, shared []string) string {
	switch typ {
	case "s":
		i := 0
		for _, r := range v {
			if r < '0' || r > '9' || i > len(shared) {
				return ""
			}
			i = i*10 + int(r-'0')
		}
		if v == "" || i >= len(shared) {
			return ""
		}
		return strings.Join(strings.Fields(shared[i]), " ")
	case "b":
		if v == "1" {
			return "TRUE"
		}
		return "FALSE"
	}
	return strings.Join(strings.Fields(v), " ")
}

// columnOf returns the 0-based column of a cell reference such as "C7".
func columnOf(ref string) (int, bool) {
	c := 0
	n := 0
	for _, r := range ref {
		if r >= 'A' && r <= 'Z' {
			c = c*26 + int(r-'A'+1)
			n++
			if n > 3 {
				return 0, false
			}
			continue
		}
		break
	}
	if n == 0 {
		return 0, false
	}
	return c - 1, true
}

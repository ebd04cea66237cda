package attachments

import "encoding/xml"

// docxText reads word/document.xml: paragraphs (w:p) as lines, tables (w:tbl) row by row,
// tabs and breaks. Deleted text, field instructions and the fallback copy of alternate
// content are not body text and are skipped.
func docxText(a *archive) (string, error) {
	const name = "word/document.xml"
	data, err := a.read(name)
	if err != nil {
		return "", err
	}
	var f flow
	inText := false
	err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "p":
				f.startPara()
			case "tbl":
				f.startTable()
			case "tr":
				f.startRow()
			case "tc":
				f.startCell()
			case "t":
				inText = true
			case "tab":
				f.text("\t")
			case "br", "cr":
				f.text("\n")
			case "noBreakHyphen":
				f.text("-")
			case "Fallback", "del", "instrText", "delText", "pPr", "rPr", "sectPr":
				return true
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "p":
				f.endPara()
			case "tbl":
				f.endTable()
			case "tr":
				f.endRow()
			case "tc":
				f.endCell()
			case "t":
				inText = false
			}
		case xml.CharData:
			if inText {
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

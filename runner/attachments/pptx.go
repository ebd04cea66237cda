package attachments

import (
	"encoding/xml"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// pptxText reads the slides in presentation order (p:sldIdLst of ppt/presentation.xml through
// its relationships), each under a "Slide N" heading, with the paragraphs (a:p) and tables
// (a:tbl) of its shapes.
func pptxText(a *archive) (string, error) {
	slides, err := slideOrder(a)
	if err != nil {
		return "", err
	}
	var f flow
	for i, name := range slides {
		data, err := a.read(name)
		if errors.Is(err, errMissing) {
			continue // listed but absent: nothing to show
		}
		if err != nil {
			return "", err
		}
		f.heading("--- Slide " + strconv.Itoa(i+1) + " ---")
		inText := false
		err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "p":
					if t.Name.Space == nsDrawingML {
						f.startPara()
					}
				case "tbl":
					f.startTable()
				case "tr":
					f.startRow()
				case "tc":
					f.startCell()
				case "t":
					inText = true
				case "br":
					f.text("\n")
				case "Fallback", "pPr", "rPr", "endParaRPr":
					return true
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "p":
					if t.Name.Space == nsDrawingML {
						f.endPara()
					}
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
		// Close what a slide left open so slides do not run together.
		_ = f.String()
	}
	return f.String(), nil
}

// nsDrawingML is the namespace of a:p (p:p does not exist; the check keeps other "p" out).
const nsDrawingML = "http://schemas.openxmlformats.org/drawingml/2006/main"

// slideOrder lists the slide parts in presentation order; without a usable slide list it
// falls back to ppt/slides/slideN.xml in number order.
func slideOrder(a *archive) ([]string, error) {
	const name = "ppt/presentation.xml"
	data, err := a.read(name)
	if err != nil {
		return nil, err
	}
	var ids []string
	err = walkXML(name, data, func(_ *xml.Decoder, tok xml.Token) bool {
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "sldId" {
			ids = append(ids, attrNS(se, "/relationships", "id"))
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	targets, err := rels(a, "ppt/_rels/presentation.xml.rels", "ppt")
	if err != nil && !errors.Is(err, errMissing) {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if t, ok := targets[id]; ok {
			out = append(out, t)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, f := range a.files {
		dir, base := path.Split(f.Name)
		if dir == "ppt/slides/" && strings.HasPrefix(base, "slide") && strings.HasSuffix(base, ".xml") {
			out = append(out, f.Name)
		}
	}
	sortNatural(out)
	if len(out) == 0 && len(ids) > 0 {
		return nil, fmt.Errorf("%w: ppt/presentation.xml lists %d slides but the archive holds none", ErrCorrupt, len(ids))
	}
	return out, nil
}

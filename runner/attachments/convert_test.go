package attachments_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/attachments"
)

const (
	mimeDOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	mimeXLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	mimePPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
	mimeODT  = "application/vnd.oasis.opendocument.text"
	mimeODS  = "application/vnd.oasis.opendocument.spreadsheet"
	mimeODP  = "application/vnd.oasis.opendocument.presentation"
)

// entry is one file of a test archive.
type entry struct {
	name string
	data []byte
}

func zipOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pngImage encodes a real w×h PNG.
func pngImage(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, 0, color.RGBA{R: 200, A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pngOfSize returns n bytes that start with the PNG signature (the converter sniffs the
// signature; the model would get these bytes as they are).
func pngOfSize(n int) []byte {
	b := make([]byte, n)
	copy(b, "\x89PNG\r\n\x1a\n")
	return b
}

const wNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"`

func docx(t testing.TB, body string, media ...entry) []byte {
	t.Helper()
	entries := []entry{
		{"[Content_Types].xml", []byte(`<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`)},
		{"word/document.xml", []byte(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + wNS + `><w:body>` + body + `</w:body></w:document>`)},
	}
	for _, m := range media {
		entries = append(entries, entry{"word/media/" + m.name, m.data})
	}
	return zipOf(t, entries...)
}

func para(text string) string {
	return `<w:p><w:r><w:t xml:space="preserve">` + text + `</w:t></w:r></w:p>`
}

func convert(t *testing.T, name, mt string, data []byte, b *attachments.Budget) *attachments.Result {
	t.Helper()
	res, err := attachments.Convert(name, mt, data, b)
	if err != nil {
		t.Fatalf("Convert(%s): %v", name, err)
	}
	return res
}

func TestDOCX(t *testing.T) {
	body := `<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>Quarterly plan</w:t></w:r></w:p>` +
		`<w:p><w:r><w:t>Tab</w:t></w:r><w:r><w:tab/><w:t>after</w:t></w:r><w:del><w:r><w:delText>deleted</w:delText></w:r></w:del>` +
		`<w:r><w:fldChar w:fldCharType="begin"/><w:instrText>PAGE</w:instrText></w:r><w:r><w:br/><w:t>next line</w:t></w:r></w:p>` +
		`<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Name</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Qty</w:t></w:r></w:p></w:tc></w:tr>` +
		`<w:tr><w:tc><w:p><w:r><w:t>Widget</w:t></w:r></w:p><w:p><w:r><w:t>blue</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>3</w:t></w:r></w:p></w:tc></w:tr></w:tbl>` +
		`<mc:AlternateContent><mc:Choice Requires="wps">` + para("in a text box") + `</mc:Choice><mc:Fallback>` + para("in a text box") + `</mc:Fallback></mc:AlternateContent>` +
		para("The end &amp; more")
	img := pngImage(t, 3, 2)
	data := docx(t, body, entry{"image10.png", img}, entry{"image2.png", img}, entry{"image3.emf", []byte("EMF")}, entry{"media1.mp4", []byte("video")})
	res := convert(t, "plan.docx", mimeDOCX, data, nil)

	want := "Quarterly plan\nTab\tafter\nnext line\nName | Qty\nWidget blue | 3\n\nin a text box\nThe end & more" +
		"\n\nImages embedded in this file, attached after this text:\n- plan.docx/image2.png\n- plan.docx/image10.png" +
		"\n\nEmbedded media left out:\n- plan.docx/image3.emf: not an image type the model accepts\n- plan.docx/media1.mp4: not an image type the model accepts"
	if d := cmp.Diff(want, res.Text); d != "" {
		t.Errorf("text (-want +got):\n%s", d)
	}
	if len(res.Images) != 2 || res.Images[0].Name != "plan.docx/image2.png" || res.Images[0].MimeType != "image/png" || !bytes.Equal(res.Images[0].Data, img) {
		t.Errorf("images = %+v", res.Images)
	}
	if _, err := png.Decode(bytes.NewReader(res.Images[1].Data)); err != nil {
		t.Errorf("extracted image does not decode: %v", err)
	}
	wantLeft := []attachments.LeftOut{{Name: "plan.docx/image3.emf", Reason: attachments.ReasonNotImage}, {Name: "plan.docx/media1.mp4", Reason: attachments.ReasonNotImage}}
	if d := cmp.Diff(wantLeft, res.LeftOut); d != "" {
		t.Errorf("left out (-want +got):\n%s", d)
	}
}

func TestEmptyDocumentHasText(t *testing.T) {
	res := convert(t, "empty.docx", mimeDOCX, docx(t, ""), nil)
	if res.Text != "(empty.docx holds no text)" {
		t.Errorf("text = %q", res.Text)
	}
}

func TestXLSX(t *testing.T) {
	const rNS = `xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	data := zipOf(t,
		entry{"xl/workbook.xml", []byte(`<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" ` + rNS + `><sheets>` +
			`<sheet name="Q1" sheetId="1" r:id="rId1"/><sheet name="Notes" sheetId="2" r:id="rId2"/></sheets></workbook>`)},
		entry{"xl/_rels/workbook.xml.rels", []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="worksheet" Target="/xl/worksheets/sheet2.xml"/>` +
			`<Relationship Id="rId3" Type="sharedStrings" Target="sharedStrings.xml"/></Relationships>`)},
		entry{"xl/sharedStrings.xml", []byte(`<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><t>Name</t></si><si><t>Amount</t></si>` +
			`<si><r><t>Wid</t></r><r><t>get</t></r><rPh><t>phonetic</t></rPh></si></sst>`)},
		entry{"xl/worksheets/sheet1.xml", []byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` +
			`<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>` +
			`<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><f>1+2</f><v>3</v></c><c r="D2" t="b"><v>1</v></c></row>` +
			`<row r="3"/><row r="4"><c r="B4" t="inlineStr"><is><t>inline</t></is></c></row></sheetData></worksheet>`)},
		entry{"xl/worksheets/sheet2.xml", []byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` +
			`<row><c t="str"><v>computed</v></c><c t="s"><v>99</v></c></row></sheetData></worksheet>`)},
		entry{"xl/media/image1.png", pngImage(t, 1, 1)},
	)
	res := convert(t, "budget.xlsx", mimeXLSX, data, nil)
	want := "Sheet: Q1\nName | Amount\nWidget | 3 |  | TRUE\n | inline\n\nSheet: Notes\ncomputed" +
		"\n\nImages embedded in this file, attached after this text:\n- budget.xlsx/image1.png"
	if d := cmp.Diff(want, res.Text); d != "" {
		t.Errorf("text (-want +got):\n%s", d)
	}
}

const pNS = `xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`

func slide(texts ...string) []byte {
	var b strings.Builder
	b.WriteString(`<p:sld ` + pNS + `><p:cSld><p:spTree>`)
	for _, s := range texts {
		b.WriteString(`<p:sp><p:txBody><a:p><a:r><a:rPr lang="en"/><a:t>` + s + `</a:t></a:r></a:p></p:txBody></p:sp>`)
	}
	b.WriteString(`</p:spTree></p:cSld></p:sld>`)
	return []byte(b.String())
}

func TestPPTX(t *testing.T) {
	table := []byte(`<p:sld ` + pNS + `><p:cSld><p:spTree><p:graphicFrame><a:graphic><a:graphicData><a:tbl>` +
		`<a:tr><a:tc><a:txBody><a:p><a:r><a:t>k</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>v</a:t></a:r></a:p></a:txBody></a:tc></a:tr>` +
		`</a:tbl></a:graphicData></a:graphic></p:graphicFrame></p:spTree></p:cSld></p:sld>`)
	data := zipOf(t,
		entry{"ppt/presentation.xml", []byte(`<p:presentation ` + pNS + `><p:sldIdLst><p:sldId id="256" r:id="rId7"/><p:sldId id="257" r:id="rId2"/><p:sldId id="258" r:id="rId3"/></p:sldIdLst></p:presentation>`)},
		entry{"ppt/_rels/presentation.xml.rels", []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId2" Target="slides/slide1.xml"/><Relationship Id="rId7" Target="slides/slide2.xml"/><Relationship Id="rId3" Target="slides/slide3.xml"/></Relationships>`)},
		entry{"ppt/slides/slide1.xml", slide("Second", "point")},
		entry{"ppt/slides/slide2.xml", slide("First title")},
		entry{"ppt/slides/slide3.xml", table},
		entry{"ppt/media/image1.gif", []byte("GIF89a....")},
		entry{"ppt/media/image2.svg", []byte("<svg/>")},
	)
	res := convert(t, "deck.pptx", mimePPTX, data, nil)
	want := "--- Slide 1 ---\nFirst title\n\n--- Slide 2 ---\nSecond\npoint\n\n--- Slide 3 ---\nk | v" +
		"\n\nImages embedded in this file, attached after this text:\n- deck.pptx/image1.gif" +
		"\n\nEmbedded media left out:\n- deck.pptx/image2.svg: not an image type the model accepts"
	if d := cmp.Diff(want, res.Text); d != "" {
		t.Errorf("text (-want +got):\n%s", d)
	}
	if res.Images[0].MimeType != "image/gif" {
		t.Errorf("mime = %s", res.Images[0].MimeType)
	}
}

const odfNS = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ` +
	`xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"`

func odf(t testing.TB, mt, body string, media ...entry) []byte {
	t.Helper()
	entries := []entry{
		{"mimetype", []byte(mt)},
		{"content.xml", []byte(`<?xml version="1.0" encoding="UTF-8"?><office:document-content ` + odfNS + `><office:body>` + body + `</office:body></office:document-content>`)},
		{"Thumbnails/thumbnail.png", pngImage(t, 1, 1)},
	}
	for _, m := range media {
		entries = append(entries, entry{"Pictures/" + m.name, m.data})
	}
	return zipOf(t, entries...)
}

func TestODF(t *testing.T) {
	cases := []struct {
		name, mt, body string
		media          []entry
		want           string
	}{
		{"notes.odt", mimeODT,
			`<office:text><text:h text:outline-level="1">Title</text:h><text:p>a<text:s text:c="3"/>b<text:tab/>c<text:line-break/>d` +
				`<office:annotation><text:p>comment</text:p></office:annotation></text:p>` +
				`<text:list><text:list-item><text:p>item <text:span>one</text:span></text:p></text:list-item></text:list>` +
				`<table:table table:name="T"><table:table-row><table:table-cell><text:p>x</text:p></table:table-cell><table:table-cell><text:p>y</text:p></table:table-cell></table:table-row></table:table></office:text>`,
			[]entry{{"1000.png", nil}, {"pic.jpg", []byte{0xFF, 0xD8, 0xFF, 0xE0}}, {"clip.wmf", []byte("wmf")}},
			"Title\na   b\tc\nd\nitem one\nx | y" +
				"\n\nImages embedded in this file, attached after this text:\n- notes.odt/pic.jpg" +
				"\n\nEmbedded media left out:\n- notes.odt/1000.png: not an image type the model accepts\n- notes.odt/clip.wmf: not an image type the model accepts"},
		{"sheet.ods", mimeODS,
			`<office:spreadsheet><table:table table:name="Costs"><table:table-row><table:table-cell><text:p>a</text:p></table:table-cell>` +
				`<table:table-cell table:number-columns-repeated="2"/><table:table-cell table:number-columns-repeated="2"><text:p>r</text:p></table:table-cell>` +
				`<table:table-cell table:number-columns-repeated="16380"/></table:table-row>` +
				`<table:table-row table:number-rows-repeated="1000"><table:table-cell table:number-columns-repeated="1024"/></table:table-row></table:table>` +
				`<table:table table:name="Two"><table:table-row><table:table-cell><text:p>b</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet>`,
			nil, "Sheet: Costs\na |  |  | r | r\n\nSheet: Two\nb"},
		{"talk.odp", mimeODP,
			`<office:presentation><draw:page draw:name="p1"><draw:frame><draw:text-box><text:p>Hello</text:p></draw:text-box></draw:frame></draw:page>` +
				`<draw:page draw:name="p2"><draw:frame><draw:text-box><text:p>Bye</text:p></draw:text-box></draw:frame></draw:page></office:presentation>`,
			nil, "--- Slide 1 ---\nHello\n\n--- Slide 2 ---\nBye"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := convert(t, c.name, c.mt, odf(t, c.mt, c.body, c.media...), nil)
			if d := cmp.Diff(c.want, res.Text); d != "" {
				t.Errorf("text (-want +got):\n%s", d)
			}
		})
	}
}

// imagesDOCX is a document with n PNG images of size bytes each.
func imagesDOCX(t testing.TB, n, size int) []byte {
	t.Helper()
	var media []entry
	for i := range n {
		media = append(media, entry{"image" + string(rune('a'+i)) + ".png", pngOfSize(size)})
	}
	return docx(t, para("pictures"), media...)
}

func names(res *attachments.Result) (taken []string, left map[string]string) {
	left = map[string]string{}
	for _, im := range res.Images {
		taken = append(taken, im.Name)
	}
	for _, l := range res.LeftOut {
		left[l.Name] = l.Reason
	}
	return taken, left
}

func TestImageSizeLimit(t *testing.T) {
	data := docx(t, para("x"), entry{"exact.png", pngOfSize(attachments.MaxImageBytes)}, entry{"over.png", pngOfSize(attachments.MaxImageBytes + 1)})
	res := convert(t, "big.docx", mimeDOCX, data, nil)
	taken, left := names(res)
	if !cmp.Equal(taken, []string{"big.docx/exact.png"}) || left["big.docx/over.png"] != attachments.ReasonImageSize {
		t.Errorf("taken %v, left %v", taken, left)
	}
	if len(res.Images[0].Data) != attachments.MaxImageBytes {
		t.Errorf("image of %d bytes", len(res.Images[0].Data))
	}
	if !strings.Contains(res.Text, "- big.docx/over.png: over 3.75 MiB") {
		t.Errorf("text does not list the image left out:\n%s", res.Text)
	}
}

func TestImageHeaderUnderstatesSize(t *testing.T) {
	// A stored entry whose header claims 16 bytes but holds 4 MiB: decompression stops at the
	// limit whatever the header says.
	big := pngOfSize(4 << 20)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("word/document.xml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(`<w:document ` + wNS + `><w:body>` + para("x") + `</w:body></w:document>`)); err != nil {
		t.Fatal(err)
	}
	raw, err := zw.CreateRaw(&zip.FileHeader{Name: "word/media/liar.png", Method: zip.Store, CompressedSize64: uint64(len(big)), UncompressedSize64: 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	res := convert(t, "liar.docx", mimeDOCX, buf.Bytes(), nil)
	if len(res.Images) != 0 || len(res.LeftOut) != 1 {
		t.Errorf("images %d, left out %+v", len(res.Images), res.LeftOut)
	}
}

func TestImageCountLimitAcrossFiles(t *testing.T) {
	for _, c := range []struct {
		second    int
		wantTaken int
	}{{8, 20}, {9, 20}} {
		var budget attachments.Budget
		convert(t, "a.docx", mimeDOCX, imagesDOCX(t, 12, 100), &budget)
		res := convert(t, "b.docx", mimeDOCX, imagesDOCX(t, c.second, 100), &budget)
		if budget.Images() != c.wantTaken {
			t.Errorf("12+%d images: budget holds %d, want %d", c.second, budget.Images(), c.wantTaken)
		}
		taken, left := names(res)
		if len(taken) != 8 {
			t.Errorf("12+%d images: second file gave %d images", c.second, len(taken))
		}
		if c.second == 9 && left["b.docx/imagei.png"] != attachments.ReasonImageCount {
			t.Errorf("21st image: left out %v", left)
		}
		if c.second == 8 && len(left) != 0 {
			t.Errorf("20th image left out: %v", left)
		}
	}
}

func TestImageBytesLimitAcrossFiles(t *testing.T) {
	const quarter = attachments.MaxImagesBytes / 4 // 3,750,000 bytes, under 3.75 MiB
	var budget attachments.Budget
	convert(t, "a.docx", mimeDOCX, imagesDOCX(t, 3, quarter), &budget)
	res := convert(t, "b.docx", mimeDOCX, docx(t, para("x"), entry{"fits.png", pngOfSize(quarter)}, entry{"tiny.png", pngOfSize(16)}), &budget)
	taken, left := names(res)
	if budget.Bytes() != attachments.MaxImagesBytes || !cmp.Equal(taken, []string{"b.docx/fits.png"}) {
		t.Errorf("budget %d bytes, taken %v", budget.Bytes(), taken)
	}
	if left["b.docx/tiny.png"] != attachments.ReasonImageBytes {
		t.Errorf("image past 15 MB: left out %v", left)
	}
	if !strings.Contains(res.Text, "b.docx/tiny.png: over the 15 MB of images for this request") {
		t.Errorf("text:\n%s", res.Text)
	}
}

func TestCorruptFiles(t *testing.T) {
	good := docx(t, para("x"))
	cases := []struct {
		name, mt string
		data     []byte
		want     error
		msg      string
	}{
		{"not a zip", mimeDOCX, []byte("hello"), attachments.ErrCorrupt, "not a ZIP archive"},
		{"truncated zip", mimeDOCX, good[:len(good)-30], attachments.ErrCorrupt, "not a valid ZIP archive"},
		{"legacy doc", mimeDOCX, []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1rest"), attachments.ErrCorrupt, "legacy binary Office file"},
		{"zip without document", mimeDOCX, zipOf(t, entry{"a.txt", []byte("a")}), attachments.ErrCorrupt, "not an Office Open XML document"},
		{"odf without content", mimeODT, zipOf(t, entry{"mimetype", []byte(mimeODT)}), attachments.ErrCorrupt, "no content.xml"},
		{"bad xml", mimeDOCX, zipOf(t, entry{"word/document.xml", []byte("<w:document><w:body>")}), attachments.ErrCorrupt, "word/document.xml is not valid XML"},
		{"xlsx bad sheet", mimeXLSX, zipOf(t,
			entry{"xl/workbook.xml", []byte(`<workbook><sheets><sheet name="S" r:id="r1" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"/></sheets></workbook>`)},
			entry{"xl/_rels/workbook.xml.rels", []byte(`<Relationships><Relationship Id="r1" Target="worksheets/s.xml"/></Relationships>`)},
			entry{"xl/worksheets/s.xml", []byte(`<worksheet><row>`)}), attachments.ErrCorrupt, "xl/worksheets/s.xml is not valid XML"},
		{"rtf that is not", "application/rtf", []byte("plain"), attachments.ErrCorrupt, `does not start with {\rtf`},
		{"unsupported", "application/zip", good, attachments.ErrUnsupported, "not an Office Open XML"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := attachments.Convert("f", c.mt, c.data, nil)
			if !errors.Is(err, c.want) || !strings.Contains(fmtIt(err), c.msg) {
				t.Errorf("err = %v, want %v with %q", err, c.want, c.msg)
			}
		})
	}
}

func fmtIt(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestZipBombs(t *testing.T) {
	doc := []byte(`<w:document ` + wNS + `><w:body>` + para("ok") + `</w:body></w:document>`)
	const limit = 4096
	padded := func(n int) []byte { return append(append([]byte{}, doc...), bytes.Repeat([]byte(" "), n-len(doc))...) }
	t.Run("xml at the limit", func(t *testing.T) {
		res, err := attachments.ConvertLimited("edge.docx", mimeDOCX, zipOf(t, entry{"word/document.xml", padded(limit)}), attachments.MaxEntries, limit)
		if err != nil || res.Text != "ok" {
			t.Errorf("res %v, err %v", res, err)
		}
	})
	t.Run("xml over the limit", func(t *testing.T) {
		_, err := attachments.ConvertLimited("bomb.docx", mimeDOCX, zipOf(t, entry{"word/document.xml", padded(limit + 1)}), attachments.MaxEntries, limit)
		if !errors.Is(err, attachments.ErrTooLarge) {
			t.Errorf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("xml over the limit across parts", func(t *testing.T) {
		data := zipOf(t,
			entry{"ppt/presentation.xml", padded(limit / 2)},
			entry{"ppt/slides/slide1.xml", slide(strings.Repeat("x", limit/2))})
		_, err := attachments.ConvertLimited("bomb.pptx", mimePPTX, data, attachments.MaxEntries, limit)
		if !errors.Is(err, attachments.ErrTooLarge) {
			t.Errorf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("header over the default limit is refused before decompressing", func(t *testing.T) {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "word/document.xml", Method: zip.Store,
			CompressedSize64: uint64(len(doc)), UncompressedSize64: attachments.MaxXMLBytes + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(doc); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = attachments.Convert("bomb.docx", mimeDOCX, buf.Bytes(), nil)
		if !errors.Is(err, attachments.ErrTooLarge) || !strings.Contains(err.Error(), "word/document.xml decompresses to 52428801 bytes") {
			t.Errorf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("entries", func(t *testing.T) {
		const max = 50
		for _, n := range []int{max, max + 1} {
			entries := []entry{{"word/document.xml", doc}}
			for i := 1; i < n; i++ {
				entries = append(entries, entry{"x/" + itoa(i), nil})
			}
			_, err := attachments.ConvertLimited("many.docx", mimeDOCX, zipOf(t, entries...), max, limit)
			if over := n > max; over != errors.Is(err, attachments.ErrTooLarge) {
				t.Errorf("%d entries: err = %v", n, err)
			}
		}
	})
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}

func TestSupported(t *testing.T) {
	for mt, want := range map[string]bool{
		mimeDOCX: true, mimeODS: true, "application/rtf": true, "text/rtf; charset=x": true,
		"application/pdf": false, "text/plain": false, "application/zip": false,
	} {
		if got := attachments.Supported(mt); got != want {
			t.Errorf("Supported(%q) = %v, want %v", mt, got, want)
		}
	}
}

func BenchmarkConvertDOCX(b *testing.B) {
	var body strings.Builder
	for range 2000 {
		body.WriteString(para("A paragraph of ordinary length with some words in it."))
	}
	data := docx(b, body.String(), entry{"image1.png", pngImage(b, 64, 64)})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := attachments.Convert("b.docx", mimeDOCX, data, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzConvert feeds damaged archives to every reader: none may panic, and a result always has
// text and images within the limits.
func FuzzConvert(f *testing.F) {
	img := pngImage(f, 2, 2)
	f.Add(docx(f, para("a")+`<w:tbl><w:tr><w:tc>`+para("b")+`</w:tc></w:tr></w:tbl>`, entry{"image1.png", img}), uint8(0))
	f.Add(zipOf(f, entry{"xl/workbook.xml", []byte(`<workbook><sheets><sheet name="S" r:id="r1" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"/></sheets></workbook>`)},
		entry{"xl/_rels/workbook.xml.rels", []byte(`<Relationships><Relationship Id="r1" Target="worksheets/s.xml"/></Relationships>`)},
		entry{"xl/worksheets/s.xml", []byte(`<worksheet><sheetData><row><c r="ZZZ9" t="s"><v>7</v></c></row></sheetData></worksheet>`)}), uint8(1))
	f.Add(zipOf(f, entry{"ppt/presentation.xml", []byte(`<p:presentation/>`)}, entry{"ppt/slides/slide1.xml", slide("s")}), uint8(2))
	f.Add(odf(f, mimeODS, `<office:spreadsheet><table:table table:name="x"><table:table-row><table:table-cell table:number-columns-repeated="9"><text:p>v</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet>`), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		mt := []string{mimeDOCX, mimeXLSX, mimePPTX, mimeODS}[which%4]
		res, err := attachments.Convert("f", mt, data, nil)
		if err != nil {
			return
		}
		if res.Text == "" || len(res.Images) > attachments.MaxImages {
			t.Errorf("text %q, %d images", res.Text, len(res.Images))
		}
		for _, im := range res.Images {
			if len(im.Data) > attachments.MaxImageBytes {
				t.Errorf("image %s of %d bytes", im.Name, len(im.Data))
			}
		}
	})
}

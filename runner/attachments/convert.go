package attachments

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"strings"
)

// Limits of the conversion. The image limits are those of spec §8; the archive limits guard
// against ZIP bombs where the spec names none.
const (
	// MaxImages is the number of embedded images extracted across all attachments of a request.
	MaxImages = 20
	// MaxImagesBytes is the total size of the embedded images extracted across all attachments
	// of a request (15 MB, decimal).
	MaxImagesBytes = 15_000_000
	// MaxImageBytes is the size of one extracted image: 3.75 MiB.
	MaxImageBytes = 3_932_160
	// MaxEntries is the number of entries a ZIP archive may hold.
	MaxEntries = 10_000
	// MaxXMLBytes is the decompressed size of the XML parts read from one file.
	MaxXMLBytes = 50 << 20
)

// Reasons an embedded medium is left out, as listed in the converted text.
const (
	ReasonNotImage   = "not an image type the model accepts"
	ReasonImageSize  = "over 3.75 MiB"
	ReasonImageCount = "more than 20 images in this request"
	ReasonImageBytes = "over the 15 MB of images for this request"
	ReasonUnreadable = "its data is corrupt and cannot be read"
)

// Errors of Convert, matched with errors.Is. Both are the client's fault (a 400).
var (
	// ErrCorrupt means the file is not a valid file of its declared type.
	ErrCorrupt = errors.New("attachments: corrupt file")
	// ErrTooLarge means the file decompresses to more than the limits allow.
	ErrTooLarge = errors.New("attachments: file too large when decompressed")
	// ErrUnsupported means the MIME type is not one Convert handles.
	ErrUnsupported = errors.New("attachments: unsupported type")
)

// Format is a file format Convert reads.
type Format int

// The formats.
const (
	FormatUnknown Format = iota
	FormatDOCX
	FormatXLSX
	FormatPPTX
	FormatODF // ODT, ODS, ODP (and other OpenDocument files with a content.xml)
	FormatRTF
)

// String names the format.
func (f Format) String() string {
	switch f {
	case FormatDOCX:
		return "DOCX"
	case FormatXLSX:
		return "XLSX"
	case FormatPPTX:
		return "PPTX"
	case FormatODF:
		return "OpenDocument"
	case FormatRTF:
		return "RTF"
	}
	return "unknown"
}

// Image is an image extracted from a file.
type Image struct {
	Name     string // "<filename>/<image>", such as "plan.docx/image1.png"
	MimeType string // image/png, image/jpeg, image/gif or image/webp (sniffed from the data)
	Data     []byte
}

// LeftOut is an embedded medium that was not extracted.
type LeftOut struct {
	Name   string // "<filename>/<medium>"
	Reason string // one of the Reason constants
}

// Result is a converted file.
type Result struct {
	// Text is the file's text, followed by the list of the extracted images and of the media
	// left out. It is never empty.
	Text    string
	Images  []Image
	LeftOut []LeftOut
}

// Budget counts the embedded images extracted across all attachments of one request. The zero
// value is an unused budget. A Budget is not safe for concurrent use.
type Budget struct {
	images int
	bytes  int64
}

// Images returns the number of images taken so far.
func (b *Budget) Images() int { return b.images }

// Bytes returns the bytes of images taken so far.
func (b *Budget) Bytes() int64 { return b.bytes }

// Supported reports whether Convert handles the MIME type (parameters are ignored): Office
// Open XML, OpenDocument and RTF.
func Supported(mimeType string) bool {
	return familyOf(mimeType) != familyNone
}

type family int

const (
	familyNone family = iota
	familyOOXML
	familyODF
	familyRTF
)

func familyOf(mimeType string) family {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(mimeType))
	}
	switch {
	case strings.HasPrefix(mt, "application/vnd.openxmlformats-officedocument."):
		return familyOOXML
	case strings.HasPrefix(mt, "application/vnd.oasis.opendocument."):
		return familyODF
	case mt == "application/rtf", mt == "text/rtf", mt == "application/x-rtf", mt == "text/richtext":
		return familyRTF
	}
	return familyNone
}

// Convert converts the file data, declared as mimeType and named filename, to text and
// extracted images, taking the images from budget (nil: a budget for this file alone). The
// declared type picks the family (Office Open XML, OpenDocument or RTF); the content decides
// which document of the family it is. Errors wrap ErrCorrupt, ErrTooLarge or ErrUnsupported
// and say what is wrong in words a user can act on.
func Convert(filename, mimeType string, data []byte, budget *Budget) (*Result, error) {
	return convert(filename, mimeType, data, budget, archiveLimits{entries: MaxEntries, xmlBytes: MaxXMLBytes})
}

// archiveLimits are the ZIP bomb guards (tests lower them to reach their edges cheaply).
type archiveLimits struct {
	entries  int
	xmlBytes int64
}

func convert(filename, mimeType string, data []byte, budget *Budget, lim archiveLimits) (*Result, error) {
	if budget == nil {
		budget = &Budget{}
	}
	fam := familyOf(mimeType)
	if fam == familyNone {
		return nil, fmt.Errorf("%w: %q is not an Office Open XML, OpenDocument or RTF type", ErrUnsupported, mimeType)
	}
	if fam == familyRTF {
		text, err := RTFText(data)
		if err != nil {
			return nil, err
		}
		return finish(filename, text, nil, nil), nil
	}
	a, err := openArchive(data, lim)
	if err != nil {
		return nil, err
	}
	format := a.detect()
	var text string
	switch format {
	case FormatDOCX:
		text, err = docxText(a)
	case FormatXLSX:
		text, err = xlsxText(a)
	case FormatPPTX:
		text, err = pptxText(a)
	case FormatODF:
		text, err = odfText(a)
	default:
		if fam == familyODF {
			return nil, fmt.Errorf("%w: not an OpenDocument file (no content.xml in the archive)", ErrCorrupt)
		}
		return nil, fmt.Errorf("%w: not an Office Open XML document (no word/document.xml, xl/workbook.xml or ppt/presentation.xml in the archive)", ErrCorrupt)
	}
	if err != nil {
		return nil, err
	}
	images, left := extractMedia(a, format, filename, budget)
	return finish(filename, text, images, left), nil
}

// finish tidies the text and appends the lists of images and left-out media.
func finish(filename, text string, images []Image, left []LeftOut) *Result {
	var b strings.Builder
	b.WriteString(tidy(text))
	if b.Len() == 0 {
		b.WriteString("(" + filename + " holds no text)")
	}
	if len(images) > 0 {
		b.WriteString("\n\nImages embedded in this file, attached after this text:")
		for _, im := range images {
			b.WriteString("\n- " + im.Name)
		}
	}
	if len(left) > 0 {
		b.WriteString("\n\nEmbedded media left out:")
		for _, l := range left {
			b.WriteString("\n- " + l.Name + ": " + l.Reason)
		}
	}
	return &Result{Text: b.String(), Images: images, LeftOut: left}
}

// tidy trims trailing spaces of lines, drops runs of more than one blank line and trims the
// ends.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// archive is an opened ZIP file with a budget of decompressed XML.
type archive struct {
	files   []*zip.File
	byName  map[string]*zip.File
	xmlLeft int64
	lim     archiveLimits
}

const (
	zipMagic = "PK\x03\x04"
	cfbMagic = "\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1" // OLE2 compound file: .doc, .xls, .ppt
)

func openArchive(data []byte, lim archiveLimits) (*archive, error) {
	if bytes.HasPrefix(data, []byte(cfbMagic)) {
		return nil, fmt.Errorf("%w: this is a legacy binary Office file (.doc, .xls or .ppt), not Office Open XML or OpenDocument; save it as .docx, .xlsx, .pptx or OpenDocument", ErrCorrupt)
	}
	if !bytes.HasPrefix(data, []byte(zipMagic)) {
		return nil, fmt.Errorf("%w: not a ZIP archive (Office Open XML and OpenDocument files are ZIP archives)", ErrCorrupt)
	}
	if n, ok := entryCount(data); ok && n > lim.entries {
		return nil, fmt.Errorf("%w: the archive holds %d entries; at most %d", ErrTooLarge, n, lim.entries)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // nothing is written to disk
		return nil, fmt.Errorf("%w: not a valid ZIP archive: %v", ErrCorrupt, err)
	}
	if len(zr.File) > lim.entries {
		return nil, fmt.Errorf("%w: the archive holds %d entries; at most %d", ErrTooLarge, len(zr.File), lim.entries)
	}
	a := &archive{files: zr.File, byName: make(map[string]*zip.File, len(zr.File)), xmlLeft: lim.xmlBytes, lim: lim}
	for _, f := range zr.File {
		if _, dup := a.byName[f.Name]; !dup {
			a.byName[f.Name] = f
		}
	}
	return a, nil
}

// entryCount reads the number of entries from the end of central directory record, so that
// an archive with too many entries is refused before its directory is parsed. ok is false
// when the record is not found or defers to ZIP64.
func entryCount(data []byte) (n int, ok bool) {
	const eocdLen = 22
	start := max(0, len(data)-eocdLen-0xFFFF)
	i := bytes.LastIndex(data[start:], []byte("PK\x05\x06"))
	if i < 0 || start+i+eocdLen > len(data) {
		return 0, false
	}
	rec := data[start+i:]
	total := int(binary.LittleEndian.Uint16(rec[10:12]))
	if total == 0xFFFF {
		return 0, false
	}
	return total, true
}

// detect tells the document by its parts.
func (a *archive) detect() Format {
	switch {
	case a.byName["word/document.xml"] != nil:
		return FormatDOCX
	case a.byName["xl/workbook.xml"] != nil:
		return FormatXLSX
	case a.byName["ppt/presentation.xml"] != nil:
		return FormatPPTX
	case a.byName["content.xml"] != nil:
		return FormatODF
	}
	return FormatUnknown
}

// errMissing is returned by read for an absent entry.
var errMissing = errors.New("missing entry")

// read decompresses an XML entry, charging it to the archive's XML budget.
func (a *archive) read(name string) ([]byte, error) {
	f := a.byName[name]
	if f == nil {
		return nil, fmt.Errorf("%w: %s is missing from the archive: %w", ErrCorrupt, name, errMissing)
	}
	if f.UncompressedSize64 > uint64(a.xmlLeft) {
		return nil, fmt.Errorf("%w: %s decompresses to %d bytes; at most %d bytes of XML per file", ErrTooLarge, name, f.UncompressedSize64, a.lim.xmlBytes)
	}
	b, err := readLimited(f, a.xmlLeft)
	if errors.Is(err, errOverLimit) {
		return nil, fmt.Errorf("%w: %s decompresses to more than the %d bytes of XML allowed per file", ErrTooLarge, name, a.lim.xmlBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read %s: %v", ErrCorrupt, name, err)
	}
	a.xmlLeft -= int64(len(b))
	return b, nil
}

var errOverLimit = errors.New("over the limit")

// readLimited decompresses f, failing with errOverLimit past limit bytes whatever its header
// says.
func readLimited(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if f.UncompressedSize64 <= uint64(limit) {
		buf.Grow(int(f.UncompressedSize64))
	}
	n, err := buf.ReadFrom(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errOverLimit
	}
	return buf.Bytes(), nil
}

// resolve joins a relationship target to the folder of the part that names it; an absolute
// target ("/xl/worksheets/sheet1.xml") is taken from the archive root.
func resolve(dir, target string) string {
	if strings.HasPrefix(target, "/") {
		return strings.TrimPrefix(path.Clean(target), "/")
	}
	return strings.TrimPrefix(path.Join(dir, target), "/")
}

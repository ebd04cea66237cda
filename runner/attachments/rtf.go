package attachments

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// rtfSkipped reports whether a destination holds no body text. Every \* destination is
// skipped too.
func rtfSkipped(word string) bool {
	switch word {
	case "fonttbl", "colortbl", "stylesheet", "info", "pict", "header", "headerl", "headerr", "headerf", "footer",
		"footerl", "footerr", "footerf", "fldinst", "xe", "tc", "txe", "rxe", "bkmkstart", "bkmkend", "listtable",
		"listoverridetable", "revtbl", "rsidtbl", "filetbl", "generator", "themedata", "colorschememapping",
		"latentstyles", "datastore", "xmlnstbl", "nonshppict", "private", "footnote", "annotation", "atnid",
		"atnauthor", "pn", "pntxta", "pntxtb", "sp", "objdata", "objclass", "objname", "template":
		return true
	}
	return false
}

// rtfSymbol returns the text of a control word that stands for a character.
func rtfSymbol(word string) (string, bool) {
	switch word {
	case "par":
		return "\n", true
	case "line":
		return "\n", true
	case "sect":
		return "\n\n", true
	case "page":
		return "\n\n", true
	case "tab":
		return "\t", true
	case "lquote":
		return "\u2018", true
	case "rquote":
		return "\u2019", true
	case "ldblquote":
		return "\u201C", true
	case "rdblquote":
		return "\u201D", true
	case "bullet":
		return "\u2022", true
	case "endash":
		return "\u2013", true
	case "emdash":
		return "\u2014", true
	case "enspace":
		return " ", true
	case "emspace":
		return " ", true
	case "qmspace":
		return " ", true
	case "zwj":
		return "\u200D", true
	case "zwnj":
		return "\u200C", true
	case "cell":
		return " | ", true
	case "nestcell":
		return " | ", true
	}
	return "", false
}

// RTFText returns the text of an RTF document. Only input that does not start with "{\rtf" is
// an error (wrapping ErrCorrupt); damage further on (unbalanced braces, truncation) yields
// what could be read.
func RTFText(data []byte) (string, error) {
	body := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF")), " \t\r\n")
	if !bytes.HasPrefix(body, []byte(`{\rtf`)) {
		return "", fmt.Errorf(`%w: not an RTF file (it does not start with {\rtf)`, ErrCorrupt)
	}
	r := rtfReader{data: body, cur: rtfGroup{uc: 1}, dec: charmap.Windows1252.NewDecoder()}
	r.run()
	r.flush()
	return string(r.out), nil
}

// rtfGroup is the state a group restores on '}'.
type rtfGroup struct {
	skip bool // inside a destination without body text
	uc   int  // fallback characters after \uN
}

type rtfReader struct {
	data    []byte
	pos     int
	stack   []rtfGroup
	cur     rtfGroup
	out     []byte
	pending []byte            // text bytes in the code page, not decoded yet
	dec     *encoding.Decoder // nil: UTF-8
	skipN   int               // fallback characters still to skip after \uN
	high    rune              // a pending high surrogate of \uN
}

func (r *rtfReader) run() {
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch c {
		case '{':
			r.pos++
			r.stack = append(r.stack, r.cur)
			r.skipN = 0
		case '}':
			r.pos++
			if n := len(r.stack); n > 0 {
				r.cur = r.stack[n-1]
				r.stack = r.stack[:n-1]
			}
			r.skipN = 0
		case '\\':
			r.control()
		case '\r', '\n':
			r.pos++
		default:
			r.pos++
			r.char(c)
		}
	}
}

// char takes one text byte in the code page.
func (r *rtfReader) char(c byte) {
	if r.skipN > 0 {
		r.skipN--
		return
	}
	if !r.cur.skip {
		r.pending = append(r.pending, c)
	}
}

// emit writes decoded text.
func (r *rtfReader) emit(s string) {
	if r.skipN > 0 {
		r.skipN--
		return
	}
	if r.cur.skip {
		return
	}
	r.flush()
	r.out = append(r.out, s...)
}

// flush decodes the pending code-page bytes.
func (r *rtfReader) flush() {
	if r.high != 0 {
		r.out = utf8.AppendRune(r.out, utf8.RuneError)
		r.high = 0
	}
	if len(r.pending) == 0 {
		return
	}
	if r.dec == nil {
		r.out = append(r.out, bytes.ToValidUTF8(r.pending, []byte("\uFFFD"))...)
	} else if s, err := r.dec.Bytes(r.pending); err == nil {
		r.out = append(r.out, bytes.ToValidUTF8(s, []byte("\uFFFD"))...)
	} else {
		r.out = utf8.AppendRune(r.out, utf8.RuneError)
	}
	r.pending = r.pending[:0]
}

// control reads a control word or symbol at r.pos (a backslash).
func (r *rtfReader) control() {
	r.pos++ // the backslash
	if r.pos >= len(r.data) {
		return
	}
	c := r.data[r.pos]
	if !isLetter(c) {
		r.pos++
		switch c {
		case '\'':
			if r.pos+2 <= len(r.data) {
				if b, err := strconv.ParseUint(string(r.data[r.pos:r.pos+2]), 16, 8); err == nil {
					r.pos += 2
					r.char(byte(b))
				}
			}
		case '*':
			r.cur.skip = true // we know no \* destination with body text
		case '\\', '{', '}':
			r.char(c)
		case '~':
			r.emit("\u00A0")
		case '_':
			r.emit("-")
		case '\n', '\r':
			r.emit("\n")
		default: // \- optional hyphen, \: index subentry, \| formula: nothing to show
			if r.skipN > 0 {
				r.skipN--
			}
		}
		return
	}
	start := r.pos
	for r.pos < len(r.data) && isLetter(r.data[r.pos]) && r.pos-start < 32 {
		r.pos++
	}
	word := string(r.data[start:r.pos])
	param, hasParam := 0, false
	if r.pos < len(r.data) && (r.data[r.pos] == '-' || isDigit(r.data[r.pos])) {
		ds := r.pos
		if r.data[r.pos] == '-' {
			r.pos++
		}
		for r.pos < len(r.data) && isDigit(r.data[r.pos]) {
			r.pos++
		}
		if n, err := strconv.Atoi(string(r.data[ds:r.pos])); err == nil && n > -1<<31 && n < 1<<31 {
			param, hasParam = n, true
		}
	}
	if r.pos < len(r.data) && r.data[r.pos] == ' ' {
		r.pos++
	}
	r.word(word, param, hasParam)
}

// word acts on a control word.
func (r *rtfReader) word(word string, param int, hasParam bool) {
	if word == "bin" { // binary data follows, whatever the state
		if hasParam && param > 0 {
			r.pos = min(len(r.data), r.pos+param)
		}
		return
	}
	if r.skipN > 0 && word != "u" { // a control word may be a \uN fallback
		r.skipN--
		return
	}
	if rtfSkipped(word) {
		r.cur.skip = true
		return
	}
	switch word {
	case "uc":
		if hasParam && param >= 0 {
			r.cur.uc = min(param, 8)
		}
	case "u":
		if !hasParam {
			return
		}
		r.skipN = 0
		if param < 0 {
			param += 65536
		}
		r.unicode(rune(param))
		r.skipN = r.cur.uc
	case "ansicpg":
		if hasParam {
			r.setCodePage(param)
		}
	case "ansi":
		r.setCodePage(1252)
	case "mac":
		r.setCodePage(10000)
	case "pc":
		r.setCodePage(437)
	case "pca":
		r.setCodePage(850)
	case "row", "nestrow":
		if r.cur.skip {
			return
		}
		r.flush()
		r.out = bytes.TrimSuffix(r.out, []byte(" | "))
		r.out = append(r.out, '\n')
	default:
		if s, ok := rtfSymbol(word); ok {
			r.emit(s)
		}
	}
}

// unicode writes the character of a \uN, joining UTF-16 surrogate pairs.
func (r *rtfReader) unicode(c rune) {
	if r.cur.skip {
		return
	}
	switch {
	case utf16.IsSurrogate(c) && c < 0xDC00: // high
		r.flush()
		r.high = c
		return
	case utf16.IsSurrogate(c): // low
		high := r.high
		r.high = 0
		r.flush()
		if high != 0 {
			c = utf16.DecodeRune(high, c)
		} else {
			c = utf8.RuneError
		}
	default:
		r.flush()
	}
	r.out = utf8.AppendRune(r.out, c)
}

func (r *rtfReader) setCodePage(cp int) {
	r.flush()
	switch cp {
	case 65001:
		r.dec = nil
		return
	case 932:
		r.dec = japanese.ShiftJIS.NewDecoder()
		return
	case 936:
		r.dec = simplifiedchinese.GBK.NewDecoder()
		return
	case 949:
		r.dec = korean.EUCKR.NewDecoder()
		return
	case 950:
		r.dec = traditionalchinese.Big5.NewDecoder()
		return
	}
	if cm := codePage(cp); cm != nil {
		r.dec = cm.NewDecoder()
	}
}

// codePage returns the single-byte code page RTF names with \ansicpg, or nil.
func codePage(cp int) *charmap.Charmap {
	switch cp {
	case 437:
		return charmap.CodePage437
	case 850:
		return charmap.CodePage850
	case 852:
		return charmap.CodePage852
	case 855:
		return charmap.CodePage855
	case 858:
		return charmap.CodePage858
	case 860:
		return charmap.CodePage860
	case 862:
		return charmap.CodePage862
	case 863:
		return charmap.CodePage863
	case 865:
		return charmap.CodePage865
	case 866:
		return charmap.CodePage866
	case 874:
		return charmap.Windows874
	case 1250:
		return charmap.Windows1250
	case 1251:
		return charmap.Windows1251
	case 1252:
		return charmap.Windows1252
	case 1253:
		return charmap.Windows1253
	case 1254:
		return charmap.Windows1254
	case 1255:
		return charmap.Windows1255
	case 1256:
		return charmap.Windows1256
	case 1257:
		return charmap.Windows1257
	case 1258:
		return charmap.Windows1258
	case 10000:
		return charmap.Macintosh
	case 10007:
		return charmap.MacintoshCyrillic
	case 28591:
		return charmap.ISO8859_1
	case 28592:
		return charmap.ISO8859_2
	case 28595:
		return charmap.ISO8859_5
	case 28605:
		return charmap.ISO8859_15
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// Package attachments converts the Office Open XML (DOCX, XLSX, PPTX), OpenDocument (ODT, ODS,
// ODP) and RTF attachments of a chat request to text at ingestion (spec §2.5), because the
// model APIs accept only images, PDFs and text.
//
// The PNG, JPEG, GIF and WebP images embedded in an Office or OpenDocument file are extracted
// as separate images named "<filename>/<image>" that follow the text. They share one Budget
// per request, which enforces the limits of spec §8: at most MaxImages images and
// MaxImagesBytes bytes across all attachments of the request, each image at most
// MaxImageBytes. Images over a limit and embedded media the model cannot take (video, audio,
// EMF/WMF, SVG, TIFF...) are left out; the converted text lists them with the reason, so the
// model knows what it does not see.
//
// The readers use archive/zip and encoding/xml only, and read the parts they need as streams
// of XML tokens. Every archive is treated as hostile: the number of entries, the decompressed
// size of the XML read from one file and the size of each image are capped, and each cap is
// checked against the entry header before anything is decompressed and again, through a
// limited reader, while decompressing (a header may lie).
//
// RTF has no usable Go library here, so rtf.go is a small reader: groups, control words,
// \'hh bytes in the \ansicpg code page, \uN with its \ucN fallback count, and the
// destinations that hold no body text (font and colour tables, style sheet, info, pictures,
// field instructions, every \* destination) skipped.
package attachments

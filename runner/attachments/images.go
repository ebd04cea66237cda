package attachments

import (
	"archive/zip"
	"bytes"
	"errors"
	"path"
	"slices"
	"strings"
)

// mediaDirs are the folders that hold a format's embedded media.
func mediaDirs(f Format) []string {
	switch f {
	case FormatDOCX:
		return []string{"word/media/"}
	case FormatXLSX:
		return []string{"xl/media/"}
	case FormatPPTX:
		return []string{"ppt/media/"}
	case FormatODF:
		return []string{"Pictures/", "Media/", "media/"}
	}
	return nil
}

// imageExt reports whether a file name extension is that of an image type the model accepts.
func imageExt(ext string) bool {
	switch strings.ToLower(ext) {
	case ".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".gif", ".webp":
		return true
	}
	return false
}

// extractMedia takes the embedded images of the archive, in natural name order, within the
// per-image limit and what is left of budget. Everything else is left out with its reason.
func extractMedia(a *archive, format Format, filename string, budget *Budget) ([]Image, []LeftOut) {
	var media []*zip.File
	for _, f := range a.files {
		if f.FileInfo().IsDir() || strings.HasSuffix(f.Name, "/") {
			continue
		}
		for _, dir := range mediaDirs(format) {
			if strings.HasPrefix(f.Name, dir) {
				media = append(media, f)
				break
			}
		}
	}
	slices.SortStableFunc(media, func(x, y *zip.File) int { return naturalCompare(x.Name, y.Name) })

	var images []Image
	var left []LeftOut
	for _, f := range media {
		name := filename + "/" + path.Base(f.Name)
		leave := func(reason string) { left = append(left, LeftOut{Name: name, Reason: reason}) }
		if !imageExt(path.Ext(f.Name)) {
			leave(ReasonNotImage)
			continue
		}
		// Check the header before decompressing anything.
		if f.UncompressedSize64 > MaxImageBytes {
			leave(ReasonImageSize)
			continue
		}
		if budget.images >= MaxImages {
			leave(ReasonImageCount)
			continue
		}
		if budget.bytes+int64(f.UncompressedSize64) > MaxImagesBytes {
			leave(ReasonImageBytes)
			continue
		}
		data, err := readLimited(f, MaxImageBytes)
		switch {
		case errors.Is(err, errOverLimit): // the header understated the size
			leave(ReasonImageSize)
			continue
		case err != nil:
			leave(ReasonUnreadable)
			continue
		}
		mt := sniffImage(data)
		if mt == "" {
			leave(ReasonNotImage)
			continue
		}
		if budget.bytes+int64(len(data)) > MaxImagesBytes {
			leave(ReasonImageBytes)
			continue
		}
		budget.images++
		budget.bytes += int64(len(data))
		images = append(images, Image{Name: name, MimeType: mt, Data: data})
	}
	return images, left
}

// sniffImage returns the MIME type of PNG, JPEG, GIF and WebP data, or "".
func sniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// sortNatural sorts names so that "image2" comes before "image10".
func sortNatural(names []string) { slices.SortStableFunc(names, naturalCompare) }

// naturalCompare compares strings with runs of digits compared by value.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

package attachments

// ConvertLimited is Convert with lower ZIP bomb limits, so that tests reach their edges
// without building archives of 10,000 entries or 50 MB of XML.
func ConvertLimited(filename, mimeType string, data []byte, entries int, xmlBytes int64) (*Result, error) {
	return convert(filename, mimeType, data, nil, archiveLimits{entries: entries, xmlBytes: xmlBytes})
}

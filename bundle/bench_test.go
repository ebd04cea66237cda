package bundle

import (
	"testing"
)

// BenchmarkPackSupportDesk measures Pack alone (tar + zstd of the tree and its JS).
func BenchmarkPackSupportDesk(b *testing.B) {
	src, err := FromFiles(fixtureFiles(b, "support-desk"), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	tree := src.(*Tree)
	js := map[string]string{"refund_request": "module.exports = {}", "triage": "module.exports = {}"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Pack(tree, js, Manifest{Format: Format, Digest: tree.Digest()}); err != nil {
			b.Fatal(err)
		}
	}
}

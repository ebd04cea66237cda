package runtime_test

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"image"
	pngenc "image/png"
	"strings"
	"testing"

	"svc/agent"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

const mimeDOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

// docxWithImage builds a DOCX holding text and, in word/media, a PNG image and an EMF.
func docxWithImage(t *testing.T, text string, pngData []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{
		{"word/document.xml", []byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			`<w:p><w:r><w:t>` + text + `</w:t></w:r></w:p></w:body></w:document>`)},
		{"word/media/image1.png", pngData},
		{"word/media/image2.emf", []byte("EMF data")},
	} {
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

func TestDOCXAttachmentReachesModelAsTextAndImage(t *testing.T) {
	var img bytes.Buffer
	if err := pngenc.Encode(&img, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"read it"}})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	doc := docxWithImage(t, "Launch on Monday", img.Bytes())
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": "summarise", "attachments": []map[string]string{{
		"mimeType": mimeDOCX, "data": base64.StdEncoding.EncodeToString(doc), "filename": "plan.docx"}}})
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if !strings.Contains(string(r.Body), "plan.docx/image2.emf was left out: not an image type the model accepts") {
		t.Errorf("answer has no warning for the EMF: %s", r.Body)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	msgs := reqs[0].JSON["messages"].([]any)
	user := msgs[len(msgs)-1].(map[string]any)
	parts, ok := user["content"].([]any)
	if !ok {
		t.Fatalf("user content is not a list of parts: %v", user["content"])
	}
	var texts, images []string
	for _, p := range parts {
		p := p.(map[string]any)
		switch p["type"] {
		case "text":
			texts = append(texts, str(p["text"]))
		case "image_url":
			images = append(images, str(p["image_url"].(map[string]any)["url"]))
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"summarise", "File plan.docx:\nLaunch on Monday", "- plan.docx/image1.png", "- plan.docx/image2.emf: not an image type the model accepts"} {
		if !strings.Contains(all, want) {
			t.Errorf("text parts lack %q:\n%s", want, all)
		}
	}
	if want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img.Bytes()); len(images) != 1 || images[0] != want {
		t.Errorf("image parts = %v", images)
	}
}

func TestCorruptOfficeAttachmentIs400(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": "m", "attachments": []map[string]string{
		{"mimeType": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte("fine"))},
		{"mimeType": mimeDOCX, "data": base64.StdEncoding.EncodeToString([]byte("not a zip")), "filename": "broken.docx"}}})
	if r.Status != 400 || r.JSON["field"] != "attachments[1].data" || !strings.Contains(string(r.Body), "broken.docx") || !strings.Contains(string(r.Body), "not a ZIP archive") {
		t.Errorf("corrupt DOCX: %d %s", r.Status, r.Body)
	}
}

func TestEmbeddedImageBudgetIsPerRequest(t *testing.T) {
	var img bytes.Buffer
	if err := pngenc.Encode(&img, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	// 21 DOCX files of one image each: the 21st image is left out, with a warning.
	var atts []map[string]string
	for i := range 21 {
		atts = append(atts, map[string]string{"mimeType": mimeDOCX, "filename": "f" + string(rune('a'+i)) + ".docx",
			"data": base64.StdEncoding.EncodeToString(docxWithImage(t, "t", img.Bytes()))})
	}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": "m", "attachments": atts})
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if body := string(r.Body); !strings.Contains(body, "fu.docx/image1.png was left out: more than 20 images in this request") ||
		strings.Contains(body, "ft.docx/image1.png was left out") {
		t.Errorf("answer: %s", body)
	}
}

package runtime

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The limits whose edge needs tens of megabytes are tested here, without HTTP and JSON around
// them, to keep the suite fast; limits_test.go covers the others over a real listener.

func TestReadJSONLimit(t *testing.T) {
	msg := []byte(`{"message":"big"}`)
	at := append(msg, bytes.Repeat([]byte(" "), MaxBodyBytes-len(msg))...)
	r := httptest.NewRequest("POST", "/chat", bytes.NewReader(at))
	r.ContentLength = -1 // as for a chunked body: the reader must enforce the limit
	var req chatRequest
	if err := readJSON(httptest.NewRecorder(), r, &req); err != nil || req.Message == nil || *req.Message != "big" {
		t.Fatalf("body of exactly %d bytes: %v", MaxBodyBytes, err)
	}
	r = httptest.NewRequest("POST", "/chat", io.MultiReader(bytes.NewReader(at), strings.NewReader(" ")))
	r.ContentLength = -1
	var ae *APIError
	if err := readJSON(httptest.NewRecorder(), r, &req); !errors.As(err, &ae) || ae.Code != CodeTooLarge {
		t.Fatalf("one byte more: err = %v, want request_too_large", err)
	}
	if got := catalog[CodeTooLarge].status; got != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d", got)
	}
}

func TestAttachmentDataLimit(t *testing.T) {
	text := "file"
	for _, c := range []struct {
		chars int
		ok    bool
	}{{MaxAttachmentChars, true}, {MaxAttachmentChars + 1, false}} {
		data := strings.Repeat("A", c.chars)
		req := chatRequest{Message: &text, Attachments: []attachment{{MimeType: "application/pdf", Data: data, Delivery: "context"}}}
		_, err := req.validate()
		if c.ok && err != nil {
			t.Errorf("%d characters: %v", c.chars, err)
		}
		var ae *APIError
		if !c.ok && (!errors.As(err, &ae) || ae.Field != "attachments[0].data") {
			t.Errorf("%d characters: err = %v, want a 400 naming attachments[0].data", c.chars, err)
		}
		req = chatRequest{Message: &text, Images: []attachment{{MimeType: "image/png", Data: data}}}
		_, err = req.validate()
		if !c.ok && (!errors.As(err, &ae) || ae.Field != "images[0].data") {
			t.Errorf("image of %d characters: err = %v", c.chars, err)
		}
	}
}

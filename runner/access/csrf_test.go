package access_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"svc/runner/access"
)

func TestCheckCSRF(t *testing.T) {
	const agent = "https://agent.example.com"
	tests := []struct {
		name, method string
		headers      map[string]string
		ok           bool
	}{
		{"GET needs nothing", "GET", nil, true},
		{"HEAD needs nothing", "HEAD", nil, true},
		{"POST from the agent's origin", "POST", map[string]string{"Origin": agent}, true},
		{"POST with X-Requested-With", "POST", map[string]string{"X-Requested-With": "XMLHttpRequest"}, true},
		{"cross-origin POST without the header", "POST", map[string]string{"Origin": "https://evil.com"}, false},
		{"POST without Origin nor header", "POST", nil, false},
		{"same host, other scheme", "POST", map[string]string{"Origin": "http://agent.example.com"}, false},
		{"opaque origin", "DELETE", map[string]string{"Origin": "null"}, false},
		{"cross-origin DELETE with the header", "DELETE", map[string]string{"Origin": "https://evil.com", "X-Requested-With": "fetch"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, agent+"/chat/stream", nil)
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			err := access.CheckCSRF(r, agent)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, access.ErrCSRF)) {
				t.Errorf("CheckCSRF = %v, want ok=%v (else ErrCSRF)", err, tt.ok)
			}
		})
	}
}

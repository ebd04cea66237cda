package registry_test

import (
	"errors"
	"strings"
	"testing"

	"svc/registry"
)

// The behaviour of Checked on real backends is covered by the conformance
// suite (registry/objectstest) that fsobjects and s3objects run; these are
// the key rules on their own, at their edges.

func TestValidateKey(t *testing.T) {
	tests := []struct {
		key     string
		wantErr string // "" for a valid key
	}{
		{"a", ""},
		{"bundles/agent/0123abcd.tar.zst", ""},
		{"a..b/c.d", ""},        // dots inside a segment are fine
		{".hidden/..x/x..", ""}, // segments that only start or end with dots
		{"ünïcode/ key with spaces", ""},
		{strings.Repeat("k", registry.MaxKeyLen), ""},
		{"", "key is empty"},
		{strings.Repeat("k", registry.MaxKeyLen+1), "more than 1024"},
		{"/a", `starts with "/"`},
		{"a//b", "empty path segment"},
		{"a/", "empty path segment"},
		{"..", `".." path segment`},
		{"a/../b", `".." path segment`},
		{".", `"." path segment`},
		{"a/./b", `"." path segment`},
		{`a\b`, "backslash"},
		{"a\x00b", "NUL"},
		{"a\xffb", "UTF-8"},
	}
	for _, tt := range tests {
		err := registry.ValidateKey(tt.key)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ValidateKey(%.40q) = %v, want nil", tt.key, err)
		case tt.wantErr != "" && (!errors.Is(err, registry.ErrInvalidKey) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ValidateKey(%.40q) = %v, want ErrInvalidKey mentioning %q", tt.key, err, tt.wantErr)
		}
	}
}

func TestCheckedIsIdempotent(t *testing.T) {
	once := registry.Checked(nil)
	if twice := registry.Checked(once); twice != once {
		t.Errorf("Checked(Checked(x)) = %#v, want the same wrapper %#v", twice, once)
	}
}

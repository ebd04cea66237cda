package bundle

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLimitsDefaults(t *testing.T) {
	want := Limits{MaxFileSize: 5 << 20, MaxTotalSize: 50 << 20, MaxFiles: 10_000, MaxDepth: 32}
	if diff := cmp.Diff(want, DefaultLimits()); diff != "" {
		t.Errorf("DefaultLimits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, Limits{}.withDefaults()); diff != "" {
		t.Errorf("zero Limits (-want +got):\n%s", diff)
	}
	custom := Limits{MaxFileSize: 1, MaxTotalSize: 2, MaxFiles: 3, MaxDepth: 4}
	if diff := cmp.Diff(custom, custom.withDefaults()); diff != "" {
		t.Errorf("custom Limits (-want +got):\n%s", diff)
	}
	// Tree limits are only lowered: a bundle must open under the defaults a runner applies.
	raised := Limits{MaxFileSize: 6 << 20, MaxTotalSize: 51 << 20, MaxFiles: 10_001, MaxDepth: 33}
	if diff := cmp.Diff(want, raised.withDefaults()); diff != "" {
		t.Errorf("raised Limits (-want +got):\n%s", diff)
	}
}

func TestSourceErrorIs(t *testing.T) {
	err := sourceErr("a/b", ErrTooLarge, "file is %d bytes", 7)
	if err.Error() != "a/b: file is 7 bytes" {
		t.Errorf("Error() = %q", err)
	}
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnsafePath) {
		t.Errorf("errors.Is does not match the kind only")
	}
}

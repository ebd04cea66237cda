package builder

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
)

func TestLimitsDefaults(t *testing.T) {
	want := Limits{MaxFileSize: 5 << 20, MaxTotalSize: 50 << 20, MaxFiles: 10_000, MaxDepth: 32, Timeout: DefaultTimeout}
	if diff := cmp.Diff(want, DefaultLimits()); diff != "" {
		t.Errorf("DefaultLimits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, Limits{}.withDefaults()); diff != "" {
		t.Errorf("zero Limits (-want +got):\n%s", diff)
	}
	custom := Limits{MaxFileSize: 1, MaxTotalSize: 2, MaxFiles: 3, MaxDepth: 4, Timeout: 5}
	if diff := cmp.Diff(custom, custom.withDefaults()); diff != "" {
		t.Errorf("custom Limits (-want +got):\n%s", diff)
	}
	// Tree limits are only lowered: a bundle must open under the defaults a runner applies.
	raised := Limits{MaxFileSize: 6 << 20, MaxTotalSize: 51 << 20, MaxFiles: 10_001, MaxDepth: 33, Timeout: time.Hour}
	if diff := cmp.Diff(Limits{MaxFileSize: 5 << 20, MaxTotalSize: 50 << 20, MaxFiles: 10_000, MaxDepth: 32, Timeout: time.Hour}, raised.withDefaults()); diff != "" {
		t.Errorf("raised Limits (-want +got):\n%s", diff)
	}
}

func TestBuildErrorMessage(t *testing.T) {
	err := &BuildError{Problems: agent.Problems{
		{File: "svc.json", Message: "missing required field \"version\""},
		{File: "svc/tools/bad/handler.ts", Line: 2, Message: "TypeScript does not compile"},
	}}
	want := "builder: invalid source tree, 2 problems:\n" +
		"  svc.json: missing required field \"version\"\n" +
		"  svc/tools/bad/handler.ts:2: TypeScript does not compile"
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	one := &BuildError{Problems: agent.Problems{{File: ".", Message: "too big"}}}
	if !strings.Contains(one.Error(), "1 problem:") {
		t.Errorf("Error() = %q", one.Error())
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

package builder

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/bundle"
)

func TestLimitsDefaults(t *testing.T) {
	want := Limits{Tree: bundle.DefaultLimits(), Timeout: DefaultTimeout}
	if diff := cmp.Diff(want, DefaultLimits()); diff != "" {
		t.Errorf("DefaultLimits (-want +got):\n%s", diff)
	}
	if got := (Limits{}).withDefaults(); got.Timeout != DefaultTimeout {
		t.Errorf("zero Limits: Timeout = %v, want %v", got.Timeout, DefaultTimeout)
	}
	if got := (Limits{Timeout: time.Hour}).withDefaults(); got.Timeout != time.Hour {
		t.Errorf("custom Timeout = %v, want 1h", got.Timeout)
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

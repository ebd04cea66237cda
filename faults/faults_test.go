package faults

import (
	"os"
	"os/exec"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		name string
		n    int64
	}{{"", "", 1}, {"build.fetch", "build.fetch", 1}, {"chat.stream:5", "chat.stream", 5}, {"x:0", "x", 1}, {"x:y", "x", 1}} {
		if name, n := parse(tt.in); name != tt.name || n != tt.n {
			t.Errorf("parse(%q) = %q, %d; want %q, %d", tt.in, name, n, tt.name, tt.n)
		}
	}
}

// TestPointKills runs this test binary as a child armed at "p:3": it passes "q" and "p" twice
// and dies at the third "p".
func TestPointKills(t *testing.T) {
	if os.Getenv("FAULTS_TEST_CHILD") == "1" {
		Point("q")
		Point("p")
		Point("p")
		os.Stdout.WriteString("alive after 2\n")
		Point("p")
		os.Stdout.WriteString("alive after 3\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPointKills$")
	cmd.Env = append(os.Environ(), "FAULTS_TEST_CHILD=1", Env+"=p:3")
	out, err := cmd.Output()
	if err == nil || string(out) != "alive after 2\n" {
		t.Fatalf("child: %v, output %q; want it killed after two passes", err, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		t.Logf("child ended: %v", ee)
	}
}

func BenchmarkPointUnarmed(b *testing.B) {
	for b.Loop() {
		Point("build.fetch")
	}
}

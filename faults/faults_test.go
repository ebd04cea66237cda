package faults

import (
	"io"
	"os"
	"os/exec"
	"strings"
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

// TestReaderKills runs this test binary as a child armed at "r": it copies ten bytes, one byte a
// Read, through Reader and dies at the Read after the sixth byte (more than half of ten).
func TestReaderKills(t *testing.T) {
	if os.Getenv("FAULTS_TEST_CHILD") == "1" {
		r := Reader("r", strings.NewReader("0123456789"), 10)
		b := make([]byte, 1)
		for {
			if _, err := r.Read(b); err != nil {
				return
			}
			os.Stdout.Write(b)
		}
	}
	if r := strings.NewReader("x"); Reader("r", r, 1) != io.Reader(r) {
		t.Fatal("an unarmed Reader is not the reader itself")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaderKills$")
	cmd.Env = append(os.Environ(), "FAULTS_TEST_CHILD=1", Env+"=r")
	out, err := cmd.Output()
	if err == nil || string(out) != "012345" {
		t.Fatalf("child: %v, output %q; want it killed after six bytes", err, out)
	}
}

func BenchmarkPointUnarmed(b *testing.B) {
	for b.Loop() {
		Point("build.fetch")
	}
}

package main

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"svc/registry/s3objects"
)

// composeService is what TestComposeMatchesHarness reads of a service of compose.yaml.
type composeService struct {
	Command     command           `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Deploy      struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
}

// command is a service's command: a list, or a string split at spaces (the shell form).
type command []string

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *command) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*c = strings.Fields(n.Value)
		return nil
	}
	return n.Decode((*[]string)(c))
}

// TestComposeMatchesHarness (issue 16, item 6): compose.yaml starts exactly what the fault
// harness starts: the same roles, as many processes of each, with the same commands and the same
// settings (values differ: addresses, credentials), and the migration before them; a published
// port range has one port per process. Neither can drift from the other.
func TestComposeMatchesHarness(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	harness := clusterSettings("postgres://x", "redis://x", s3objects.Config{}, "pk_x")
	want := slices.Sorted(maps.Keys(harness))
	known := settingsList()
	for _, name := range want {
		if !slices.Contains(known, name) {
			t.Errorf("the harness sets %s, which is no setting of svc", name)
		}
	}
	roles := map[string]bool{}
	for _, r := range harnessRoles {
		roles[r.role] = true
		s, ok := f.Services[r.role]
		if !ok {
			t.Errorf("compose.yaml has no service %s; the harness starts %d", r.role, r.n)
			continue
		}
		replicas := max(s.Deploy.Replicas, 1)
		if replicas != r.n {
			t.Errorf("compose.yaml starts %d %s; the harness starts %d", replicas, r.role, r.n)
		}
		// The command, with the listen address as the harness gives it.
		addr := ""
		for i, a := range s.Command {
			if (a == "--addr" || a == "--metrics-addr") && i+1 < len(s.Command) {
				addr = s.Command[i+1]
			}
		}
		if got, wantCmd := normalAddr(s.Command, addr), normalAddr(roleArgs(r.role, "127.0.0.1:1"), "127.0.0.1:1"); !slices.Equal(got, wantCmd) {
			t.Errorf("compose.yaml runs %s as %q; the harness as %q", r.role, s.Command, roleArgs(r.role, "ADDR"))
		}
		// The same settings, no more, no fewer (SVC_FAULT is the harness's own, testing only).
		if got := slices.Sorted(maps.Keys(s.Environment)); !slices.Equal(got, want) {
			t.Errorf("compose.yaml gives %s the settings %q; the harness gives %q", r.role, got, want)
		}
		// Published ports: the container port is the one it listens on, one host port per process.
		for _, p := range s.Ports {
			hostPart, container, ok := strings.Cut(p, ":")
			_, listen, _ := net.SplitHostPort(addr)
			if !ok || addr == "" || container != listen {
				t.Errorf("compose.yaml publishes %q for %s, which listens on %q", p, r.role, addr)
				continue
			}
			lo, hi, isRange := strings.Cut(hostPart, "-")
			n := 1
			if isRange {
				a, errA := strconv.Atoi(lo)
				b, errB := strconv.Atoi(hi)
				if errA != nil || errB != nil {
					t.Errorf("compose.yaml publishes %q for %s: bad port range", p, r.role)
					continue
				}
				n = b - a + 1
			}
			if n != replicas {
				t.Errorf("compose.yaml publishes %q for %d %s processes: want one host port per process", p, replicas, r.role)
			}
		}
	}
	// The migration runs first, as the harness runs svc migrate on DATABASE_URL alone.
	if m, ok := f.Services["migrate"]; !ok || !slices.Equal(m.Command, []string{"migrate"}) || !slices.Equal(slices.Sorted(maps.Keys(m.Environment)), []string{"DATABASE_URL"}) {
		t.Errorf("compose.yaml's migrate service = %+v; want svc migrate on DATABASE_URL", m)
	}
	// Any other service runs no role of svc: the infrastructure only.
	for name, s := range f.Services {
		if !roles[name] && len(s.Command) > 0 && roles[s.Command[0]] {
			t.Errorf("compose.yaml's service %s runs svc %s, which the harness does not start as such", name, s.Command[0])
		}
	}
}

// normalAddr returns args with the value of --addr (a worker's --metrics-addr), which differs
// between compose and the harness, replaced by ADDR.
func normalAddr(args []string, addr string) []string {
	out := slices.Clone(args)
	for i := range out {
		if out[i] == addr && i > 0 && (out[i-1] == "--addr" || out[i-1] == "--metrics-addr") {
			out[i] = "ADDR"
		}
	}
	return out
}

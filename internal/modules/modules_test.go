package modules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowed is every module the library's packages may require directly,
// with what needs it.
var allowed = map[string]string{
	"golang.org/x/sys":                        "ackcore, affinity, perf: CPU features, pinning, perf events",
	"github.com/klauspost/cpuid/v2":           "affinity: cache and core topology",
	"github.com/aclements/go-perfevent":       "perf: hardware counters",
	"github.com/puzpuzpuz/xsync/v3":           "topology, netio: concurrent maps",
	"github.com/HdrHistogram/hdrhistogram-go": "topology: latency histograms",
	"github.com/prometheus/client_golang":     "topology/promexport, cmd/ackerd: metrics",
	"go.uber.org/goleak":                      "tests: no goroutine left behind",
}

// forbidden is what the other modules of the workspace exist to keep out
// of an embedder's graph, direct or indirect.
var forbidden = []string{
	"google.golang.org/grpc",
	"gonum.org/v1/plot",
	"github.com/nats-io/nats-server",
	"github.com/nats-io/nats.go",
	"github.com/twmb/franz-go",
	"github.com/schollz/progressbar",
}

// requires returns the module paths go.mod requires, each with whether
// it is marked indirect.
func requires(t *testing.T, gomod string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	block := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !block:
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 2 {
			out[f[0]] = strings.Contains(line, "// indirect")
		}
	}
	return out
}

func TestLibraryRequirements(t *testing.T) {
	req := requires(t, filepath.Join("..", "..", "go.mod"))
	if len(req) == 0 {
		t.Fatal("the library's go.mod requires nothing: parsed wrong")
	}
	var direct []string
	for m, indirect := range req {
		for _, f := range forbidden {
			if strings.HasPrefix(m, f) {
				t.Errorf("the library's go.mod requires %s: it belongs in a module of its own (harness, broker kit, examples)", m)
			}
		}
		if !indirect {
			direct = append(direct, m)
			if _, ok := allowed[m]; !ok {
				t.Errorf("the library's go.mod requires %s directly, which is not in the allowed list: add it there with what needs it, or keep it out of the library", m)
			}
		}
	}
	slices.Sort(direct)
	t.Logf("direct requirements: %s", strings.Join(direct, ", "))
}

// TestParse holds the parser to a go.mod of each shape it reads, so a
// library go.mod it misread could not pass as clean.
func TestParse(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "go.mod")
	src := "module m\n\ngo 1.26.0\n\nrequire a.example/x v1.0.0\n\nrequire (\n\tb.example/y v0.1.0\n\tc.example/z v0.2.0 // indirect\n)\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := requires(t, p)
	want := map[string]bool{"a.example/x": false, "b.example/y": false, "c.example/z": true}
	if len(got) != len(want) {
		t.Fatalf("requires = %v, want %v", got, want)
	}
	for m, ind := range want {
		if g, ok := got[m]; !ok || g != ind {
			t.Errorf("requires[%s] = %v, %v; want %v", m, g, ok, ind)
		}
	}
}

package modules

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestRequirable holds every module of the repository to what a dependent
// needs: no replace directive (a dependent ignores them), and each
// requirement of another of the repository's modules a pseudo-version of
// a real commit (not the zero version a replace once stood behind), which
// go.work points at the local directory, so that the workspace builds
// what is checked out. (CI's dependent build proves the versions resolve
// from the repository's own commits.)
func TestRequirable(t *testing.T) {
	root := filepath.Join("..", "..")
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{} // module path -> directory, from go.work's use
	for _, dir := range directives(string(work), "use") {
		f := strings.Fields(dir)
		b, err := os.ReadFile(filepath.Join(root, f[0], "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		dirs[modulePath(string(b))] = filepath.Clean(f[0])
	}
	if dirs["github.com/xorack/xorack"] != "." || len(dirs) < 6 {
		t.Fatalf("go.work uses %v: parsed wrong", dirs)
	}
	replaced := map[string]string{} // "path version" -> directory
	for _, r := range directives(string(work), "replace") {
		from, to, ok := strings.Cut(r, "=>")
		if !ok {
			t.Fatalf("go.work: replace %q", r)
		}
		replaced[strings.Join(strings.Fields(from), " ")] = filepath.Clean(strings.TrimSpace(to))
	}
	needed := map[string]bool{}
	for path, dir := range dirs {
		gomod := filepath.Join(root, dir, "go.mod")
		b, err := os.ReadFile(gomod)
		if err != nil {
			t.Fatal(err)
		}
		if rs := directives(string(b), "replace"); len(rs) > 0 {
			t.Errorf("%s: replace %q: a dependent ignores it; go.work keeps development local", gomod, rs)
		}
		for _, r := range directives(string(b), "require") {
			f := strings.Fields(r)
			if _, ours := dirs[f[0]]; !ours || len(f) < 2 {
				continue
			}
			key := f[0] + " " + f[1]
			needed[key] = true
			switch {
			case !pseudo.MatchString(f[1]) || strings.HasPrefix(f[1], "v0.0.0-00010101000000-"):
				t.Errorf("%s (%s) requires %s: want a pseudo-version of a commit of the repository", gomod, path, key)
			case replaced[key] != dirs[f[0]]:
				t.Errorf("%s requires %s, which go.work does not replace by %s (it has %q)", gomod, key, dirs[f[0]], replaced)
			}
		}
	}
	for key := range replaced {
		if !needed[key] {
			t.Errorf("go.work replaces %s, which no go.mod requires", key)
		}
	}
}

var pseudo = regexp.MustCompile(`^v0\.0\.0-\d{14}-[0-9a-f]{12}$`)

// directives returns the arguments of each directive of kind in a go.mod
// or go.work, single-line or in a block, comments dropped.
func directives(text, kind string) []string {
	var out []string
	block := false
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		switch {
		case line == kind+" (":
			block = true
		case block && line == ")":
			block = false
		case block && line != "":
			out = append(out, line)
		case strings.HasPrefix(line, kind+" "):
			out = append(out, strings.TrimSpace(strings.TrimPrefix(line, kind+" ")))
		}
	}
	return out
}

func modulePath(gomod string) string {
	if m := directives(gomod, "module"); len(m) == 1 {
		return m[0]
	}
	return ""
}

package kafkatest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The brokers stay out of the library: only source/kafka/... imports kfake
// and only source/jetstream/... imports nats-server (tests included), and
// only their own trees, examples/ and bench/ import the kits. A module
// split then leaves the library module requiring neither broker. The test
// walks the module's Go files from the repository root.
func TestBrokersStayInTheirTrees(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	rules := []struct {
		imp, tree string
		kit       bool // the kits: also examples/ and bench/
	}{
		{"github.com/twmb/franz-go/pkg/kfake", "source/kafka/", false},
		{"github.com/nats-io/nats-server/", "source/jetstream/", false},
		{"github.com/xorack/xorack/source/kafka/kafkatest", "source/kafka/", true},
		{"github.com/xorack/xorack/source/jetstream/jstest", "source/jetstream/", true},
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			for _, r := range rules {
				if !strings.HasPrefix(imp, r.imp) || strings.HasPrefix(rel, r.tree) {
					continue
				}
				if r.kit && (strings.HasPrefix(rel, "examples/") || strings.HasPrefix(rel, "bench/")) {
					continue
				}
				t.Errorf("%s imports %s, which only %s may", rel, imp, r.tree)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s: not the module", files, root)
	}
}

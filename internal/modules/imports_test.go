package modules

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// module is the repository's module path: its packages' imports go in a
// group of their own, after the standard library's and the others'.
const module = "github.com/xorack/xorack"

// importKind orders an import's group: the standard library (no dot in
// the first element), then other modules, then the repository's own.
func importKind(path string) int {
	switch {
	case path == module || strings.HasPrefix(path, module+"/"):
		return 2
	case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return 1
	}
	return 0
}

// TestImportGroups: in every Go file of the repository, the imports are
// grouped as goimports -local does: groups separated by a blank line,
// each of one kind, the standard library first and the repository's own
// packages last.
func TestImportGroups(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		prevKind, prevLine := -1, 0
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			kind, line := importKind(p), fset.Position(im.Pos()).Line
			newGroup := prevLine > 0 && line > prevLine+1
			if prevKind >= 0 && (kind < prevKind || kind > prevKind && !newGroup || kind == prevKind && newGroup) {
				t.Errorf("%s:%d: %q out of its group (standard library, others, then %s, each a group)", path, line, p, module)
			}
			prevKind, prevLine = kind, fset.Position(im.End()).Line
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s; the walk missed the repository", files, root)
	}
}

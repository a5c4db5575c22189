package main

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo makes a git repository with a root module and a submodule, the
// submodule requiring the root at the pseudo-version of the first commit
// (as the repository's submodules do), and returns it with that version.
func repo(t *testing.T) (dir, first string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir = t.TempDir()
	sh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	put := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sh("git", "init", "-q")
	put("go.mod", "module example.com/lib\n\ngo 1.26.0\n")
	put("lib.go", "package lib\n\nconst V = 1\n")
	sh("git", "add", "-A")
	sh("git", "commit", "-qm", "one")
	c, err := commitOf(dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	put("lib.go", "package lib\n\nconst V = 2\n")
	put("sub/go.mod", "module example.com/lib/sub\n\ngo 1.26.0\n\nrequire example.com/lib "+c.version+"\n")
	put("sub/sub.go", "package sub\n\nimport _ \"example.com/lib\"\n")
	sh("git", "add", "-A")
	sh("git", "commit", "-qm", "two")
	return dir, c.version
}

// TestBuild: both modules at HEAD's version, the root also at the version
// the submodule requires, from that commit's files; the submodule's files
// left out of the root's zip.
func TestBuild(t *testing.T) {
	dir, first := repo(t)
	head, err := commitOf(dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	served, err := build(dir, "HEAD", out)
	if err != nil {
		t.Fatal(err)
	}
	if len(served) != 2 || served[0].Version != head.version || served[1].Version != head.version {
		t.Fatalf("served %v, want both modules at %s", served, head.version)
	}
	v := filepath.Join(out, "example.com", "lib", "@v")
	list, err := os.ReadFile(filepath.Join(v, "list"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first, head.version}
	slices.Sort(want) // commits in the same second: their versions differ in the hash alone
	if got := strings.Fields(string(list)); !slices.Equal(got, want) {
		t.Errorf("list = %q, want %q", got, want)
	}
	for version, want := range map[string]string{first: "const V = 1", head.version: "const V = 2"} {
		b, err := os.ReadFile(filepath.Join(v, version+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
			if strings.HasSuffix(f.Name, "/lib.go") {
				r, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				var text bytes.Buffer
				text.ReadFrom(r)
				r.Close()
				if !strings.Contains(text.String(), want) {
					t.Errorf("%s: lib.go is %q, want %q", version, text.String(), want)
				}
			}
		}
		slices.Sort(names)
		if wantNames := []string{"example.com/lib@" + version + "/go.mod", "example.com/lib@" + version + "/lib.go"}; !slices.Equal(names, wantNames) {
			t.Errorf("%s zip holds %q, want %q", version, names, wantNames)
		}
		if info, err := os.ReadFile(filepath.Join(v, version+".info")); err != nil || !strings.Contains(string(info), `"Version":"`+version+`"`) {
			t.Errorf("%s.info: %q, %v", version, info, err)
		}
	}
	if mod, err := os.ReadFile(filepath.Join(out, "example.com", "lib", "sub", "@v", head.version+".mod")); err != nil || !strings.Contains(string(mod), "require example.com/lib "+first) {
		t.Errorf("the submodule's .mod: %q, %v", mod, err)
	}
}

// TestRequiredMissing: a submodule requiring a version whose commit the
// repository lacks fails the build, naming the go.mod and the version.
func TestRequiredMissing(t *testing.T) {
	dir, first := repo(t)
	bad := strings.Replace(first, first[len(first)-12:], "0123456789ab", 1)
	gomod := filepath.Join(dir, "sub", "go.mod")
	b, _ := os.ReadFile(gomod)
	if err := os.WriteFile(gomod, bytes.Replace(b, []byte(first), []byte(bad), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "three"}} {
		if _, err := git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	_, err := build(dir, "HEAD", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "sub/go.mod requires example.com/lib@"+bad) || !strings.Contains(err.Error(), "no commit") {
		t.Fatalf("build: %v, want an error naming sub/go.mod and %s", err, bad)
	}
}

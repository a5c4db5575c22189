// Command modproxy writes a Go module proxy (the GOPROXY file layout:
// <module>/@v/list, <version>.info, .mod and .zip) of this repository's
// modules, built from its git commits, so that a module outside the
// repository can require them with GOPROXY=file://<dir>, no network and no
// replace directive: what a dependent gets once the repository is
// published.
//
//	go run ./internal/modproxy -out "$(mktemp -d)"
//
// It serves every module of the repository (each directory with a go.mod
// at the revision) at the revision's pseudo-version, and each version that
// a go.mod of the revision requires of the repository's own modules (the
// submodules require the library at a pseudo-version of an earlier commit)
// from the commit that version names. Such a commit must be an ancestor
// of the revision, and the version's time must be the commit's: otherwise
// the version could not resolve for a dependent, and modproxy fails
// naming it. It prints each module served at the revision with its
// version, one "path version" line each.
//
//	go run ./internal/modproxy -pseudo main
//
// prints the pseudo-version of a commit instead: the version a submodule
// requires after `go mod edit -require=github.com/xorack/xorack@<it>`.
//
// It is a module of its own so that golang.org/x/mod never enters the
// library's requirements.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "`directory` to write the proxy into (GOPROXY=file://<it>)")
	rev := fs.String("rev", "HEAD", "git `revision` whose modules are served")
	repo := fs.String("repo", ".", "a `directory` inside the repository")
	pseudo := fs.String("pseudo", "", "print the pseudo-version of this git `revision` and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	root, err := git(*repo, "rev-parse", "--show-toplevel")
	if err != nil {
		fmt.Fprintf(stderr, "modproxy: %v\n", err)
		return 1
	}
	if *pseudo != "" {
		c, err := commitOf(root, *pseudo)
		if err != nil {
			fmt.Fprintf(stderr, "modproxy: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, c.version)
		return 0
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "modproxy: -out names the proxy's directory; no arguments")
		return 2
	}
	served, err := build(root, *rev, *out)
	if err != nil {
		fmt.Fprintf(stderr, "modproxy: %v\n", err)
		return 1
	}
	for _, m := range served {
		fmt.Fprintln(stdout, m.Path, m.Version)
	}
	return 0
}

// commit is a git commit with the pseudo-version it has as a module
// version.
type commit struct {
	hash    string
	time    time.Time
	version string
}

func commitOf(root, rev string) (commit, error) {
	s, err := git(root, "log", "-1", "--format=%H %ct", rev+"^{commit}", "--")
	if err != nil {
		return commit{}, err
	}
	hash, ts, _ := strings.Cut(s, " ")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return commit{}, fmt.Errorf("commit time of %s: %q", rev, ts)
	}
	t := time.Unix(sec, 0).UTC()
	return commit{hash: hash, time: t, version: module.PseudoVersion("", "", t, hash[:12])}, nil
}

// mod is one of the repository's modules at one commit.
type mod struct {
	path, dir string // module path; its directory from the repository root ("" for the root)
	gomod     []byte
}

// modules lists the modules of the repository at commit c.
func modules(root string, c commit) ([]mod, error) {
	files, err := git(root, "ls-tree", "-r", "--name-only", c.hash)
	if err != nil {
		return nil, err
	}
	var out []mod
	for _, f := range strings.Split(files, "\n") {
		if path.Base(f) != "go.mod" {
			continue
		}
		b, err := gitRaw(root, "show", c.hash+":"+f)
		if err != nil {
			return nil, err
		}
		p := modfile.ModulePath(b)
		if p == "" {
			return nil, fmt.Errorf("%s at %.12s: no module line", f, c.hash)
		}
		dir := path.Dir(f)
		if dir == "." {
			dir = ""
		}
		out = append(out, mod{path: p, dir: dir, gomod: b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no go.mod at %.12s", c.hash)
	}
	return out, nil
}

// build writes the proxy and returns the modules served at rev.
func build(root, rev, out string) ([]module.Version, error) {
	head, err := commitOf(root, rev)
	if err != nil {
		return nil, err
	}
	mods, err := modules(root, head)
	if err != nil {
		return nil, err
	}
	var served []module.Version
	for _, m := range mods {
		if err := write(root, out, m, head); err != nil {
			return nil, err
		}
		served = append(served, module.Version{Path: m.path, Version: head.version})
	}
	// The versions of the repository's own modules that its go.mod files
	// require, each from the commit it names.
	done := map[module.Version]bool{}
	for _, m := range mods {
		f, err := modfile.ParseLax(path.Join(m.dir, "go.mod"), m.gomod, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if !slices.ContainsFunc(mods, func(o mod) bool { return o.path == r.Mod.Path }) || done[r.Mod] || r.Mod.Version == head.version {
				continue
			}
			done[r.Mod] = true
			c, err := required(root, head, m, r.Mod)
			if err != nil {
				return nil, err
			}
			at, err := modules(root, c)
			if err != nil {
				return nil, err
			}
			i := slices.IndexFunc(at, func(o mod) bool { return o.path == r.Mod.Path })
			if i < 0 {
				return nil, fmt.Errorf("%s/go.mod requires %s: commit %.12s has no module %s", m.dir, r.Mod, c.hash, r.Mod.Path)
			}
			if err := write(root, out, at[i], c); err != nil {
				return nil, err
			}
		}
	}
	return served, nil
}

// required resolves a requirement of the repository's own module to the
// commit its pseudo-version names, which must be an ancestor of head and
// have the version's time.
func required(root string, head commit, by mod, v module.Version) (commit, error) {
	where := path.Join(by.dir, "go.mod")
	if !module.IsPseudoVersion(v.Version) {
		return commit{}, fmt.Errorf("%s requires %s: not a pseudo-version (tags are not served)", where, v)
	}
	rev, err := module.PseudoVersionRev(v.Version)
	if err != nil {
		return commit{}, fmt.Errorf("%s requires %s: %v", where, v, err)
	}
	c, err := commitOf(root, rev)
	if err != nil {
		return commit{}, fmt.Errorf("%s requires %s: no commit %s in the repository", where, v, rev)
	}
	if c.version != v.Version {
		return commit{}, fmt.Errorf("%s requires %s: commit %.12s has the pseudo-version %s", where, v, c.hash, c.version)
	}
	if _, err := git(root, "merge-base", "--is-ancestor", c.hash, head.hash); err != nil {
		return commit{}, fmt.Errorf("%s requires %s: commit %.12s is not an ancestor of %.12s", where, v, c.hash, head.hash)
	}
	return c, nil
}

// write adds module m at commit c to the proxy in out.
func write(root, out string, m mod, c commit) error {
	esc, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	v := module.Version{Path: m.path, Version: c.version}
	z, err := zipAt(root, v, c, m.dir)
	if err != nil {
		return fmt.Errorf("zip of %s: %v", v, err)
	}
	info := fmt.Sprintf("{\"Version\":%q,\"Time\":%q}\n", c.version, c.time.Format(time.RFC3339))
	for ext, b := range map[string][]byte{".info": []byte(info), ".mod": m.gomod, ".zip": z} {
		if err := os.WriteFile(filepath.Join(dir, c.version+ext), b, 0o644); err != nil {
			return err
		}
	}
	list, err := os.ReadFile(filepath.Join(dir, "list"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(list))
	if !slices.Contains(versions, c.version) {
		versions = append(versions, c.version)
	}
	slices.Sort(versions)
	return os.WriteFile(filepath.Join(dir, "list"), []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// zipAt returns the module zip of v, the files of directory dir at commit
// c as git archive gives them (what the go command takes from a
// repository), less nested modules and what module zips leave out.
func zipAt(root string, v module.Version, c commit, dir string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "modproxy")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	args := []string{"archive", "--format=tar", c.hash}
	if dir != "" {
		args = append(args, "--", dir)
	}
	archive := exec.Command("git", args...)
	archive.Dir = root
	untar := exec.Command("tar", "-x", "-C", tmp)
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return nil, err
	}
	if err := archive.Run(); err != nil {
		untar.Wait()
		return nil, fmt.Errorf("git archive %.12s: %v: %s", c.hash, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return nil, fmt.Errorf("tar: %v: %s", err, stderr.String())
	}
	var z bytes.Buffer
	if err := zip.CreateFromDir(&z, v, filepath.Join(tmp, filepath.FromSlash(dir))); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

func git(dir string, args ...string) (string, error) {
	b, err := gitRaw(dir, args...)
	return strings.TrimSpace(string(b)), err
}

// gitRaw returns what git printed, as it printed it.
func gitRaw(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return b, nil
}

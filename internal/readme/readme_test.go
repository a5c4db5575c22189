package readme

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmes are the READMEs whose commands the test runs, from the
// repository's root: the project's, and ackerd's operating guide.
var readmes = []string{"README.md", "cmd/ackerd/README.md"}

// command is one command of the README that starts something.
type command struct {
	line string   // as the README has it (the variant's flags appended)
	env  []string // NAME=value words before "go run"
	pkg  string   // what go run runs: ./cmd/ackerd
	args []string
}

var span = regexp.MustCompile("`([^`]+)`")

// commands returns the README's go run commands: each line of a sh block
// that has one, each inline span that starts with one, and each later span
// of the same paragraph that starts with a flag (a variant of the last
// command, "`-fail 0.05 -drop 0.01` for faults"), except variants that
// name an address of the reader's own ("-brokers host:9092",
// "-nats nats://..."), which need a real server.
func commands(readme string) []command {
	var out []command
	inSh, inFence := false, false
	var para []string
	flush := func() {
		var last *command
		for _, m := range span.FindAllStringSubmatch(strings.Join(para, " "), -1) {
			s := m[1]
			switch {
			case strings.HasPrefix(s, "go run "):
				if c, ok := parse(s); ok {
					out = append(out, c)
					last = &out[len(out)-1]
				}
			case strings.HasPrefix(s, "-") && last != nil && !strings.Contains(s, "host:") && !strings.Contains(s, "://"):
				v := *last
				v.line += " " + s
				v.args = append(slices.Clip(v.args), strings.Fields(s)...)
				out = append(out, v)
			}
		}
		para = para[:0]
	}
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "```") {
			flush()
			inFence = !inFence
			inSh = inFence && strings.TrimPrefix(l, "```") == "sh"
			continue
		}
		switch {
		case inSh:
			if i := strings.Index(l, "#"); i >= 0 {
				l = l[:i] // a comment
			}
			if c, ok := parse(strings.TrimSpace(l)); ok {
				out = append(out, c)
			}
		case inFence:
		case strings.TrimSpace(l) == "":
			flush()
		default:
			para = append(para, l)
		}
	}
	flush()
	return out
}

// parse reads "[NAME=value ...] go run PKG [ARGS...]".
func parse(line string) (command, bool) {
	f := strings.Fields(line)
	c := command{line: line}
	for len(f) > 0 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") {
		c.env, f = append(c.env, f[0]), f[1:]
	}
	if len(f) < 3 || f[0] != "go" || f[1] != "run" || !strings.HasPrefix(f[2], "./") {
		return command{}, false
	}
	c.pkg, c.args = f[2], f[3:]
	return c, true
}

// servers run until stopped: the test waits for the line that says the
// server listens (its addr=host:port), then for the first byte the server
// sends on a connection (ackerd speaks first, with its challenge: proof
// that it serves, which it starts after installing its signal handler),
// then sends SIGTERM and wants exit status 0.
var servers = map[string]string{"./cmd/ackerd": "ackerd: listening"}

var addrField = regexp.MustCompile(`addr=(\S+)`)

// shorter holds flags appended to a command that would otherwise run for
// long (the flags it has in the README are still parsed and used).
var shorter = map[string][]string{
	"./cmd/ackbench": {"-quick", "-level", "core", "-impl", "xorack,gomap", "-pending", "10k", "-reps", "1", "-progress", "off"},
}

// runFor bounds each command: the slowest, ackbench's shortened run,
// takes about 2 s on 2 vCPUs.
const runFor = time.Minute

func TestCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the README's commands (a few seconds each)")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []command
	for _, f := range readmes {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, commands(string(text))...)
	}
	var pkgs []string
	for _, c := range cmds {
		if !slices.Contains(pkgs, c.pkg) {
			pkgs = append(pkgs, c.pkg)
		}
	}
	// What the READMEs must keep showing: the test would pass vacuously
	// if the extraction missed them.
	for _, want := range []string{"./cmd/ackerd", "./cmd/ackbench", "./examples/wordcount", "./examples/kafka-wordcount", "./examples/jetstream-wordcount"} {
		if !slices.Contains(pkgs, want) {
			t.Errorf("the README runs no %s (found %q)", want, pkgs)
		}
	}
	bin := t.TempDir()
	// Without the symbol table and DWARF (-s -w): the test runs the
	// binaries and never debugs them, and the link takes a third less CPU.
	build := exec.Command("go", append([]string{"build", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}, pkgs...)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	for _, c := range cmds {
		t.Run(c.line, func(t *testing.T) {
			exe := filepath.Join(bin, filepath.Base(c.pkg))
			args := append(slices.Clip(c.args), shorter[c.pkg]...)
			if ready, ok := servers[c.pkg]; ok {
				runServer(t, c, exe, freePort(args), ready)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), runFor)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, args...)
			cmd.Dir, cmd.Env = t.TempDir(), append(os.Environ(), c.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", c.line, err, tail(out))
			}
		})
	}
}

// freePort turns -addr and -admin host:port into host:0: the README's
// ports may be taken on a CI machine, and ackerd's admin endpoint has a
// fixed default port, which is given one too when the command names none.
func freePort(args []string) []string {
	out := slices.Clone(args)
	admin := false
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-addr" || out[i] == "-admin" {
			admin = admin || out[i] == "-admin"
			if j := strings.LastIndex(out[i+1], ":"); j >= 0 {
				out[i+1] = out[i+1][:j] + ":0"
			}
		}
	}
	if !admin && slices.Contains(out, "-addr") {
		out = append(out, "-admin", "127.0.0.1:0")
	}
	return out
}

// runServer starts a server, waits for its ready line on stderr, stops it
// with SIGTERM and wants exit status 0.
func runServer(t *testing.T, c command, exe string, args []string, ready string) {
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir, cmd.Env = t.TempDir(), append(os.Environ(), c.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	up := false
	sc := bufio.NewScanner(stderr)
	for !up && sc.Scan() {
		seen = append(seen, sc.Text())
		up = strings.Contains(sc.Text(), ready)
	}
	if up {
		if err := firstByte(seen[len(seen)-1]); err != nil {
			t.Errorf("%s: %v", c.line, err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for sc.Scan() { // drain until the server exits and closes stderr
		seen = append(seen, sc.Text())
	}
	err = cmd.Wait()
	switch {
	case !up:
		t.Errorf("%s: never said %q (%v)\n%s", c.line, ready, err, strings.Join(seen, "\n"))
	case err != nil:
		t.Errorf("%s: after SIGTERM: %v\n%s", c.line, err, strings.Join(seen, "\n"))
	}
}

// firstByte connects to the address the ready line names and reads the
// first byte the server sends.
func firstByte(line string) error {
	m := addrField.FindStringSubmatch(line)
	if m == nil {
		return fmt.Errorf("no addr= in %q", line)
	}
	conn, err := net.DialTimeout("tcp", m[1], runFor)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(runFor)); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

// tail keeps the end of a command's output for a failure message.
func tail(b []byte) string {
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// TestExtract: what commands finds in a README, and what it leaves.
func TestExtract(t *testing.T) {
	const md = "# x\n\n```sh\nA=b go run ./cmd/d -addr 127.0.0.1:7 # a comment\ngo test ./...\n```\n\n" +
		"`go run ./ex` runs it (`-fail 1` for faults, `-brokers host:9092` for a real one).\n\n" +
		"```go\ngo run ./not/in/a/sh/block\n```\n\n`-orphan 1` has no command before it.\n"
	var got []string
	for _, c := range commands(md) {
		got = append(got, fmt.Sprintf("%v %s %q", c.env, c.pkg, c.args))
	}
	want := []string{`[A=b] ./cmd/d ["-addr" "127.0.0.1:7"]`, `[] ./ex []`, `[] ./ex ["-fail" "1"]`}
	if !slices.Equal(got, want) {
		t.Errorf("commands:\n got %q\nwant %q", got, want)
	}
	if got := freePort([]string{"-addr", "127.0.0.1:7070", "-shards", "2"}); !slices.Equal(got, []string{"-addr", "127.0.0.1:0", "-shards", "2", "-admin", "127.0.0.1:0"}) {
		t.Errorf("freePort: %q", got)
	}
}

// TestFront holds the README's front to what a newcomer needs first: its
// first command runs the main job (ackbench), its second is the test command CI runs
// (.ci/run's "tests (the README's test command)" step, with the
// workspace pattern spelled out), and the whole fits in 120 lines.
func TestFront(t *testing.T) {
	root := filepath.Join("..", "..")
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n > 120 {
		t.Errorf("README.md has %d lines, want at most 120: deep explanations go to the package docs", n)
	}
	first := shCommands(string(text))
	if len(first) < 2 || first[0] != "go run ./cmd/ackbench" {
		t.Fatalf("README's first commands are %q, want go run ./cmd/ackbench, then the tests", first)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ciTestCommand(string(ci))
	if err != nil {
		t.Fatal(err)
	}
	if first[1] != want {
		t.Errorf("README's test command is %q, CI runs %q: keep them the same", first[1], want)
	}
}

// shCommands returns the lines of the README's sh blocks, comments and
// blank lines dropped, in order.
func shCommands(readme string) []string {
	var out []string
	inSh, inFence := false, false
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
			inSh = inFence && strings.TrimPrefix(l, "```") == "sh"
			continue
		}
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.Join(strings.Fields(l), " "); inSh && l != "" {
			out = append(out, l)
		}
	}
	return out
}

var shellVar = regexp.MustCompile(`^[a-z]+$`)

// ciTestCommand returns the command of .ci/run's step named "tests (the
// README's test command)", its variables expanded from their assignments
// in the script.
func ciTestCommand(script string) (string, error) {
	lines := strings.Split(script, "\n")
	vars := map[string]string{}
	for i, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok && shellVar.MatchString(k) && !strings.ContainsAny(v, "$( ") {
			vars[k] = v
		}
		if strings.TrimSpace(l) != `step "tests (the README's test command)"` {
			continue
		}
		for _, c := range lines[i+1:] {
			if c = strings.TrimSpace(c); c == "" || strings.HasPrefix(c, "#") {
				continue
			}
			return os.Expand(c, func(k string) string { return vars[k] }), nil
		}
	}
	return "", fmt.Errorf(".ci/run has no step \"tests (the README's test command)\" with a command")
}

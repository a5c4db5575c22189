package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/bench"
	"github.com/xorack/xorack/internal/buildinfo"
)

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int{"100000": 100000, "100_000": 100000, "100k": 100000, "1M": 1000000, "2K": 2000, "7": 7} {
		if got, err := parseCount(in); err != nil || got != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "0", "-5", "1.5M", "ten", "100G", "51M"} {
		if _, err := parseCount(in); err == nil || !strings.Contains(err.Error(), in) {
			t.Errorf("parseCount(%q): error %v, want one naming it", in, err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, o, err := parse(strings.Fields("-level core -impl xorack,gomap -shape wordcount,chain3 -pending 10k,1M -fail 0.01 -drop 0.02 -msgs 5000 -reps 5 -seed 9 -timeout 20ms -json a.json -benchfmt - -check -quick"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Levels, []bench.Level{bench.LevelCore}) || !slices.Equal(cfg.Impls, []string{"xorack", "gomap"}) ||
		!slices.Equal(cfg.Shapes, []string{"wordcount", "chain3"}) || !slices.Equal(cfg.Pending, []int{10000, 1000000}) ||
		cfg.FailRate != 0.01 || cfg.DropRate != 0.02 || cfg.Msgs != 5000 || cfg.Reps != 5 || cfg.Seed != 9 ||
		cfg.Timeout != 20*time.Millisecond || !cfg.Quick {
		t.Errorf("config %+v", cfg)
	}
	if o.jsonFile != "a.json" || o.benchfmtFile != "-" || !o.check {
		t.Errorf("options %+v", o)
	}
}

// TestBadFlags: bad values exit 2 with a message naming them.
func TestBadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-level net -conns 0":              `Config.Conns 0 out of range`,
		"-impl nosuch":                     `"nosuch"`,
		"-pending 10q":                     `"10q"`,
		"-level net -netbatch 16,x":        `parsing "x"`,
		"-fail 2":                          "Config.FailRate 2",
		"-shape tree9x9":                   `"tree9x9"`,
		"-duration 1s -msgs 10":            "both Config.Duration 1s and Msgs 10",
		"-progress fancy":                  `"fancy"`,
		"-check -level pipeline":           "-check needs the core level",
		"-check -impl xorack,storm":        "-check needs the core level with impls xorack and gomap",
		"stray":                            `"stray"`,
		"-timeout 1500us":                  "1.5ms",
		"-level core -impl limit -drop .1": `"limit" cannot run`,
	} {
		var out, errb bytes.Buffer
		if code := run(strings.Fields(args), &out, &errb); code != 2 {
			t.Errorf("%s: exit %d, want 2", args, code)
		}
		if !strings.Contains(errb.String(), want) {
			t.Errorf("%s: stderr %q lacks %q", args, errb.String(), want)
		}
	}
}

// TestRunTiny runs the command end to end on a tiny workload, with every
// output file, and reads them back.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	js, bf, ht := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.txt"), filepath.Join(dir, "r.html")
	args := []string{"-level", "core", "-impl", "xorack,gomap", "-pending", "300", "-msgs", "4000", "-reps", "2",
		"-json", js, "-benchfmt", bf, "-html", ht, "-progress", "lines", "-nopin"}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"machine:", "perf:", "xorack", "gomap", "msgs/s", "B/pending", "p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "ackbench: [1/") {
		t.Errorf("no progress lines on stderr: %q", errb.String())
	}
	f, err := os.Open(js)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := bench.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || !rep.Rows[0].Verified || rep.Machine.GoVersion == "" {
		t.Errorf("report %+v", rep)
	}
	for _, name := range []string{bf, ht} {
		if b, err := os.ReadFile(name); err != nil || len(b) == 0 {
			t.Errorf("%s: %v, %d bytes", name, err, len(b))
		}
	}
}

// TestGate checks the -check verdict on synthetic reports.
func TestGate(t *testing.T) {
	row := func(impl string, rate float64, ok bool) bench.Row {
		return bench.Row{Level: bench.LevelCore, Impl: impl, Shape: "wordcount", Pending: 1000, MsgsPerSec: rate, Verified: ok, VerifyError: "x"}
	}
	for _, c := range []struct {
		rows []bench.Row
		code int
		want string
	}{
		{[]bench.Row{row("xorack", 50e6, true), row("gomap", 20e6, true)}, 0, "check: ok"},
		{[]bench.Row{row("xorack", 30e6, true), row("gomap", 20e6, true)}, 1, "1.50x gomap's"},
		{[]bench.Row{row("xorack", 50e6, true), row("gomap", 20e6, false)}, 1, "verification failed"},
		{[]bench.Row{row("xorack", 50e6, true)}, 1, "no xorack and gomap rows"},
	} {
		if c.code == 1 && c.want == "1.50x gomap's" {
			// The same rows pass a lower floor.
			var out bytes.Buffer
			if code := gate(&bench.Report{Rows: c.rows}, 1.4, &out); code != 0 {
				t.Errorf("ratio 1.4: exit %d, output %q", code, out.String())
			}
		}
		var out bytes.Buffer
		if code := gate(&bench.Report{Rows: c.rows}, bench.CheckFloor, &out); code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("%+v: exit %d, output %q; want %d and %q", c.rows, code, out.String(), c.code, c.want)
		}
	}
}

// TestHelpAndVersion: -h prints the usage on stderr and exits 0; -version
// prints one line from the build information and exits 0, running nothing.
func TestHelpAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-benchfmt") || out.Len() != 0 {
		t.Errorf("-h: exit %d, stdout %q, stderr %.80q; want 0, nothing, the usage", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	// The line every xorack command prints (ackerd's TestVersion holds it
	// to the same function).
	if code := run([]string{"-version"}, &out, &errb); code != 0 || out.String() != buildinfo.Read().Line("ackbench")+"\n" ||
		!strings.Contains(out.String(), "(module github.com/xorack/xorack/cmd/ackbench, revision ") {
		t.Errorf("-version: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestBenchfmtStdout: with -benchfmt - stdout is benchstat's input only
// (config lines and Benchmark lines); the table goes to stderr.
func TestBenchfmtStdout(t *testing.T) {
	args := []string{"-level", "core", "-impl", "xorack,gomap", "-pending", "300", "-msgs", "4000", "-reps", "2",
		"-benchfmt", "-", "-progress", "off", "-nopin"}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	benchLine := regexp.MustCompile(`^(Benchmark\S+\s|[a-z][a-z-]*: |$)`)
	n := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if !benchLine.MatchString(l) {
			t.Errorf("stdout line not for benchstat: %q", l)
		}
		if strings.HasPrefix(l, "Benchmark") {
			n++
		}
	}
	if n != 4 { // 2 impls x 2 reps
		t.Errorf("%d Benchmark lines, want 4:\n%s", n, out.String())
	}
	if !strings.Contains(errb.String(), "msgs/s") {
		t.Errorf("the table is not on stderr:\n%s", errb.String())
	}
}

// TestETA: the time left scales the time taken by the estimated work left.
func TestETA(t *testing.T) {
	for _, c := range []struct {
		elapsed, done, total time.Duration
		want                 string
	}{
		{10 * time.Second, 1, 100, ""}, // too early to say
		{10 * time.Second, 25, 100, ", about 30s left"},
		{30 * time.Second, 50, 100, ", about 30s left"},
		{59 * time.Second, 100, 100, ", about 0s left"},
		{time.Second, 0, 0, ""},
	} {
		if got := eta(c.elapsed, c.done, c.total); got != c.want {
			t.Errorf("eta(%v, %d, %d) = %q, want %q", c.elapsed, c.done, c.total, got, c.want)
		}
	}
}

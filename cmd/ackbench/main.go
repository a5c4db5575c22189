// Command ackbench runs xorack's benchmark harness (package bench) and
// prints a table: implementation x pending window -> msgs/s, ratio to
// xorack, bytes per pending root, latency percentiles and the hardware
// counters the machine gives, after a description of the machine.
//
//	go run ./cmd/ackbench                  # about a minute on 2 cores
//	go run ./cmd/ackbench -quick -check    # a few seconds; CI's gate adds -check-ratio 1.3
//	go run ./cmd/ackbench -level core -pending 1M -json out.json -html out.html
//	go run ./cmd/ackbench -fail 0.05       # each fault row beside its fault-free twin
//
// Before the rows and after them it spins a thread per processor to see
// how much of the machine other work takes; past a threshold (the
// threads lost 5% of their time, or saw 25 stalls of 1 ms or more per
// second) the table and the JSON say "machine busy: ratios unreliable;
// rerun on a quiet machine". Under the table each implementation is
// defined in one line; columns n/a in every row are left out.
//
// It exits 1 when a run fails its own verification or, with -check, when
// xorack's core msgs/s is below -check-ratio (default 2) times the Go-map
// baseline's at any window (or, with -fail up to 0.05 and no -drop, a
// xorack fault row is below 0.8x its fault-free twin, or, with the source
// level, kafka-acked's records/s or records per CPU-second are below 0.8x
// the in-memory spout's in every rep of the run, jetstream-acked's below
// 0.1x, or, with -level faults, the breaker row's goodput is below 0.9x
// the mixed row's); 2 on bad flags; 0 after -h or -version.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/xorack/xorack/bench"
	"github.com/xorack/xorack/internal/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the flags that are not part of bench.Config.
type options struct {
	jsonFile, benchfmtFile, htmlFile, cpuprofile string
	check                                        bool
	checkRatio                                   float64
	progress                                     string
	version                                      bool
}

// parse turns command-line arguments into a configuration.
func parse(args []string, stderr io.Writer) (bench.Config, options, error) {
	var cfg bench.Config
	var o options
	fs := flag.NewFlagSet("ackbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listVar(fs, &cfg.Levels, "level", "levels to run, a comma-separated `list` (default core,pipeline): core, pipeline, topology (word count on the reference engine, acked and unacked), source (the word count fed by the Kafka spout from an in-process cluster, acked and unacked), net (the acker behind loopback connections: netio, gRPC streams, and in process), faults (the word count under a fault matrix: fail rates, dropped ACKs, poison, a slow bolt, the breaker, a join, panics, a stop mid-run; goodput and floors)",
		func(s string) (bench.Level, error) { return bench.Level(s), nil })
	listVar(fs, &cfg.Impls, "impl", "implementations, a comma-separated `list` (default: every one of each level; core: xorack, gomap, mutexmap, xsync, storm, limit; pipeline: xorack, mutexmap, chanshard; net: netio, grpc, inproc)", word)
	listVar(fs, &cfg.Shapes, "shape", "tree shapes, a comma-separated `list` (default wordcount): wordcount, tree8x8, chainN, diamondN", word)
	listVar(fs, &cfg.Pending, "pending", "pending windows P, a comma-separated `list`, k and M suffixes allowed (default 10k,100k,1M; -quick 10k,100k)", parseCount)
	fs.IntVar(&cfg.Producers, "producers", 1, "pipeline producer goroutines")
	fs.IntVar(&cfg.Shards, "shards", 1, "pipeline xorack shards (and the net level's server shards)")
	listVar(fs, &cfg.Conns, "conns", "net level: loopback connection counts, a comma-separated `list`, one producer each (default 1,4)", strconv.Atoi)
	listVar(fs, &cfg.NetBatch, "netbatch", "net level: producer batch sizes, a comma-separated `list`: each producer hands over this many messages at a time, SendBatch then Flush (default 16,256)", strconv.Atoi)
	fs.Float64Var(&cfg.FailRate, "fail", 0, "fraction of roots failed explicitly by a bolt after fan-out (the tree's later ACKs still come); each FAIL carries the failed tuple's ack val, leaving a drain those ACKs empty")
	fs.BoolVar(&cfg.FailBare, "fail-bare", false, "with -fail: FAILs carry no val, as Storm's do (the later ACKs make orphans)")
	fs.Float64Var(&cfg.DropRate, "drop", 0, "fraction of roots that lose one ACK (they time out)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "measured time per row, split over -reps (default 600ms; -quick 150ms)")
	fs.Int64Var(&cfg.Msgs, "msgs", 0, "measured messages per row instead of -duration")
	fs.IntVar(&cfg.Reps, "reps", 0, "interleaved repetitions per row, the row's measured time split over them; a row reports their median (default 6, enough for benchstat; -quick 3)")
	fs.Uint64Var(&cfg.Seed, "seed", bench.DefaultSeed, "workload seed")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "acker message timeout, whole ms (default: chosen from the stream; stream time in fault runs)")
	fs.IntVar(&cfg.Batch, "batch", bench.DefaultBatch, "messages per Apply call (core) or producer span (pipeline)")
	fs.Float64Var(&cfg.LatencyLoad, "latency-load", bench.DefaultLatencyLoad, "fraction of the measured peak offered in the pipeline's latency run")
	fs.BoolVar(&cfg.NoPin, "nopin", false, "do not pin the core runner, the pipeline's executors and the engine's (topology, source, faults) to CPUs")
	fs.BoolVar(&cfg.Quick, "quick", false, "a quick run: a few seconds in all")
	fs.StringVar(&o.jsonFile, "json", "", "write every figure, with the config and machine, as JSON to `FILE`")
	fs.StringVar(&o.benchfmtFile, "benchfmt", "", "write Go benchmark lines (for benchstat) to `FILE` (- for stdout, the table then going to stderr); benchstat wants -reps 6 or more for a confidence interval")
	fs.StringVar(&o.htmlFile, "html", "", "write a self-contained HTML report with charts to `FILE`")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to `FILE`")
	fs.BoolVar(&o.check, "check", false, "exit 1 if xorack core msgs/s < -check-ratio x gomap's at any window, or any verification fails; with -fail up to 0.05 (no -drop), also if a core or pipeline xorack fault row is below 0.8x its fault-free twin; with the source level, also if kafka-acked's records/s or records per CPU-second are below 0.8x the in-memory spout's in every rep of the run (jetstream-acked: 0.1x); with -level faults, also if the breaker row's goodput is below 0.9x the mixed row's")
	fs.Float64Var(&o.checkRatio, "check-ratio", bench.CheckFloor, "the least xorack/gomap core msgs/s ratio -check accepts")
	fs.BoolVar(&o.version, "version", false, "print the version (module, VCS revision, its time and modified flag, Go) and exit")
	fs.StringVar(&o.progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, off")
	if err := fs.Parse(args); err != nil {
		return cfg, o, err
	}
	if o.version {
		return cfg, o, nil
	}
	if fs.NArg() > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch o.progress {
	case "auto", "bar", "lines", "off":
	default:
		return cfg, o, fmt.Errorf("-progress %q: want auto, bar, lines or off", o.progress)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, o, err
	}
	if o.check {
		if err := checkable(cfg); err != nil {
			return cfg, o, err
		}
	}
	return cfg, o, nil
}

// checkable reports whether cfg measures what -check compares.
func checkable(cfg bench.Config) error {
	core := len(cfg.Levels) == 0
	for _, l := range cfg.Levels {
		core = core || l == bench.LevelCore
	}
	has := func(name string) bool {
		if len(cfg.Impls) == 0 {
			return true
		}
		for _, i := range cfg.Impls {
			if i == name {
				return true
			}
		}
		return false
	}
	if !core || !has(bench.Reference) || !has(bench.GoMapName) {
		return errors.New("-check needs the core level with impls xorack and gomap")
	}
	return nil
}

// listVar defines the comma-separated list flag name: its value replaces
// *dst by its items, each read by item; an item that item refuses fails
// the flag (the flag package names the flag and its value).
func listVar[T any](fs *flag.FlagSet, dst *[]T, name, usage string, item func(string) (T, error)) {
	fs.Func(name, usage, func(s string) error {
		*dst = nil
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			v, err := item(f)
			if err != nil {
				return err
			}
			*dst = append(*dst, v)
		}
		return nil
	})
}

// word is an item of a list of names, taken as it is.
func word(s string) (string, error) { return s, nil }

// parseCount reads a count such as 100000, 100_000, 100k or 1M.
func parseCount(s string) (int, error) {
	mult := 1
	t := strings.ReplaceAll(s, "_", "")
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1_000, t[:len(t)-1]
	case strings.HasSuffix(t, "M"), strings.HasSuffix(t, "m"):
		mult, t = 1_000_000, t[:len(t)-1]
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > bench.MaxRowPending/mult {
		return 0, fmt.Errorf("bad window %q (want a positive count such as 100000, 100k or 1M, at most %d)", s, bench.MaxRowPending)
	}
	return n * mult, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h asked for the usage, which is on stderr
	}
	if err != nil {
		fmt.Fprintf(stderr, "ackbench: %v\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, buildinfo.Read().Line("ackbench"))
		return 0
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "ackbench: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "ackbench: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	pg := newProgress(o.progress, stdout, stderr)
	cfg.Progress = pg.update
	rep, runErr := bench.Run(cfg)
	pg.done()
	if rep == nil {
		fmt.Fprintf(stderr, "ackbench: %v\n", runErr)
		return 2
	}
	code := 0
	if runErr != nil {
		fmt.Fprintf(stderr, "ackbench: %v\n", runErr)
		code = 1
	}
	if o.check {
		rep.CheckRatio = o.checkRatio // the HTML report shows the gate's verdict
	}
	// Stdout carries a machine-readable output when one is "-": the table
	// and the gate's lines go to stderr then, so that benchstat (or a JSON
	// reader) gets nothing else.
	human := stdout
	if o.jsonFile == "-" || o.benchfmtFile == "-" || o.htmlFile == "-" {
		human = stderr
	}
	if err := bench.WriteTable(human, rep); err != nil {
		fmt.Fprintf(stderr, "ackbench: %v\n", err)
		code = max(code, 1)
	}
	for _, out := range []struct {
		file  string
		write func(io.Writer, *bench.Report) error
	}{{o.jsonFile, bench.WriteJSON}, {o.benchfmtFile, bench.WriteBenchfmt}, {o.htmlFile, bench.WriteHTML}} {
		if err := writeFile(out.file, stdout, rep, out.write); err != nil {
			fmt.Fprintf(stderr, "ackbench: %v\n", err)
			code = max(code, 1)
		}
	}
	if o.check {
		code = max(code, gate(rep, o.checkRatio, human))
	}
	return code
}

// gate prints the -check verdict and returns the exit status it implies.
func gate(rep *bench.Report, ratio float64, w io.Writer) int {
	bad := bench.Check(rep, ratio)
	if len(bad) == 0 {
		faults := ""
		for _, r := range rep.Rows {
			if r.FaultFreeRatio > 0 {
				faults = fmt.Sprintf("; fault rows >= %.1fx their fault-free twins", bench.FaultFloor)
			}
		}
		for _, r := range rep.Rows {
			if r.Level == bench.LevelSource && r.CPURatio > 0 {
				floor := bench.SourceFloor
				if r.Impl == "jetstream-acked" {
					floor = bench.JetStreamFloor
				}
				faults += fmt.Sprintf("; %s %.2fx the in-memory spout's records/s and %.2fx its records per CPU-second, best reps (floor %.2fx)", r.Impl, r.WallBestRatio, r.CPURatio, floor)
			}
		}
		fmt.Fprintf(w, "check: ok (xorack core >= %.2gx gomap at every window%s; every run verified)\n", ratio, faults)
		return 0
	}
	for _, b := range bad {
		fmt.Fprintf(w, "check: FAIL: %s\n", b)
	}
	if rep.Busy {
		fmt.Fprintf(w, "check: %s\n", rep.Verdict)
	}
	return 1
}

func writeFile(name string, stdout io.Writer, rep *bench.Report, write func(io.Writer, *bench.Report) error) error {
	switch name {
	case "":
		return nil
	case "-":
		return write(stdout, rep)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	return f.Close()
}

// barAfter is how long a run goes before a progress bar appears: shorter
// runs finish before a bar would tell anyone anything.
const barAfter = 2 * time.Second

// lineEvery spaces plain progress lines: a CI log needs a sign of life,
// not a line per step.
const lineEvery = time.Second

// progress shows the run's steps: a bar on a terminal once the run has
// lasted barAfter, plain lines on stderr when stdout is not a terminal.
type progress struct {
	mode  string // bar, lines or off
	w     io.Writer
	start time.Time
	last  time.Time // when the last plain line was printed
	bar   *progressbar.ProgressBar
}

func newProgress(mode string, stdout, stderr io.Writer) *progress {
	if mode == "auto" {
		mode = "lines"
		if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	return &progress{mode: mode, w: stderr, start: time.Now()}
}

func (p *progress) update(ev bench.Progress) {
	left := eta(time.Since(p.start), ev.Done, ev.Total)
	switch p.mode {
	case "lines":
		if now := time.Now(); ev.Step == 0 || ev.Step == ev.Steps-1 || now.Sub(p.last) >= lineEvery {
			p.last = now
			fmt.Fprintf(p.w, "ackbench: [%d/%d] %s%s\n", ev.Step+1, ev.Steps, ev.What, left)
		}
	case "bar":
		if p.bar == nil && time.Since(p.start) >= barAfter {
			// The bar counts permille of the estimated work, not steps
			// (which are far from equal), and the ETA is ours: the
			// bar's own would count from when it appeared.
			p.bar = progressbar.NewOptions(barMax, progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetWidth(30), progressbar.OptionSetElapsedTime(true), progressbar.OptionClearOnFinish())
		}
		if p.bar != nil {
			p.bar.Describe(fmt.Sprintf("[%d/%d] %s%s", ev.Step+1, ev.Steps, ev.What, left))
			if ev.Total > 0 {
				_ = p.bar.Set(int(int64(barMax) * int64(ev.Done) / int64(ev.Total)))
			}
		}
	}
}

// barMax is the bar's full count: permille of the estimated work.
const barMax = 1000

// eta says how long the run has left, from the time it has taken for the
// estimated work done so far ("" until a twentieth is done: too early to
// say).
func eta(elapsed, done, total time.Duration) string {
	if total <= 0 || done*20 < total {
		return ""
	}
	left := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	return fmt.Sprintf(", about %v left", left.Round(time.Second))
}

func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

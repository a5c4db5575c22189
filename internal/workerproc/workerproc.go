// Package workerproc is what the broker sources' process tests share with
// their worker commands (source/kafka and source/jetstream, each
// internal/crashworker): the test side builds a worker, starts it so that
// it never outlives the test, and stops it cleanly; the worker side (Main,
// given a Worker) parses the common flags, appends what it processes to a
// ledger file, optionally throttled, and runs until SIGTERM.
//
// It is internal test support. The test side takes a T, the part of
// testing.T it uses, so that the workers, which import this package, do
// not link package testing.
package workerproc

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// T is the part of *testing.T the test side uses.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Build builds the command package pkg (a path go build takes, such as
// "./internal/crashworker") into a temporary directory and returns the
// binary's path.
func Build(t T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Start starts cmd and kills and waits for it when the test ends, unless
// the test has already waited for it: a failing test (t.Fatal between
// Start and Wait) must not leave a worker running. On linux the kernel
// also kills the worker when the test process exits however it exits (a
// panic, a timeout, a kill), when the cleanup does not run.
func Start(t T, cmd *exec.Cmd) {
	t.Helper()
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
}

// Stop stops a worker cleanly (SIGTERM) and fails the test unless it
// exits 0.
func Stop(t T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("worker after SIGTERM: %v", err)
	}
}

// Ledger is a worker's ledger file, appended to: each Write lands whole,
// from any goroutine.
type Ledger struct {
	mu sync.Mutex
	f  *os.File
}

// OpenLedger opens the ledger at path for appending, creating it.
func OpenLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Ledger{f: f}, nil
}

// Write appends line, whole.
func (l *Ledger) Write(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.Write(line)
	return err
}

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }

// Record appends a line of fields, space-separated, whole.
func (l *Ledger) Record(fields ...int64) error {
	var line []byte
	for i, f := range fields {
		if i > 0 {
			line = append(line, ' ')
		}
		line = strconv.AppendInt(line, f, 10)
	}
	return l.Write(append(line, '\n'))
}

// Throttle makes a worker slower than its source: Tick sleeps a
// millisecond every Every calls (never when Every is 0). Safe from any
// goroutine.
type Throttle struct {
	Every int
	calls atomic.Int64
}

// Tick counts a call and sleeps on every Every-th.
func (t *Throttle) Tick() {
	if t.Every > 0 && t.calls.Add(1)%int64(t.Every) == 0 {
		time.Sleep(time.Millisecond) // the throttle, not synchronisation
	}
}

// Worker is a worker command: its own flags, and its run, given the
// ledger and the throttle Main set up.
type Worker interface {
	Flags(fs *flag.FlagSet)
	Run(l *Ledger, th *Throttle) error
}

// Main is a worker command's main: it defines -ledger, -throttle and w's
// own flags, parses the command line, opens the ledger and runs w; on an
// error it prints it, prefixed with the command's name, and exits 1.
func Main(w Worker) {
	var ledger string
	var th Throttle
	flag.StringVar(&ledger, "ledger", "", "ledger file, appended to")
	flag.IntVar(&th.Every, "throttle", 0, "sleep 1ms every this many inputs (0: never): a worker slower than its source")
	w.Flags(flag.CommandLine)
	flag.Parse()
	err := func() error {
		l, err := OpenLedger(ledger)
		if err != nil {
			return err
		}
		defer l.Close()
		return w.Run(l, &th)
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(1)
	}
}

// StopTimeout bounds the clean stop RunUntilTerm makes on SIGTERM.
const StopTimeout = 10 * time.Second

// Runner is what RunUntilTerm runs: a topology.
type Runner interface {
	Start() error
	Stop(ctx context.Context) error
}

// RunUntilTerm starts r, waits for SIGTERM or an interrupt, and stops r
// within StopTimeout.
func RunUntilTerm(r Runner) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)
	if err := r.Start(); err != nil {
		return fmt.Errorf("starting: %w", err)
	}
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	return r.Stop(ctx)
}

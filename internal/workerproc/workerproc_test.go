package workerproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Lines written from many goroutines land whole.
func TestLedgerWritesWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				if err := l.Write(fmt.Appendf(nil, "%d %d %s\n", w, i, bytes.Repeat([]byte("x"), 64))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var w, i int
		var pad string
		if _, err := fmt.Sscanf(string(line), "%d %d %s", &w, &i, &pad); err != nil || len(pad) != 64 {
			t.Fatalf("torn line %q", line)
		}
		seen[fmt.Sprint(w, i)] = true
	}
	if len(seen) != writers*lines {
		t.Fatalf("%d distinct lines, want %d", len(seen), writers*lines)
	}
}

type runner struct {
	start    func() error
	stopped  bool
	deadline bool
}

func (r *runner) Start() error { return r.start() }

func (r *runner) Stop(ctx context.Context) error {
	_, r.deadline = ctx.Deadline()
	r.stopped = true
	return nil
}

// A Start error comes back at once, nothing stopped.
func TestRunUntilTermStartError(t *testing.T) {
	boom := errors.New("boom")
	r := &runner{start: func() error { return boom }}
	if err := RunUntilTerm(r); !errors.Is(err, boom) || r.stopped {
		t.Fatalf("RunUntilTerm: %v, stopped %v; want the start error, not stopped", err, r.stopped)
	}
}

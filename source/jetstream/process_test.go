package jetstream

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Several processes, one durable consumer: two worker processes
// (internal/crashworker, built with go build) read one consumer; one is
// SIGKILLed mid-run. The server redelivers what it held after AckWait to
// the other, which finishes the stream: every message processed, the
// consumer settled with its ack floor at the last sequence.
func TestSeveralProcessesOneConsumer(t *testing.T) {
	n := size(3000, 1000)
	e, _ := newStream(t, n, time.Second, 0)
	bin := filepath.Join(t.TempDir(), "crashworker")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/crashworker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-nats", e.srv.URL(), "-stream", "S", "-consumer", "c", "-ledger", ledger, "-throttle", "2")
		cmd.Stderr = os.Stderr
		reapWorker(t, cmd)
		return cmd
	}
	a, b := start(), start()
	size := func() int64 {
		fi, err := os.Stat(ledger)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	waitFor(t, "a third processed", func() bool { return size() >= int64(n/3*20) }, func() string { return strconv.FormatInt(size(), 10) })
	_ = a.Process.Kill()
	_ = a.Wait()
	info := e.waitSettled("S", "c", uint64(n))
	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("worker after SIGTERM: %v", err)
	}
	data, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, n+1)
	lines := 0
	for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); lines++ {
		f := bytes.Fields(sc.Bytes())
		seq, err := strconv.Atoi(string(f[0]))
		if err != nil || seq < 1 || seq > n {
			t.Fatalf("ledger line %q", sc.Bytes())
		}
		seen[seq]++
	}
	for seq := 1; seq <= n; seq++ {
		if seen[seq] == 0 {
			t.Fatalf("message %d never processed", seq)
		}
	}
	t.Logf("%d messages, %d processed (%d again after the kill); consumer %s", n, lines, lines-n, describe(info))
}

// reapWorker starts cmd and kills and waits for it when the test ends,
// unless the test has already waited for it: a failing test (t.Fatal
// between Start and Wait) must not leave a worker running.
func reapWorker(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	dieWithTest(cmd)
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

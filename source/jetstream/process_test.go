package jetstream

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/workerproc"
)

// Several processes, one durable consumer: two worker processes
// (internal/crashworker, built with go build) read one consumer; one is
// SIGKILLed mid-run. The server redelivers what it held after AckWait to
// the other, which finishes the stream: every message processed, the
// consumer settled with its ack floor at the last sequence.
func TestSeveralProcessesOneConsumer(t *testing.T) {
	n := size(3000, 1000)
	e, _ := newStream(t, n, time.Second, 0)
	bin := workerproc.Build(t, "./internal/crashworker")
	ledger := filepath.Join(t.TempDir(), "ledger")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-nats", e.srv.URL(), "-stream", "S", "-consumer", "c", "-ledger", ledger, "-throttle", "2")
		cmd.Stderr = os.Stderr
		workerproc.Start(t, cmd)
		return cmd
	}
	a, b := start(), start()
	ledgerSize := func() int64 {
		fi, err := os.Stat(ledger)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	waitFor(t, "a third processed", func() bool { return ledgerSize() >= int64(n/3*20) }, func() string { return strconv.FormatInt(ledgerSize(), 10) })
	_ = a.Process.Kill()
	_ = a.Wait()
	info := e.waitSettled("S", "c", uint64(n))
	workerproc.Stop(t, b)
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

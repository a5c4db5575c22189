package topology

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// tickBolt moves the fake clock d in each Execute, as if each took d, and
// acks.
type tickBolt struct {
	clock *ackcore.FakeClock
	d     time.Duration
}

func (b *tickBolt) Execute(t *Tuple, c *BoltCollector) {
	b.clock.Add(b.d)
	_ = c.Ack(t)
}

var statusCell = regexp.MustCompile(`data-k="([^"]+)">([^<]*)<`)

// statusCells reads the page's cells: "component:column" -> text.
func statusCells(html string) map[string]string {
	out := map[string]string{}
	for _, m := range statusCell.FindAllStringSubmatch(html, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// statusRun runs 6,400 roots through a bolt that takes 1 ms of the fake
// clock per Execute (the only thing that moves it), with the status
// handler made before the start: the page shows the whole run.
func statusRun(t *testing.T) (*Topology, http.Handler) {
	t.Helper()
	const n = 6400
	l := newLedger()
	clock := &ackcore.FakeClock{}
	top, h := idsInto(t, newIDSpout(l, n), clock, "work", &tickBolt{clock: clock, d: time.Millisecond})
	top.Start()
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	if s := l.check(t, n, false); s.completed != n {
		t.Fatalf("completed %d of %d", s.completed, n)
	}
	return top, h
}

// wantCells are the cells the page must show for statusRun's topology,
// from its metrics: 6,400 executes in 6.4 s of engine clock is 1,000/s,
// each 1 ms, one executor busy all along.
func wantCells(t *testing.T, top *Topology) map[string]string {
	m := top.Metrics()
	sp, w := m.Component("ids"), m.Component("work")
	if w.Executed != 6400 || w.ExecuteLatency.TotalCount() != 6400/ExecSampleEvery || w.Busy != 6400*time.Millisecond {
		t.Fatalf("work: executed %d, %d latencies sampled, busy %v", w.Executed, w.ExecuteLatency.TotalCount(), w.Busy)
	}
	return map[string]string{
		"ids:kind": "spout", "ids:emitted": itoa(sp.Emitted), "ids:acked": itoa(sp.Completed), "ids:failed": "0",
		"ids:pending": "0", "ids:timeouts_held": "0", "ids:executed_per_sec": "-",
		"work:kind": "bolt", "work:executors": "1", "work:executed_per_sec": "1000",
		"work:execute_p50": "1.00 ms", "work:execute_p99": "1.00 ms", "work:capacity": "100.0%",
		"work:emitted": itoa(w.Emitted), "work:acked": itoa(w.Acked), "work:failed": itoa(w.Failed), "work:timeouts_held": "0",
	}
}

func itoa(n uint64) string { return fmtCount(n) }

func checkCells(t *testing.T, html string, want map[string]string) {
	t.Helper()
	got := statusCells(html)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: page shows %q, metrics say %q", k, got[k], v)
		}
	}
}

// TestStatusPage: the numbers on the page are the metrics'.
func TestStatusPage(t *testing.T) {
	top, h := statusRun(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	checkCells(t, rec.Body.String(), wantCells(t, top))
	// A second load right after: no engine time passed, no rates.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	checkCells(t, rec.Body.String(), map[string]string{"work:executed_per_sec": "-", "work:capacity": "-", "work:acked": "6400"})
}

// TestStatusPageChromium renders the page in headless Chromium, when
// installed, and checks the numbers it shows.
func TestStatusPageChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium on PATH")
	}
	top, h := statusRun(t)
	want := wantCells(t, top)
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", srv.URL+"/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && len(bytes.TrimSpace(out)) == 0 {
		// It rendered nothing: the browser could not start or died (a
		// crash under a memory ulimit, a missing library), which says
		// nothing of the page.
		t.Skipf("%s could not render the page: %v; %s", bin, err, lastLines(stderr.String(), 5))
	}
	if err != nil {
		t.Fatalf("%s: %v after writing %d bytes; %s", bin, err, len(out), lastLines(stderr.String(), 5))
	}
	checkCells(t, string(out), want)
	if len(statusCells(string(out))) < 2*15 {
		t.Errorf("the rendered page has %d cells, want 15 per component:\n%s", len(statusCells(string(out))), out)
	}
}

// lastLines returns s's last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// TestStatusPageChromiumCannotStart: a browser that dies before
// rendering anything makes the test skip with its reason, not fail.
func TestStatusPageChromiumCannotStart(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "chromium")
	script := "#!/bin/sh\necho 'Received signal 11 SEGV_MAPERR' >&2\nkill -SEGV $$\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	var skipped string
	ok := t.Run("chromium", func(t *testing.T) {
		defer func() { skipped = fmt.Sprint(t.Skipped()) }()
		TestStatusPageChromium(t)
	})
	if !ok || skipped != "true" {
		t.Errorf("a browser that crashed: passed %v, skipped %s; want a skip", ok, skipped)
	}
}

// holdFirst signals entered on its first Execute and waits for release,
// then acks.
type holdFirst struct {
	entered, release chan struct{}
	once             bool
}

func (g *holdFirst) Execute(t *Tuple, c *BoltCollector) {
	if !g.once {
		g.once = true
		close(g.entered)
		<-g.release
	}
	_ = c.Ack(t)
}

// TestStatusOldestPending: while a root is held up, the page shows it
// pending and its age at the acker, on the engine clock.
func TestStatusOldestPending(t *testing.T) {
	l := newLedger()
	clock := &ackcore.FakeClock{}
	g := &holdFirst{entered: make(chan struct{}), release: make(chan struct{})}
	top, h := idsInto(t, newIDSpout(l, 1), clock, "gate", g)
	cells := func() map[string]string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return statusCells(rec.Body.String())
	}
	top.Start()
	<-g.entered
	waitFor(t, 10*time.Second, "the root pending at the acker", func() bool { return cells()["ids:oldest_pending"] != "-" })
	clock.Add(5 * time.Second)
	got := cells()
	if got["ids:oldest_pending"] != "5.00 s" || got["ids:pending"] != "1" {
		t.Errorf("oldest pending %q, pending %q; want 5.00 s and 1", got["ids:oldest_pending"], got["ids:pending"])
	}
	close(g.release)
	waitDone(t, top, 10*time.Second)
	stop(t, top)
	if got := cells(); got["ids:oldest_pending"] != "-" || got["ids:pending"] != "0" {
		t.Errorf("after the end: oldest pending %q, pending %q", got["ids:oldest_pending"], got["ids:pending"])
	}
}

// idsInto builds spout "ids" into one bolt task on the fake clock, with an
// hour's timeout, and its status handler (made before the start).
func idsInto(t *testing.T, spout func() Spout, clock *ackcore.FakeClock, name string, bolt Bolt) (*Topology, http.Handler) {
	t.Helper()
	b := NewBuilder()
	b.Spout("ids", spout).Output("id")
	b.Bolt(name, func() Bolt { return bolt }).Input("ids", Shuffle())
	cfg := testConfig()
	cfg.Clock = clock
	cfg.MessageTimeout = time.Hour
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return top, top.StatusHandler()
}

// preemptedBolt takes no engine time on its inputs but one: every
// ExecSampleEvery-th input (the one the executor times) takes d, as an
// Execute preempted while it was timed does.
type preemptedBolt struct {
	clock *ackcore.FakeClock
	d     time.Duration
	n     int
}

func (b *preemptedBolt) Execute(t *Tuple, c *BoltCollector) {
	if b.n++; b.n%ExecSampleEvery == 0 {
		b.clock.Add(b.d)
	}
	_ = c.Ack(t)
}

// TestStatusCapacityPreempted: one executor whose timed Execute calls
// each took 1 ms of engine clock (a preemption) and the others none is
// busy exactly the clock's time, and the page shows at most 100%.
// (Before: the sampled times scaled by 64 made Busy 64x the clock's time,
// 6400%.)
func TestStatusCapacityPreempted(t *testing.T) {
	const n = 64 * 100
	l := newLedger()
	clock := &ackcore.FakeClock{}
	top, h := idsInto(t, newIDSpout(l, n), clock, "work", &preemptedBolt{clock: clock, d: time.Millisecond})
	began := clock.Now()
	top.Start()
	waitDone(t, top, 30*time.Second)
	elapsed := time.Duration(clock.Now() - began)
	// Busy is published when a batch ends, which can be after its last
	// input was acked (and the tree done): the page is loaded once all of
	// it is, else it shows less than 100% for want of it.
	waitFor(t, 10*time.Second, "the executor's busy time published", func() bool {
		return top.Metrics().Component("work").Busy == 100*time.Millisecond
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	cells := statusCells(rec.Body.String())
	stop(t, top)
	w := top.Metrics().Component("work")
	if w.Busy != 100*time.Millisecond || elapsed != 100*time.Millisecond {
		t.Errorf("busy %v over %v of engine clock, want 100ms of 100ms", w.Busy, elapsed)
	}
	if got := cells["work:capacity"]; got != "100.0%" {
		t.Errorf("capacity %q, want 100.0%%", got)
	}
}

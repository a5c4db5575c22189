package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/netio"
)

// adminServer is a netio server on loopback with n roots left pending,
// and a client connected to it.
func adminServer(t testing.TB, pendingRoots int) (*netio.Server, *netio.Client) {
	t.Helper()
	srv, err := netio.NewServer(netio.ServerConfig{Secret: []byte(secret), Tasks: 8, MaxConnPending: 1 << 20,
		Shard: ackcore.Config{MaxPending: 1 << 20, Timeout: 2 * time.Minute}}) // the pending roots outlive the test
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	c, err := netio.Dial(netio.ClientConfig{Hosts: []string{ln.Addr().String()}, Secret: []byte(secret), ID: 0x5eed}, acker.Spec{Producers: 1, Tasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	p := c.Sender(0)
	for i := range pendingRoots {
		_ = p.Send(ackcore.Msg{Root: uint64(i+1) << 32, Kind: ackcore.Init, Val: 1})
	}
	_ = p.Flush()
	poll(t, 30*time.Second, "the roots to be pending", func() bool { return srv.Stats().Acker.Pending >= pendingRoots })
	return srv, c
}

// hammer runs 8 requesters of /, /pending?n=1000 and /metrics against
// url, counting their answers in answered, until the function it returns
// is called; that returns the answers, by status.
func hammer(url string, stop chan struct{}, answered *atomic.Int64) func() map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	paths := []string{"/", "/pending?n=1000", "/metrics"}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for i := range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := cl.Get(url + paths[i%len(paths)])
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
				answered.Add(1)
			}
		})
	}
	return func() map[int]int { close(stop); wg.Wait(); cl.CloseIdleConnections(); return codes }
}

// TestAdminScansFromSnapshot: 8 requesters hammering /, /pending?n=1000
// and /metrics for a second take at most one scan of the tables per scan
// interval (250 ms: 4, and the first), not one per request, and get
// answers (paced, never an error but 503 when the queue is long). The
// scans are the only work the endpoint asks of the acker's executors (the
// counters it reads are what the executors publish anyway): this bound, not
// a timed rate, is what keeps it cheap for the acker; BenchmarkAdminHammered
// weighs a client's rate beside it.
func TestAdminScansFromSnapshot(t *testing.T) {
	srv, _ := adminServer(t, 2000)
	a := adminHandler(srv, adminOptions{ScanInterval: minScanInterval, Loopback: true})
	web := httptest.NewServer(a)
	defer web.Close()
	start := time.Now()
	var answered atomic.Int64
	done := hammer(web.URL, make(chan struct{}), &answered)
	poll(t, 20*time.Second, "a second of requests and ten answers", func() bool {
		return time.Since(start) > time.Second && answered.Load() >= 10
	})
	codes := done()
	took := time.Since(start)
	served := codes[200]
	scans := a.scans.scans.Load()
	if limit := uint64(took/minScanInterval) + 1; scans > limit {
		t.Errorf("%d scans in %v for %d requests, want at most %d (one per %v)", scans, took, served, limit, minScanInterval)
	}
	if served < 10 {
		t.Errorf("answers %v in %v: want requests served", codes, took)
	}
	for code := range codes {
		if code != 200 && code != 503 {
			t.Errorf("answers %v: status %d", codes, code)
		}
	}
	if max := float64(took.Seconds())*adminRate + 8; float64(served) > max {
		t.Errorf("%d requests served in %v, past the pace of %d a second", served, took, adminRate)
	}
	// The snapshot's roots, aged by the time since it was taken.
	if _, body := get(t, web.URL+"/pending?n=3"); strings.Count(body, `"client":"0x5eed"`) != 3 {
		t.Errorf("/pending?n=3: %s", body)
	}
	t.Logf("%d scans in %v, answers %v", scans, took, codes)
}

// BenchmarkAdminHammered weighs what the admin endpoint costs the acker:
// a steady client at full speed (1,000 trees in flight against a table of
// 300,000 pending roots, the default scan interval) with the endpoint
// quiet, and with 8 requesters hammering /, /pending?n=1000 and /metrics.
// Each reports the client's trees/s (and the hammered one the answers/s it
// gave the requesters, whose own CPU the machine also spends): compare
// the two side by side over a few runs, which alternate them (-count
// repeats one arm before the other),
//
//	go test -c ./cmd/ackerd/ && for i in 1 2 3 4; do ./ackerd.test -test.run '^$' -test.bench BenchmarkAdmin; done
//
// TestAdminScansFromSnapshot asserts why the figures should be close: the
// requests cost the executors one scan per interval, not one per request.
func BenchmarkAdminHammered(b *testing.B) {
	pending := 300000       // a table to scan: milliseconds on the executor
	if invariants.Enabled { // invariant checks scan the table on every step
		pending = 30000
	}
	srv, c := adminServer(b, pending)
	web := httptest.NewServer(adminHandler(srv, adminOptions{ScanInterval: defaultScanInterval, Loopback: true}))
	defer web.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	p, ib := c.Sender(0), c.Inbox(0)
	next := uint64(1)
	var buf []ackcore.Outcome
	// trees runs n trees, 1,000 in flight, each completed.
	trees := func(n int) {
		sent, got := 0, 0
		deadline := time.After(time.Minute + time.Duration(n)*time.Millisecond)
		for got < n {
			for sent < n && sent-got < 1000 {
				e := rng.Uint64() | 1
				_ = p.SendBatch([]ackcore.Msg{{Root: next, Kind: ackcore.Init, Val: e}, {Root: next, Kind: ackcore.Ack, Val: e}})
				next++
				sent++
			}
			_ = p.Flush()
			var ok bool
			buf, ok = ib.WaitUntil(buf[:0], deadline)
			if !ok || len(buf) == 0 {
				b.Fatalf("%d of %d trees before the deadline", got, n)
			}
			for _, o := range buf {
				if o.Kind != ackcore.Completed {
					b.Fatalf("root %#x %v %v", o.Root, o.Kind, o.Reason)
				}
			}
			got += len(buf)
		}
	}
	trees(10000) // warm up
	b.Run("admin=quiet", func(b *testing.B) {
		b.ResetTimer()
		trees(b.N)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trees/s")
	})
	b.Run("admin=hammered", func(b *testing.B) {
		var answered atomic.Int64
		done := hammer(web.URL, make(chan struct{}), &answered)
		b.ResetTimer()
		before := answered.Load()
		trees(b.N)
		b.StopTimer()
		during := answered.Load() - before
		if codes := done(); codes[200] == 0 {
			b.Fatalf("the requesters got no answers: %v", codes)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trees/s")
		b.ReportMetric(float64(during)/b.Elapsed().Seconds(), "answers/s")
	})
}

// TestAdminHostCheck: on a loopback bind, a request whose Host is not a
// loopback name (a DNS-rebinding page's) is refused; localhost and the
// loopback addresses are served.
func TestAdminHostCheck(t *testing.T) {
	srv, _ := adminServer(t, 0)
	web := httptest.NewServer(adminHandler(srv, adminOptions{Loopback: true}))
	defer web.Close()
	for host, want := range map[string]int{"evil.example:9464": 421, "evil.example": 421, "10.0.0.1:9464": 421,
		"localhost:9464": 200, "LOCALHOST": 200, "127.0.0.1:9464": 200, "[::1]:9464": 200, "127.0.0.2": 200} {
		req, _ := http.NewRequest("GET", web.URL+"/pending", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, b, want)
		}
		if want == 421 && !strings.Contains(string(b), fmt.Sprintf("Host %q", host)) {
			t.Errorf("Host %q: refusal %q does not name it", host, b)
		}
	}
	open := httptest.NewServer(adminHandler(srv, adminOptions{}))
	defer open.Close()
	req, _ := http.NewRequest("GET", open.URL+"/healthz", nil)
	req.Host = "ackerd.internal:9464"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("-admin-public: Host checked: %v %v", resp, err)
	}
}

// TestAdminProfileCapped: /debug/pprof/profile and trace refuse seconds
// past maxProfileSeconds, naming the cap.
func TestAdminProfileCapped(t *testing.T) {
	srv, _ := adminServer(t, 0)
	web := httptest.NewServer(adminHandler(srv, adminOptions{Pprof: true, Loopback: true}))
	defer web.Close()
	for _, path := range []string{"/debug/pprof/profile?seconds=1000000000", "/debug/pprof/trace?seconds=31", "/debug/pprof/profile?seconds=-1", "/debug/pprof/trace?seconds=x"} {
		if code, body := get(t, web.URL+path); code != 400 || !strings.Contains(body, "want a number in (0, 30]") {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, body := get(t, web.URL+"/debug/pprof/trace?seconds=0.05"); code != 200 || len(body) == 0 {
		t.Errorf("a 50 ms trace: %d, %d bytes", code, len(body))
	}
}

// TestAdminPublic: an -admin address beyond loopback is refused, naming
// -admin-public; with it, ackerd serves there and says so in a warning.
func TestAdminPublic(t *testing.T) {
	t.Setenv("ACKERD_SECRET", secret)
	var b strings.Builder
	if rc := run([]string{"-addr", "127.0.0.1:0", "-admin", ":0", "-max-pending", "1024"}, &b, nil); rc != 2 ||
		!strings.Contains(b.String(), "ackerd: -admin :0 listens beyond loopback") || !strings.Contains(b.String(), "-admin-public") {
		t.Fatalf("exit %d: %s", rc, b.String())
	}
	d := startDaemon(t, nil, "127.0.0.1:0", "-admin", ":0", "-admin-public")
	poll(t, 10*time.Second, "the warning", func() bool {
		return strings.Contains(d.log.String(), `level=WARN msg="ackerd: admin endpoint listening beyond loopback (-admin-public)`)
	})
	if code, body := run2(t, "-admin-scan", "100ms"); code != 2 || !strings.Contains(body, "-admin-scan 100ms: want at least 250ms") {
		t.Errorf("-admin-scan 100ms: exit %d: %s", code, body)
	}
}

func run2(t *testing.T, args ...string) (int, string) {
	t.Helper()
	t.Setenv("ACKERD_SECRET", secret)
	var b strings.Builder
	rc := run(append([]string{"-addr", "127.0.0.1:0", "-max-pending", "1024"}, args...), &b, nil)
	return rc, b.String()
}

// TestAdminIdleCrowd: 2,000 idle keep-alive connections to the admin
// endpoint of an ackerd held to 1,100 descriptors never keep a client
// with the secret out: the endpoint accepts a bounded number at once
// (the rest wait in the kernel's queue, holding none of ackerd's
// descriptors) and closes idle ones.
func TestAdminIdleCrowd(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit not found: cannot hold ackerd to 1,100 descriptors")
	}
	d := startDaemon(t, []string{"prlimit", "--nofile=1100:1100"}, "127.0.0.1:0", "-admin", "127.0.0.1:0")
	url := adminURL(t, d)
	host := strings.TrimPrefix(url, "http://")
	var crowd []net.Conn
	defer func() {
		for _, c := range crowd {
			c.Close()
		}
	}()
	for range 2000 {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(crowd), err)
		}
		crowd = append(crowd, c)
		// A request, so that the connection is a keep-alive one, not a
		// handshake: those served keep their connection open, idle.
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	}
	// Those the endpoint took answered; read the first answer.
	_ = crowd[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(crowd[0]).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("the first of the crowd: %q %v", line, err)
	}
	var connected atomic.Int32
	for i := range 3 {
		c, err := netio.Dial(netio.ClientConfig{Hosts: []string{d.addr}, Secret: []byte(secret), DialTimeout: 5 * time.Second}, acker.Spec{Producers: 1, Tasks: 1})
		if err != nil {
			t.Fatalf("client %d beside 2,000 idle admin connections: %v", i, err)
		}
		connected.Add(1)
		c.Stop()
	}
	if strings.Contains(d.log.String(), "too many open files") {
		t.Errorf("ackerd ran out of descriptors:\n%s", d.log.String())
	}
}

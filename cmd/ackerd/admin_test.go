package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/buildinfo"
	"github.com/xorack/xorack/internal/numfield"
	"github.com/xorack/xorack/netio"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// poll retries cond until it holds or d passes.
func poll(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestAdminEndpoint: /metrics passes promlint and counts what happened
// (a wrong secret, a connection, a completed root), /pending shows the
// root left pending with the client owning its task, /healthz and
// /readyz answer 200 while serving and /readyz 503 once shutting down,
// /debug/pprof/ is there only with -pprof.
func TestAdminEndpoint(t *testing.T) {
	srv, err := netio.NewServer(netio.ServerConfig{Secret: []byte(secret), Shards: 2, Tasks: 8,
		Shard: ackcore.Config{MaxPending: 1 << 12, Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	poll(t, 5*time.Second, "the server to accept", srv.Accepting)
	addr := ln.Addr().String()
	if _, err := netio.Dial(netio.ClientConfig{Hosts: []string{addr}, Secret: []byte("the-wrong-secret-0123")}, acker.Spec{Producers: 1, Tasks: 1}); err == nil {
		t.Fatal("a wrong secret connected")
	}
	c, err := netio.Dial(netio.ClientConfig{Hosts: []string{addr}, Secret: []byte(secret), ID: 0xabc, TaskBase: 3}, acker.Spec{Producers: 1, Tasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	p := c.Sender(0)
	_ = p.SendBatch([]ackcore.Msg{{Root: 0x51, Kind: ackcore.Init, Val: 6}, {Root: 0x51, Kind: ackcore.Ack, Val: 6},
		{Root: 0x52, Kind: ackcore.Init, Val: 1}})
	_ = p.Flush()
	if outs, _ := c.Inbox(0).WaitUntil(nil, time.After(5*time.Second)); len(outs) != 1 || outs[0].Root != 0x51 {
		t.Fatalf("outcomes %v, want root 0x51's", outs)
	}

	web := httptest.NewServer(adminHandler(srv, adminOptions{Loopback: true}))
	defer web.Close()
	// The counters move a little after the outcome the client saw (the
	// reader counts its read batch after handing it on, the writer lowers
	// the unwritten count after its write, the shards publish at their
	// tick): scrape until every series says what happened, or say which
	// did not.
	wants := []string{
		`ackerd_handshake_failures_total{cause="auth"} 1` + "\n",
		`ackerd_connections{state="authenticated"} 1` + "\n",
		`ackerd_connections{state="handshake"} 0` + "\n",
		"ackerd_messages_total 3\n",
		"ackerd_frames_received_total 1\n",
		"ackerd_roots_unwritten 1\n",
		"ackerd_outcomes_routed_total 1\n",
		`ackerd_acker_orphans_evicted_total{shard="1"} 0` + "\n",
		`ackerd_acker_fails_overflow_total{how="dropped",shard="0"} 0` + "\n",
		`ackerd_acker_orphans_drained_total{shard="1"} 0` + "\n",
		"ackerd_handshakes_dropped_total 0\n",
		"ackerd_share_unallocated_roots ",
		buildInfoLine(),
		"go_goroutines ",
	}
	var metrics string
	var missing []string
	end := time.Now().Add(5 * time.Second)
	for {
		_, metrics = get(t, web.URL+"/metrics")
		missing = missing[:0]
		for _, w := range wants {
			if !strings.Contains(metrics, w) {
				missing = append(missing, w)
			}
		}
		completed := strings.Contains(metrics, `ackerd_acker_roots_completed_total{shard="0"} 1`) ||
			strings.Contains(metrics, `ackerd_acker_roots_completed_total{shard="1"} 1`)
		if !completed {
			missing = append(missing, "ackerd_acker_roots_completed_total 1 on a shard")
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("/metrics lacks %q:\n%s", missing, metrics)
		}
		time.Sleep(2 * time.Millisecond)
	}
	problems, err := promlint.New(strings.NewReader(metrics)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint on /metrics: %v %v", err, problems)
	}
	if problems, err := testutil.CollectAndLint(newServerCollector(srv)); err != nil || len(problems) > 0 {
		t.Errorf("CollectAndLint: %v %v", err, problems)
	}

	code, body := get(t, web.URL+"/pending?n=5")
	var pend []pendingRoot
	if err := json.Unmarshal([]byte(body), &pend); code != 200 || err != nil {
		t.Fatalf("/pending: %d %v %s", code, err, body)
	}
	if len(pend) != 1 || pend[0].Root != "0x52" || pend[0].Task == nil || *pend[0].Task != 3 || pend[0].Client != "0xabc" ||
		pend[0].Remote == "" || pend[0].AgeSeconds < 0 || pend[0].DeadlineSeconds <= 0 || pend[0].DeadlineSeconds > 20 {
		t.Fatalf("/pending: %s", body)
	}
	for _, bad := range []string{"0", "x", "1001"} {
		if code, body := get(t, web.URL+"/pending?n="+bad); code != 400 || !strings.Contains(body, `n="`+bad+`"`) {
			t.Errorf("/pending?n=%s: %d %s", bad, code, body)
		}
	}
	// The status page (GET /) shows the same figures: the pending root
	// with its task, the client with its pending count, the failed
	// handshake, two shards, one of them with the completion.
	code, page := get(t, web.URL+"/")
	for _, want := range []string{
		"accepting connections",
		`<td class="l">0x52</td><td>3</td>`,
		`<td class="l">0xabc</td>`,
		"1 open, 0 in the handshake; 2 accepted, 1 failed the handshake",
		`<tr><td class="l">0</td>`, `<tr><td class="l">1</td>`,
	} {
		if code != 200 || !strings.Contains(page, want) {
			t.Errorf("status page (%d) lacks %q:\n%s", code, want, page)
		}
	}
	// The first load's rates are over the time since ackerd started: a
	// figure, not "-".
	if n := len(regexp.MustCompile(`<tr><td class="l">[01]</td><td>\d+</td><td>\d+</td><td>\d+</td>`).FindAllString(page, -1)); n != 2 {
		t.Errorf("status page, first load: %d of 2 shards show their INIT and ACK rates:\n%s", n, page)
	}
	if !regexp.MustCompile(`<td class="l">0xabc</td><td class="l">[^<]+</td><td>1</td>`).MatchString(page) {
		t.Errorf("status page: client 0xabc should show 1 pending root:\n%s", page)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, web.URL+path); code != 200 {
			t.Errorf("%s: %d", path, code)
		}
	}
	if code, _ := get(t, web.URL+"/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ without -pprof: %d, want 404", code)
	}
	withPprof := httptest.NewServer(adminHandler(srv, adminOptions{Pprof: true, Loopback: true}))
	defer withPprof.Close()
	if code, body := get(t, withPprof.URL+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ with -pprof: %d", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if code, _ := get(t, web.URL+"/readyz"); code != 503 {
		t.Errorf("/readyz after Shutdown: %d, want 503", code)
	}
	if code, _ := get(t, web.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz after Shutdown: %d, want 200", code)
	}
}

// TestAdminFlag: ackerd -admin serves the endpoint at the address it
// logs, with pprof under -pprof, and /readyz says 200 once the server
// accepts (it logs "listening" before its accept loop registers the
// listener: a probe that early sees 503, which on a busy machine the test
// did).
func TestAdminFlag(t *testing.T) {
	d := startDaemon(t, nil, "127.0.0.1:0", "-admin", "127.0.0.1:0", "-pprof")
	url := adminURL(t, d)
	for _, path := range []string{"/healthz", "/debug/pprof/", "/metrics"} {
		if code, _ := get(t, url+path); code != 200 {
			t.Errorf("%s: %d", path, code)
		}
	}
	poll(t, 10*time.Second, "/readyz 200", func() bool {
		code, _ := get(t, url+"/readyz")
		return code == 200
	})
}

// adminURL is the admin endpoint's URL as d logs it.
func adminURL(t *testing.T, d *daemon) string {
	t.Helper()
	var url string
	poll(t, 10*time.Second, "the admin address in the log", func() bool {
		log := d.log.String()
		i := strings.Index(log, "admin=http://")
		if i < 0 {
			return false
		}
		url = strings.TrimSuffix(strings.Fields(log[i+len("admin="):])[0], "/")
		return true
	})
	return url
}

// TestAdminAddrInUse: an -admin address taken is an error naming it.
func TestAdminAddrInUse(t *testing.T) {
	t.Setenv("ACKERD_SECRET", secret)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var b strings.Builder
	if rc := run([]string{"-addr", "127.0.0.1:0", "-admin", ln.Addr().String(), "-max-pending", "1024"}, &b, nil); rc != 1 ||
		!strings.Contains(b.String(), "ackerd: -admin "+ln.Addr().String()+": listen tcp "+ln.Addr().String()+": bind: address already in use") {
		t.Fatalf("exit %d: %s", rc, b.String())
	}
}

// buildInfoLine is ackerd_build_info's line in /metrics: internal/
// buildinfo's labels and values (the engine's xorack_topology_build_info
// has the same), sorted by name as the text format writes them.
func buildInfoLine() string {
	names, values := buildinfo.LabelNames(), buildinfo.Read().Labels()
	pairs := make([]string, len(names))
	for i, n := range names {
		pairs[i] = fmt.Sprintf("%s=%q", n, values[i])
	}
	slices.Sort(pairs)
	return "ackerd_build_info{" + strings.Join(pairs, ",") + "} 1\n"
}

// TestEveryNumberExported: each number of ackcore.Stats is a series
// labelled by shard, and each of netio.ServerStats a server-wide one, but
// for those exported another way: HandshakeFails (the sum of
// handshake_failures_total's causes), Open and InHandshake (connections,
// computed in Collect), and Acker, the shards' sum (each shard's numbers
// are). A counter added to either without a series fails here, and so
// does a series the README's list of them does not name.
func TestEveryNumberExported(t *testing.T) {
	elsewhere := []string{"HandshakeFails", "Open", "InHandshake", "Acker"}
	read := map[bool]map[string]bool{false: {}, true: {}} // by perShard, the fields' indexes
	for _, s := range allSeries {
		for _, sm := range s.samples {
			read[s.perShard][fmt.Sprint(sm.field)] = true
		}
	}
	var walk func(from reflect.Type, perShard bool, prefix string)
	walk = func(from reflect.Type, perShard bool, prefix string) {
		root := reflect.TypeFor[netio.ServerStats]()
		if perShard {
			root = reflect.TypeFor[ackcore.Stats]()
		}
		for i := range from.NumField() {
			f := from.Field(i)
			path := prefix + f.Name
			if slices.Contains(elsewhere, path) && !perShard {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, perShard, path+".")
				continue
			}
			index, err := numfield.Find(root, path)
			if err != nil {
				t.Errorf("%s.%s: %v", root, path, err)
			} else if !read[perShard][fmt.Sprint(index)] {
				t.Errorf("%s.%s is in no series", root, path)
			}
		}
	}
	walk(reflect.TypeFor[ackcore.Stats](), true, "")
	walk(reflect.TypeFor[netio.ServerStats](), false, "")

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range allSeries {
		if !strings.Contains(string(readme), "`ackerd_"+s.name+"`") && !strings.Contains(string(readme), "`ackerd_"+s.name+"{") {
			t.Errorf("README.md does not name ackerd_%s", s.name)
		}
	}
}

// TestSeriesTable: the reason labels are ackcore.Reason's names, as the
// engine's own metrics print them, and a table line that names no number
// of the stats it reads, or gives the wrong count of label values, panics.
func TestSeriesTable(t *testing.T) {
	names := map[string]bool{}
	for r := ackcore.ReasonNone; r <= ackcore.ReasonPanic; r++ {
		names[r.String()] = true
	}
	reasons := 0
	for _, s := range allSeries {
		if len(s.labels) < 2 || s.labels[1] != "reason" {
			continue
		}
		for _, sm := range s.samples {
			reasons++
			if !names[sm.labels[0]] {
				t.Errorf("%s: reason %q is no ackcore.Reason's name", s.name, sm.labels[0])
			}
		}
	}
	if reasons != 6 {
		t.Errorf("%d reason samples, want 6", reasons)
	}
	for _, bad := range []string{
		"x_total - X.\n\tNope",              // no such field
		"x_total - X.\n\tHandshakeFailures", // not a number
		"x_total shard,kind X.\n\tInits",    // a label value missing
		"x_total cause X.\n\tAccepted a b",  // one too many
		"x_total",                           // no labels, no help
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("table %q read without a panic", bad)
				}
			}()
			readSeries(bad)
		}()
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/netio"
)

// The admin endpoint (-admin): /metrics, /healthz, /readyz, /pending and,
// with -pprof, /debug/pprof/. Its counters are read at request time from
// what the server keeps anyway (netio.Server.Stats, ShardStats, Conns,
// Backlog); the oldest pending roots (/pending, the page) from a
// snapshot of the shards' tables taken at most once per -admin-scan
// interval (pendingScans), however many ask. guard.go bounds the rest.

// DefaultAdmin is -admin's default: loopback only, Prometheus's port
// range (9464 is the OpenTelemetry Prometheus exporter's).
const DefaultAdmin = "127.0.0.1:9464"

// maxPendingN caps /pending?n=, and defaultPendingN is its default.
const (
	maxPendingN     = 1000
	defaultPendingN = 20
)

// Bounds of -admin-scan: the least time between two scans of the
// shards' tables for /pending and the page, and its default.
const (
	minScanInterval     = 250 * time.Millisecond
	defaultScanInterval = time.Second
)

// adminOptions configures the admin endpoint's handler.
type adminOptions struct {
	Pprof bool
	// ScanInterval is the least time between two scans of the tables
	// (at least minScanInterval).
	ScanInterval time.Duration
	// Loopback: the endpoint listens on loopback only, and answers only
	// requests that name it so (hostCheck).
	Loopback bool
}

// adminEndpoint is the admin endpoint's handler and its scans.
type adminEndpoint struct {
	http.Handler
	scans *pendingScans
}

// adminHandler serves the admin endpoint for srv.
func adminHandler(srv *netio.Server, o adminOptions) *adminEndpoint {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newServerCollector(srv))
	scans := newPendingScans(srv, max(o.ScanInterval, minScanInterval))
	g := newGate(adminRate)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", g.wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !srv.Accepting() {
			http.Error(w, "not accepting connections", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /pending", g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { servePending(srv, scans, w, r) })))
	mux.Handle("GET /{$}", g.wrap(newStatusHandler(srv, scans, version())))
	if o.Pprof {
		mux.Handle("/debug/pprof/", g.wrap(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", g.wrap(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", g.wrap(capSeconds(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", g.wrap(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", g.wrap(capSeconds(pprof.Trace)))
	}
	if o.Loopback {
		return &adminEndpoint{Handler: hostCheck(mux), scans: scans}
	}
	return &adminEndpoint{Handler: mux, scans: scans}
}

// pendingScans serves the oldest pending roots from a snapshot: one scan
// of the shards' tables (OldestPending: on the executors, at their next
// tick) at most every interval, of maxPendingN roots, whatever the
// requests ask. A request in the meantime gets the snapshot, its ages
// and deadlines moved on by the time since it was taken.
type pendingScans struct {
	srv      *netio.Server
	interval time.Duration
	scans    atomic.Uint64 // scans taken

	mu    sync.Mutex // held across a scan: requests meanwhile wait for it
	at    time.Time  // guarded by mu: when the snapshot was taken
	roots []ackcore.PendingRoot
}

func newPendingScans(srv *netio.Server, interval time.Duration) *pendingScans {
	return &pendingScans{srv: srv, interval: interval}
}

// oldest returns up to n of the snapshot's roots, oldest first, as of
// now.
func (p *pendingScans) oldest(n int) []ackcore.PendingRoot {
	p.mu.Lock()
	if p.at.IsZero() || time.Since(p.at) >= p.interval {
		p.roots = p.srv.OldestPending(maxPendingN)
		p.at = time.Now()
		p.scans.Add(1)
	}
	roots, at := p.roots, p.at
	p.mu.Unlock()
	since := time.Since(at)
	out := make([]ackcore.PendingRoot, min(n, len(roots)))
	for i := range out {
		out[i] = roots[i]
		out[i].Age += since
		out[i].Deadline -= since
	}
	return out
}

// pendingRoot is one /pending entry. Root and client ids are strings
// ("0x1f"): JSON numbers lose a uint64's low bits in most readers.
type pendingRoot struct {
	Root string `json:"root"`
	// Task is the root's spout task; absent for an entry that saw no
	// INIT yet (ACKs ahead of it).
	Task            *uint32 `json:"task,omitempty"`
	AgeSeconds      float64 `json:"age_seconds"`
	DeadlineSeconds float64 `json:"deadline_seconds"` // until it times out; negative: overdue
	Client          string  `json:"client,omitempty"` // the client id owning the task, when connected
	Remote          string  `json:"remote,omitempty"` // that connection's address
}

func servePending(srv *netio.Server, scans *pendingScans, w http.ResponseWriter, r *http.Request) {
	n := defaultPendingN
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxPendingN {
			http.Error(w, fmt.Sprintf("n=%q: want a whole number in [1, %d]", s, maxPendingN), http.StatusBadRequest)
			return
		}
		n = v
	}
	roots := scans.oldest(n)
	out := make([]pendingRoot, 0, len(roots))
	for _, p := range roots {
		e := pendingRoot{Root: fmt.Sprintf("%#x", p.Root), AgeSeconds: p.Age.Seconds(), DeadlineSeconds: p.Deadline.Seconds()}
		if p.Task != ackcore.NoTask {
			t := p.Task
			e.Task = &t
			if id, remote, ok := srv.TaskOwner(t); ok {
				e.Client, e.Remote = fmt.Sprintf("%#x", id), remote
			}
		}
		out = append(out, e)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// serverCollector exports a netio.Server's counters at each scrape.
type serverCollector struct {
	srv *netio.Server
	d   map[string]*prometheus.Desc
	ver []string // build info label values
}

// series is one exported series: its name (after "ackerd_"), help and
// variable labels.
var series = []struct {
	name, help string
	labels     []string
}{
	{"build_info", "Build of this ackerd: module version, VCS revision, Go version (always 1).", []string{"version", "revision", "goversion"}},
	{"acker_messages_total", "Well-formed messages a shard took, by kind (refused ones included).", []string{"shard", "kind"}},
	{"acker_roots_completed_total", "Roots a shard reported Completed.", []string{"shard"}},
	{"acker_roots_failed_total", "Roots a shard reported Failed, by reason.", []string{"shard", "reason"}},
	{"acker_refused_total", "ACKs and RESETs refused at the bound (full) and malformed messages (invalid).", []string{"shard", "reason"}},
	{"acker_fails_overflow_total", "FAILs at the bound: held in the reserve, in the overflow filter, or dropped (their roots time out).", []string{"shard", "how"}},
	{"acker_orphans_expired_total", "Entries that never saw an INIT and expired silently.", []string{"shard"}},
	{"acker_orphans_evicted_total", "Entries without INIT that gave way to another root at the bound.", []string{"shard"}},
	{"acker_orphans_refused_total", "ACKs, FAILs and RESETs for unknown roots refused at their sender's orphan share.", []string{"shard"}},
	{"acker_pending_entries", "Entries in a shard's table, with or without INIT.", []string{"shard"}},
	{"connections", "Connections open, by state: in the handshake or authenticated.", []string{"state"}},
	{"connections_accepted_total", "Connections accepted.", nil},
	{"connections_refused_total", "Connections closed at authentication (MaxConns reached) or at once (shutting down).", nil},
	{"handshake_failures_total", "Connections that failed the handshake, by cause.", []string{"cause"}},
	{"protocol_errors_total", "Authenticated connections closed for a malformed frame.", nil},
	{"slow_closed_total", "Connections closed for not reading their outcomes.", nil},
	{"frames_received_total", "Frames read from authenticated connections.", nil},
	{"received_bytes_total", "Bytes of frames read from authenticated connections.", nil},
	{"frames_sent_total", "Outcome frames queued to connections.", nil},
	{"sent_bytes_total", "Bytes written to connections.", nil},
	{"messages_total", "Messages handed to the acker.", nil},
	{"outcomes_routed_total", "Outcomes queued to the connection owning their task.", nil},
	{"outcomes_unrouted_total", "Outcomes whose task had no connection (dropped).", nil},
	{"inits_refused_total", "INITs answered Failed{full} past their connection's fair share.", nil},
	{"resets_dropped_total", "RESETs dropped past their connection's RESET share.", nil},
	{"roots_unwritten", "Roots whose INIT the server took and whose outcome it has not written yet, all connections.", nil},
	{"roots_held", "Of those, the roots in the acker (outcome not yet routed), all connections.", nil},
	{"router_backlog_outcomes", "Outcomes waiting for the router, in the shards' rings and held by them.", nil},
	{"router_held_outcomes", "Of those, the outcomes the shards hold beyond their full rings.", nil},
	{"share_roots", "A connection's fair share of the acker's table (roots), now.", nil},
}

func newServerCollector(srv *netio.Server) *serverCollector {
	c := &serverCollector{srv: srv, d: map[string]*prometheus.Desc{}}
	for _, s := range series {
		c.d[s.name] = prometheus.NewDesc("ackerd_"+s.name, s.help, s.labels, nil)
	}
	c.ver = []string{"unknown", "unknown", "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		c.ver[0], c.ver[2] = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				c.ver[1] = s.Value
			}
		}
	}
	return c
}

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v, labels...)
	}
	gauge("build_info", 1, c.ver...)
	srv := c.srv
	for i := range srv.Shards() {
		st, sh := srv.ShardStats(i), strconv.Itoa(i)
		counter("acker_messages_total", st.Inits, sh, "init")
		counter("acker_messages_total", st.Acks, sh, "ack")
		counter("acker_messages_total", st.Fails, sh, "fail")
		counter("acker_messages_total", st.Resets, sh, "reset")
		counter("acker_roots_completed_total", st.Completed, sh)
		counter("acker_roots_failed_total", st.FailedExplicit, sh, ackcore.ReasonExplicit.String())
		counter("acker_roots_failed_total", st.FailedTimeout, sh, ackcore.ReasonTimeout.String())
		counter("acker_roots_failed_total", st.FailedFull, sh, ackcore.ReasonFull.String())
		counter("acker_roots_failed_total", st.FailedStopped, sh, ackcore.ReasonStopped.String())
		counter("acker_refused_total", st.RefusedFull, sh, ackcore.ReasonFull.String())
		counter("acker_refused_total", st.RefusedInvalid, sh, ackcore.ReasonInvalid.String())
		counter("acker_fails_overflow_total", st.FailsReserved, sh, "reserved")
		counter("acker_fails_overflow_total", st.FailsFiltered, sh, "filtered")
		counter("acker_fails_overflow_total", st.FailsDropped, sh, "dropped")
		counter("acker_orphans_expired_total", st.Orphans, sh)
		counter("acker_orphans_evicted_total", st.OrphansEvicted, sh)
		counter("acker_orphans_refused_total", st.OrphansRefused, sh)
		gauge("acker_pending_entries", float64(st.Pending), sh)
	}
	st := srv.Stats()
	gauge("connections", float64(st.InHandshake), "handshake")
	gauge("connections", float64(st.Open-int64(st.InHandshake)), "authenticated")
	counter("connections_accepted_total", st.Accepted)
	counter("connections_refused_total", st.Refused)
	hf := st.HandshakeFailures
	for _, f := range []struct {
		cause string
		n     uint64
	}{{"auth", hf.Auth}, {"tls", hf.TLS}, {"protocol", hf.Protocol}, {"timeout", hf.Timeout},
		{"task_owned", hf.TaskOwned}, {"overloaded", hf.Overloaded}, {"gone", hf.Gone}} {
		counter("handshake_failures_total", f.n, f.cause)
	}
	counter("protocol_errors_total", st.ProtocolErrors)
	counter("slow_closed_total", st.SlowClosed)
	counter("frames_received_total", st.FramesIn)
	counter("received_bytes_total", st.BytesIn)
	counter("frames_sent_total", st.FramesOut)
	counter("sent_bytes_total", st.BytesOut)
	counter("messages_total", st.Msgs)
	counter("outcomes_routed_total", st.Outcomes)
	counter("outcomes_unrouted_total", st.Unrouted)
	counter("inits_refused_total", st.InitsRefused)
	counter("resets_dropped_total", st.ResetsDropped)
	var unwritten, held int64
	for _, cs := range srv.Conns() {
		unwritten += cs.Pending
		held += cs.Held
	}
	gauge("roots_unwritten", float64(unwritten))
	gauge("roots_held", float64(held))
	bl := srv.Backlog()
	gauge("router_backlog_outcomes", float64(bl.Backlog))
	gauge("router_held_outcomes", float64(bl.Held))
	gauge("share_roots", float64(srv.Share()))
}

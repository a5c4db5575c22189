package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/buildinfo"
	"github.com/xorack/xorack/internal/numfield"
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
	srv   *netio.Server
	d     map[string]*prometheus.Desc
	build []string // build_info's label values (buildinfo.Info.Labels)
}

// seriesTable lists the exported series, one a line: the name (after
// ackerd_), its variable labels (- for none) and the help. A series
// labelled by shard first is read from each shard's ackcore.Stats, any
// other from the server's netio.ServerStats: beneath it, a line per
// sample, the field it reads (a dotted path for a nested one) and the
// values of the labels after shard. A series without such lines is
// computed in Collect. A name ending in _total is a counter, any other a
// gauge. Every number of both stats has a series (TestEveryNumberExported
// fails for one that has none), but for the few it names exported
// another way.
const seriesTable = `
build_info                  version,revision,goversion Build of this ackerd: module version, VCS revision, Go version (always 1).
acker_messages_total        shard,kind                 Well-formed messages a shard took, by kind (refused ones included).
	Inits init
	Acks ack
	Fails fail
	Resets reset
acker_roots_completed_total shard                      Roots a shard reported Completed.
	Completed
acker_roots_failed_total    shard,reason               Roots a shard reported Failed, by reason.
	FailedExplicit explicit
	FailedTimeout timeout
	FailedFull full
	FailedStopped stopped
acker_refused_total         shard,reason               ACKs and RESETs refused at the bound (full) and malformed messages (invalid).
	RefusedFull full
	RefusedInvalid invalid
acker_fails_overflow_total  shard,how                  FAILs at the bound: held in the reserve, in the overflow filter, or dropped (their roots time out).
	FailsReserved reserved
	FailsFiltered filtered
	FailsDropped dropped
acker_orphans_expired_total shard                      Entries that never saw an INIT and expired silently.
	Orphans
acker_orphans_evicted_total shard                      Entries without INIT that gave way to another root at the bound.
	OrphansEvicted
acker_orphans_refused_total shard                      ACKs, FAILs and RESETs for unknown roots refused at their sender's orphan share.
	OrphansRefused
acker_orphans_drained_total shard                      Orphans a FAIL left (it carried the failed tuple's ack val) removed by their tree's last ACK.
	OrphansDrained
acker_pending_entries       shard                      Entries in a shard's table, with or without INIT.
	Pending
connections                 state                      Connections open, by state: in the handshake or authenticated.
connections_accepted_total  -                          Connections accepted.
	Accepted
connections_refused_total   -                          Connections closed at authentication (MaxConns reached) or at once (shutting down).
	Refused
handshakes_dropped_total    -                          Connections dropped in the handshake for newer ones (MaxHandshakes); among the overloaded handshake failures.
	HandshakesDropped
handshake_failures_total    cause                      Connections that failed the handshake, by cause.
	HandshakeFailures.Auth auth
	HandshakeFailures.TLS tls
	HandshakeFailures.Protocol protocol
	HandshakeFailures.Timeout timeout
	HandshakeFailures.TaskOwned task_owned
	HandshakeFailures.Overloaded overloaded
	HandshakeFailures.Gone gone
protocol_errors_total       -                          Authenticated connections closed for a malformed frame.
	ProtocolErrors
slow_closed_total           -                          Connections closed for not reading their outcomes.
	SlowClosed
frames_received_total       -                          Frames read from authenticated connections.
	FramesIn
received_bytes_total        -                          Bytes of frames read from authenticated connections.
	BytesIn
frames_sent_total           -                          Outcome frames queued to connections.
	FramesOut
sent_bytes_total            -                          Bytes written to connections.
	BytesOut
messages_total              -                          Messages handed to the acker.
	Msgs
outcomes_routed_total       -                          Outcomes queued to the connection owning their task.
	Outcomes
outcomes_unrouted_total     -                          Outcomes whose task had no connection (dropped).
	Unrouted
inits_refused_total         -                          INITs answered Failed{full} past their connection's fair share.
	InitsRefused
resets_dropped_total        -                          RESETs dropped past their connection's RESET share.
	ResetsDropped
roots_unwritten             -                          Roots whose INIT the server took and whose outcome it has not written yet, all connections.
roots_held                  -                          Of those, the roots in the acker (outcome not yet routed), all connections.
router_backlog_outcomes     -                          Outcomes waiting for the router, in the shards' rings and held by them.
router_held_outcomes        -                          Of those, the outcomes the shards hold beyond their full rings.
share_roots                 -                          A connection's fair share of the acker's table (roots), now.
share_unallocated_roots     -                          Room of the acker's table allocated to no connection: the reserve connections draw on past their share.
	Unallocated
`

// series is one line of seriesTable, read, with its samples.
type series struct {
	name, help string
	labels     []string
	kind       prometheus.ValueType
	perShard   bool
	samples    []sample
}

// sample is a series' value read from a field, with its label values.
type sample struct {
	field  []int
	labels []string
}

// readSeries reads table (seriesTable). A line it cannot read, or a field
// that is not a number of the stats it names, panics: the table is the
// command's own, and its tests read it.
func readSeries(table string) []series {
	var out []series
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(line)
		if !strings.HasPrefix(line, "\t") {
			if len(f) < 3 {
				panic(fmt.Sprintf("ackerd: series line %q: want name, labels and help", line))
			}
			s := series{name: f[0], help: strings.Join(f[2:], " "), kind: prometheus.GaugeValue}
			if f[1] != "-" {
				s.labels = strings.Split(f[1], ",")
			}
			if strings.HasSuffix(s.name, "_total") {
				s.kind = prometheus.CounterValue
			}
			s.perShard = len(s.labels) > 0 && s.labels[0] == "shard"
			out = append(out, s)
			continue
		}
		s := &out[len(out)-1]
		from := reflect.TypeFor[netio.ServerStats]()
		if s.perShard {
			from = reflect.TypeFor[ackcore.Stats]()
		}
		index, err := numfield.Find(from, f[0])
		if err != nil {
			panic(fmt.Sprintf("ackerd: series %s: %v", s.name, err))
		}
		if want := len(s.labels) - len(f[1:]); want != 0 && !(s.perShard && want == 1) {
			panic(fmt.Sprintf("ackerd: series %s: sample %s gives %d label values for labels %v", s.name, f[0], len(f[1:]), s.labels))
		}
		s.samples = append(s.samples, sample{field: index, labels: f[1:]})
	}
	return out
}

var allSeries = readSeries(seriesTable)

func newServerCollector(srv *netio.Server) *serverCollector {
	c := &serverCollector{srv: srv, d: map[string]*prometheus.Desc{}}
	for _, s := range allSeries {
		c.d[s.name] = prometheus.NewDesc("ackerd_"+s.name, s.help, s.labels, nil)
	}
	c.build = buildinfo.Read().Labels()
	return c
}

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v, labels...)
	}
	gauge("build_info", 1, c.build...)
	srv := c.srv
	shards := make([]reflect.Value, srv.Shards())
	for i := range shards {
		shards[i] = reflect.ValueOf(srv.ShardStats(i))
	}
	st := srv.Stats()
	server := reflect.ValueOf(st)
	for _, s := range allSeries {
		for _, sm := range s.samples {
			if !s.perShard {
				ch <- prometheus.MustNewConstMetric(c.d[s.name], s.kind, numfield.Float(server, sm.field), sm.labels...)
				continue
			}
			for i, sh := range shards {
				labels := append([]string{strconv.Itoa(i)}, sm.labels...)
				ch <- prometheus.MustNewConstMetric(c.d[s.name], s.kind, numfield.Float(sh, sm.field), labels...)
			}
		}
	}
	gauge("connections", float64(st.InHandshake), "handshake")
	gauge("connections", float64(st.Open-int64(st.InHandshake)), "authenticated")
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

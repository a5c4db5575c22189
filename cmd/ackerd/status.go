package main

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/netio"
)

// The admin endpoint's status page (GET /): what an operator reads first,
// from the same counters /metrics exports. Plain HTML refreshed every 2 s
// by a meta tag, no script. Rates are over the time since the page was
// last served (the first load: since ackerd started). The oldest pending
// roots come from the scans' snapshot (pendingScans).

var statusPage = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>ackerd</title>
<style>body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:0 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}</style>
</head><body>
<h1>ackerd</h1>
<p>{{.Version}} &middot; up {{.Uptime}} &middot; {{if .Accepting}}accepting connections{{else}}<b>not accepting connections</b>{{end}}</p>
<h2>Acker</h2>
<table id="shards"><tr><th class="l">shard</th><th>pending</th><th>inits/s</th><th>acks/s</th><th>completed</th><th>failed explicit</th><th>failed timeout</th><th>failed full</th><th>orphans evicted</th><th>FAILs dropped</th></tr>
{{range .Shards}}<tr><td class="l">{{.Name}}</td><td>{{.Pending}}</td><td>{{.InitsPerSec}}</td><td>{{.AcksPerSec}}</td><td>{{.Completed}}</td><td>{{.FailedExplicit}}</td><td>{{.FailedTimeout}}</td><td>{{.FailedFull}}</td><td>{{.OrphansEvicted}}</td><td>{{.FailsDropped}}</td></tr>
{{end}}</table>
<h2>Connections</h2>
<p id="conns">{{.Open}} open, {{.InHandshake}} in the handshake; {{.Accepted}} accepted, {{.HandshakeFails}} failed the handshake ({{.HandshakesDropped}} dropped for newer ones), {{.SlowClosed}} closed as slow, {{.ProtocolErrors}} for protocol errors</p>
<table id="clients"><tr><th class="l">client</th><th class="l">remote</th><th>pending</th><th>held in the acker</th><th>INITs refused (share)</th><th>RESETs dropped</th></tr>
{{range .Conns}}<tr><td class="l">{{printf "%#x" .ClientID}}</td><td class="l">{{.Remote}}</td><td>{{.Pending}}</td><td>{{.Held}}</td><td>{{.InitsRefused}}</td><td>{{.ResetsDropped}}</td></tr>
{{end}}</table>
<h2>Oldest pending</h2>
<table id="oldest"><tr><th class="l">root</th><th>task</th><th>age</th><th>times out in</th></tr>
{{range .Oldest}}<tr><td class="l">{{printf "%#x" .Root}}</td><td>{{if eq .Task $.NoTask}}-{{else}}{{.Task}}{{end}}</td><td>{{.Age}}</td><td>{{.Deadline}}</td></tr>
{{end}}</table>
<p>More: <a href="metrics">/metrics</a>, <a href="pending?n=100">/pending</a>.</p>
</body></html>
`))

// statusRow is one shard's line.
type statusRow struct {
	Name                                     string
	Pending                                  int
	InitsPerSec, AcksPerSec                  string
	Completed, FailedExplicit, FailedTimeout uint64
	FailedFull, OrphansEvicted, FailsDropped uint64
}

// statusView is what the page shows.
type statusView struct {
	Version, Uptime string
	Accepting       bool
	Shards          []statusRow
	netio.ServerStats
	Conns  []netio.ConnStats
	Oldest []oldestRow
	NoTask uint32
}

type oldestRow struct {
	Root          uint64
	Task          uint32
	Age, Deadline time.Duration
}

// statusHandler serves the page; it keeps the last load's counters for
// the rates (one page, many readers: guarded by the handler's own lock).
type statusHandler struct {
	srv     *netio.Server
	scans   *pendingScans
	version string
	start   time.Time
	now     func() time.Time

	last chan statusSnap // one-slot lock and value
}

type statusSnap struct {
	at     time.Time
	shards []ackcore.Stats
}

func newStatusHandler(srv *netio.Server, scans *pendingScans, version string) *statusHandler {
	h := &statusHandler{srv: srv, scans: scans, version: version, start: time.Now(), now: time.Now, last: make(chan statusSnap, 1)}
	// The first load's rates are over the time since the server started
	// (its counters were zero then).
	h.last <- statusSnap{at: h.start, shards: make([]ackcore.Stats, srv.Shards())}
	return h
}

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	v := statusView{Version: h.version, Uptime: now.Sub(h.start).Round(time.Second).String(),
		Accepting: h.srv.Accepting(), ServerStats: h.srv.Stats(), Conns: h.srv.Conns(), NoTask: ackcore.NoTask}
	slices.SortFunc(v.Conns, func(a, b netio.ConnStats) int { return int(b.Pending - a.Pending) })
	prev := <-h.last
	cur := statusSnap{at: now, shards: make([]ackcore.Stats, h.srv.Shards())}
	for i := range cur.shards {
		st := h.srv.ShardStats(i)
		cur.shards[i] = st
		row := statusRow{Name: fmt.Sprint(i), Pending: st.Pending, InitsPerSec: "-", AcksPerSec: "-",
			Completed: st.Completed, FailedExplicit: st.FailedExplicit, FailedTimeout: st.FailedTimeout,
			FailedFull: st.FailedFull, OrphansEvicted: st.OrphansEvicted, FailsDropped: st.FailsDropped}
		if dt := now.Sub(prev.at).Seconds(); i < len(prev.shards) && dt > 0 {
			row.InitsPerSec = rate(st.Inits-prev.shards[i].Inits, dt)
			row.AcksPerSec = rate(st.Acks-prev.shards[i].Acks, dt)
		}
		v.Shards = append(v.Shards, row)
	}
	h.last <- cur
	for _, p := range h.scans.oldest(10) {
		v.Oldest = append(v.Oldest, oldestRow{Root: p.Root, Task: p.Task, Age: p.Age.Round(time.Millisecond), Deadline: p.Deadline.Round(time.Millisecond)})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusPage.Execute(w, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// rate formats n events over dt seconds.
func rate(n uint64, dt float64) string { return fmt.Sprintf("%.0f", float64(n)/dt) }

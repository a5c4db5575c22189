package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xorack/xorack/perf"
)

// CheckFloor is the least xorack core msgs/s may be, as a multiple of the
// Go-map baseline's measured in the same run.
const CheckFloor = 2.0

// FaultFloor is the least a core or pipeline xorack row with fails after
// fan-out (at most faultFloorRate of the roots, no drops) may run, as a
// multiple of its fault-free twin's msgs/s (Row.FaultFreeRatio).
const (
	FaultFloor     = 0.8
	faultFloorRate = 0.05
)

// Check returns why rep fails the performance gate, one line per reason,
// or nothing: any row that failed verification; at core level, any
// (shape, window) where xorack's fault-free msgs/s is below floor times
// gomap's, or where either row is missing; any xorack fault row that
// FaultFloor holds whose msgs/s is below FaultFloor times its twin's;
// a source-level kafka-acked row whose records/s, or records per
// CPU-second, are below SourceFloor (jetstream-acked: JetStreamFloor)
// times the in-memory spout's in every rep of the run (Row.WallBestRatio,
// Row.CPURatio);
// and the faults level's breaker row below faultsBreakerFloor times the
// mixed row's goodput.
func Check(rep *Report, floor float64) []string {
	var bad []string
	for _, r := range rep.Rows {
		if !r.Verified {
			bad = append(bad, fmt.Sprintf("verification failed: %s: %s", r.Name(), r.VerifyError))
		}
		if r.Impl == Reference && r.FaultFreeRatio > 0 && r.DropRate == 0 && r.FailRate <= faultFloorRate && r.FaultFreeRatio < FaultFloor {
			bad = append(bad, fmt.Sprintf("%s: %.2fx its fault-free twin's msgs/s (floor %.1fx)", r.Name(), r.FaultFreeRatio, FaultFloor))
		}
		if f := sourceFloor(r.Impl); r.Level == LevelSource {
			if r.WallBestRatio > 0 && r.WallBestRatio < f {
				bad = append(bad, fmt.Sprintf("%s: %.2fx the in-memory spout's records/s in the same run, best rep (floor %.2fx)", r.Name(), r.WallBestRatio, f))
			}
			if r.CPURatio > 0 && r.CPURatio < f {
				bad = append(bad, fmt.Sprintf("%s: %.2fx the in-memory spout's records per CPU-second in the same run, best rep (floor %.2fx)", r.Name(), r.CPURatio, f))
			}
		}
	}
	bad = append(bad, faultsCheck(rep)...)
	type key struct {
		shape string
		p     int
	}
	var keys []key
	xo, gm := map[key]*Row{}, map[key]*Row{}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Level != LevelCore || r.FailRate > 0 || r.DropRate > 0 {
			continue // the gomap gate compares fault-free rows
		}
		k := key{r.Shape, r.Pending}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		switch r.Impl {
		case Reference:
			xo[k] = r
		case GoMapName:
			gm[k] = r
		}
	}
	if len(keys) == 0 {
		return append(bad, "no core rows: the check needs the core level with xorack and gomap")
	}
	for _, k := range keys {
		x, g := xo[k], gm[k]
		switch {
		case x == nil || g == nil:
			bad = append(bad, fmt.Sprintf("core %s P=%d: no xorack and gomap rows to compare", k.shape, k.p))
		case x.MsgsPerSec < floor*g.MsgsPerSec:
			bad = append(bad, fmt.Sprintf("core %s P=%d: xorack %s msgs/s is %.2fx gomap's %s msgs/s (floor %.0fx)",
				k.shape, k.p, si(x.MsgsPerSec), x.MsgsPerSec/g.MsgsPerSec, si(g.MsgsPerSec), floor))
		}
	}
	return bad
}

// WriteJSON writes rep as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("bench: reading report: %w", err)
	}
	return &rep, nil
}

// The counters shown in tables, in column order, with their headers.
var tableCounters = []struct {
	e    perf.Event
	head string
}{
	{perf.Cycles, "cyc/msg"}, {perf.Instructions, "ins/msg"}, {perf.CacheMisses, "llc-miss/msg"},
	{perf.BranchMisses, "br-miss/msg"}, {perf.TaskClock, "cpu-ns/msg"},
}

// stallLine describes st in one line.
func stallLine(st Stalls) string {
	return fmt.Sprintf("%d threads spinning %.2f s each lost the CPU for >=10µs %.0f/s, >=100µs %.0f/s, >=1ms %.1f/s per thread, longest %s, %.0f%% of their time (no latency percentile beats these)",
		st.Threads, st.Seconds, st.Over10us, st.Over100us, st.Over1ms, dur(&st.MaxNs), 100*st.Lost)
}

// WriteTable writes rep as an aligned text table with a header describing
// the machine and the configuration, and notes below.
func WriteTable(w io.Writer, rep *Report) error {
	var sb strings.Builder
	c := rep.Config
	m := rep.Machine
	fmt.Fprintf(&sb, "machine: %s\n", m.Summary)
	fmt.Fprintf(&sb, "go:      %s %s/%s, GOMAXPROCS %d\n", m.GoVersion, m.GOOS, m.GOARCH, m.GOMAXPROCS)
	fmt.Fprintf(&sb, "perf:    %s\n", rep.PerfNote)
	if rep.Stalls.Threads > 0 {
		fmt.Fprintf(&sb, "stalls:  %s\n", stallLine(rep.Stalls))
	}
	if rep.StallsEnd.Threads > 0 {
		fmt.Fprintf(&sb, "  after: %s\n", stallLine(rep.StallsEnd))
	}
	if rep.Verdict != "" {
		fmt.Fprintf(&sb, "verdict: %s\n", rep.Verdict)
	}
	fmt.Fprintf(&sb, "config:  %s\n\n", describe(c))
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	twins := slices.ContainsFunc(rep.Rows, func(r Row) bool { return r.FaultFreeRatio > 0 })
	head := []string{"level", "impl", "shape", "P", "msgs/s", "vs xorack", "trees/s", "B/pending", "p50", "p99"}
	if twins {
		head = slices.Insert(head, 6, "vs fault-free")
	}
	for _, tc := range tableCounters {
		head = append(head, tc.head)
	}
	head = append(head, "GCs", "verified")
	table := [][]string{head}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		ratio := perf.NA
		if r.RatioToXorack != nil {
			ratio = fmt.Sprintf("%.2fx", *r.RatioToXorack)
		}
		level := string(r.Level)
		if r.Conns > 0 {
			level += fmt.Sprintf(":%dc", r.Conns) // connections
		}
		if r.Batch > 0 {
			level += fmt.Sprintf(":b%d", r.Batch) // producer batch
		}
		if (r.FailRate > 0 || r.DropRate > 0) && r.FaultStats == nil {
			level += ":f" + strconv.FormatFloat(r.FailRate+r.DropRate, 'g', 6, 64) // a core or pipeline fault row, beside its twin (6 digits: 0.05+0.01 reads 0.06)
		}
		cells := []string{level, r.Impl, r.Shape, fmt.Sprint(r.Pending), si(r.MsgsPerSec), ratio,
			si(r.TreesPerSec), fmt.Sprintf("%.1f", r.BytesPerRoot), dur(r.P50Ns), dur(r.P99Ns)}
		if twins {
			ff := ""
			if r.FaultFreeRatio > 0 {
				ff = fmt.Sprintf("%.2fx", r.FaultFreeRatio)
			}
			cells = slices.Insert(cells, 6, ff)
		}
		for _, tc := range tableCounters {
			cells = append(cells, counter(r.CountersPerMsg[tc.e.Unit()]))
		}
		ok := "yes"
		if !r.Verified {
			ok = "NO"
		}
		cells = append(cells, fmt.Sprint(r.GCCycles), ok)
		table = append(table, cells)
	}
	for _, cells := range dropNA(table) {
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range implLines(rep.Rows) {
		fmt.Fprintf(&sb, "  %s\n", l)
	}
	sb.WriteString("\n")
	if ft := faultsTable(rep.Rows); len(ft) > 0 {
		sb.WriteString(strings.Join(ft, "\n") + "\n\n")
	}
	for _, n := range notes(rep) {
		fmt.Fprintf(&sb, "- %s\n", n)
	}
	if rep.Busy {
		fmt.Fprintf(&sb, "\n%s\n", strings.ToUpper(verdictBusy[:1])+verdictBusy[1:])
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// dropNA returns table (a header row, then rows) without the columns that
// are n/a in every row.
func dropNA(table [][]string) [][]string {
	if len(table) < 2 {
		return table
	}
	var keep []int
	for c := range table[0] {
		for _, row := range table[1:] {
			if c < len(row) && row[c] != perf.NA {
				keep = append(keep, c)
				break
			}
		}
	}
	out := make([][]string, len(table))
	for i, row := range table {
		for _, c := range keep {
			if c < len(row) {
				out[i] = append(out[i], row[c])
			}
		}
	}
	return out
}

// notes explains the table's columns from what the rows say about
// themselves, once per distinct statement.
func notes(rep *Report) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	add(fmt.Sprintf("msgs/s is the median of %d interleaved repetitions; vs xorack divides by the xorack row of the same level and window", rep.Config.Reps))
	if slices.ContainsFunc(rep.Rows, func(r Row) bool { return r.FaultFreeRatio > 0 }) {
		add("a level suffixed :fX is a fault row (fails plus drops, X of the roots); vs fault-free is its msgs/s over its fault-free twin's, the same impl, level and window run beside it in this process (the median of their paired reps)")
	}
	for _, r := range rep.Rows {
		if r.LatencySource != "" {
			add(fmt.Sprintf("%s latency (%s): %s", r.Level, r.Impl, r.LatencySource))
		}
	}
	for _, r := range rep.Rows {
		if r.CounterScope != "" {
			add(fmt.Sprintf("%s counters: %s", r.Level, r.CounterScope))
		}
	}
	for _, r := range rep.Rows {
		if r.Timing == "acker-calls" {
			add("core fault runs and their twins time only the acker's Apply and Expire calls, not the generator that salts roots between them")
		}
		if r.Clock == "stream" {
			add(fmt.Sprintf("fault runs and their twins: acker clock advances %d ns per message emitted; timeout %v of stream time", streamNsPerMsg, time.Duration(r.TimeoutNs)))
		}
	}
	for _, n := range netSummary(rep.Rows) {
		add(n)
	}
	for _, n := range rep.Notes {
		add(n)
	}
	for _, r := range rep.Rows {
		if !r.Verified {
			add(fmt.Sprintf("VERIFICATION FAILED %s: %s", r.Name(), r.VerifyError))
		}
	}
	return out
}

func describe(c Config) string {
	var lv, ps []string
	for _, l := range c.Levels {
		lv = append(lv, string(l))
	}
	for _, p := range c.Pending {
		ps = append(ps, fmt.Sprint(p))
	}
	per := c.Duration.String()
	if c.Msgs > 0 {
		per = fmt.Sprintf("%d msgs", c.Msgs)
	}
	net := ""
	if slices.Contains(c.Levels, LevelNet) {
		var cs, bs []string
		for _, n := range c.Conns {
			cs = append(cs, fmt.Sprint(n))
		}
		for _, b := range c.NetBatch {
			bs = append(bs, fmt.Sprint(b))
		}
		net = fmt.Sprintf("; net conns %s, producer batches %s", strings.Join(cs, ","), strings.Join(bs, ","))
	}
	bare := ""
	if c.FailBare {
		bare = " (bare FAILs)"
	}
	return fmt.Sprintf("levels %s; shapes %s; P %s; producers %d, shards %d; fail %g%s, drop %g; %s per row in %d reps; batch %d%s; seed %d",
		strings.Join(lv, ","), strings.Join(c.Shapes, ","), strings.Join(ps, ","), c.Producers, c.Shards,
		c.FailRate, bare, c.DropRate, per, c.Reps, c.Batch, net, c.Seed)
}

// si renders a rate with an SI suffix: 52.1M, 830k.
func si(x float64) string {
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.2fG", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.0fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

func dur(ns *int64) string {
	if ns == nil {
		return perf.NA
	}
	d := time.Duration(*ns)
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	}
	return fmt.Sprintf("%dns", *ns)
}

func counter(x *float64) string {
	if x == nil {
		return perf.NA
	}
	return perf.Value{N: uint64(math.Round(*x * 1000)), OK: true}.FormatPerOp(1000)
}

// WriteBenchfmt writes one Go benchmark line per repetition of each row,
// which benchstat reads: the iteration count is the repetition's messages
// and ns/op is per message; B/root, latencies and the known counters
// follow as extra metrics.
func WriteBenchfmt(w io.Writer, rep *Report) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "goos: %s\ngoarch: %s\npkg: github.com/xorack/xorack/bench\n", rep.Machine.GOOS, rep.Machine.GOARCH)
	if b := rep.Machine.Topology.Brand; b != "" {
		fmt.Fprintf(&sb, "cpu: %s\n", b)
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		name := "BenchmarkAckbench/" + r.Name()
		if rep.Machine.GOMAXPROCS > 1 {
			name += fmt.Sprintf("-%d", rep.Machine.GOMAXPROCS)
		}
		n := int64(1)
		if len(r.RepMsgsPerSec) > 0 {
			n = max(r.Msgs/int64(len(r.RepMsgsPerSec)), 1)
		}
		for _, rate := range r.RepMsgsPerSec {
			if rate <= 0 {
				continue
			}
			fmt.Fprintf(&sb, "%s\t%d\t%.3f ns/op\t%.0f msgs/s\t%.1f B/root", name, n, 1e9/rate, rate, r.BytesPerRoot)
			for _, l := range []struct {
				v    *int64
				unit string
			}{{r.P50Ns, "p50-ns"}, {r.P99Ns, "p99-ns"}, {r.P999Ns, "p99.9-ns"}} {
				if l.v != nil {
					fmt.Fprintf(&sb, "\t%d %s", *l.v, l.unit)
				}
			}
			for e := range perf.NumEvents {
				if x := r.CountersPerMsg[e.Unit()]; x != nil {
					fmt.Fprintf(&sb, "\t%.4g %s/op", *x, e.Unit())
				}
			}
			sb.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

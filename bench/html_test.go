package bench

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// netReport is a net level of 2 impls x conns {1,4} x batch {16,256} at
// two windows, and a topology level at one.
func netReport() *Report {
	rep := synthetic(60e6, 20e6)
	rep.Rows = nil
	for _, p := range []int{10000, 100000} {
		for _, impl := range []string{"netio", "grpc"} {
			for _, c := range []int{1, 4} {
				for _, b := range []int{16, 256} {
					rep.Rows = append(rep.Rows, Row{Level: LevelNet, Impl: impl, Shape: "wordcount", Pending: p, Conns: c, Batch: b,
						MsgsPerSec: float64(c*b) * 1e4, BytesPerRoot: 60, Verified: true})
				}
			}
		}
	}
	for _, impl := range []string{"acked", "unacked"} {
		rep.Rows = append(rep.Rows, Row{Level: LevelTopology, Impl: impl, Shape: "wordcount", Pending: 1024, MsgsPerSec: 3e6, Verified: true})
	}
	return rep
}

var svgText = regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>([^<]*)</text>`)

// TestHTMLCharts: a legend entry per net series (conns x batch), set right
// of the data; a bar chart for one-window levels; a bytes-per-root chart.
func TestHTMLCharts(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, netReport()); err != nil {
		t.Fatal(err)
	}
	h := buf.String()
	for _, title := range []string{"net, wordcount: throughput vs pending window", "net, wordcount: bytes per pending root",
		"topology, wordcount, P=1024: throughput"} {
		if !strings.Contains(h, "<figcaption>"+title+"</figcaption>") {
			t.Errorf("no chart %q", title)
		}
	}
	// The throughput chart's legend: 8 distinct entries, each once, all
	// right of the data area (chartW).
	start := strings.Index(h, "net, wordcount: throughput vs pending window")
	chart := h[start : start+strings.Index(h[start:], "</svg>")]
	seen := map[string]int{}
	for _, m := range svgText.FindAllStringSubmatch(chart, -1) {
		if strings.Contains(m[2], "conns=") {
			seen[m[2]]++
			if x, _ := strconv.ParseFloat(m[1], 64); x < chartW.Points() {
				t.Errorf("legend entry %q at x=%s, over the data (which ends at %.0f)", m[2], m[1], chartW.Points())
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("legend entries %v, want 8 distinct", seen)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("legend entry %q %d times", name, n)
		}
	}
	if !strings.Contains(h, ">netio conns=4 batch=256<") {
		t.Error(`no legend entry "netio conns=4 batch=256"`)
	}
}

// TestHTMLGate: the gate's verdict only when the run was gated; a row that
// failed its verification is shown either way.
func TestHTMLGate(t *testing.T) {
	page := func(rep *Report) string {
		var buf bytes.Buffer
		if err := WriteHTML(&buf, rep); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	rep := netReport() // no core level: the gate would fail
	if h := page(rep); strings.Contains(h, "Gate (-check)") {
		t.Error("an ungated report shows a gate verdict")
	}
	rep.CheckRatio = 2
	if h := page(rep); !strings.Contains(h, "Gate (-check) failed") || !strings.Contains(h, "no core rows") {
		t.Error("a gated report without core rows does not show the gate failed")
	}
	rep = synthetic(60e6, 20e6)
	rep.CheckRatio = 2
	if h := page(rep); !strings.Contains(h, "Gate (-check) passed") {
		t.Error("a passing gate is not shown")
	}
	rep.CheckRatio = 0
	rep.Rows[0].Verified, rep.Rows[0].VerifyError = false, "lost one"
	if h := page(rep); !strings.Contains(h, "Verification failed") || !strings.Contains(h, "lost one") || strings.Contains(h, "Gate (-check)") {
		t.Error("an ungated report with an unverified row")
	}
}

package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// TestStallCount feeds spin a scripted clock: the gaps between reads (the
// first from the start) are known, so are the counts, the longest gap and
// the time spun.
func TestStallCount(t *testing.T) {
	us := time.Microsecond
	reads := []time.Duration{1 * us, 2 * us, 12 * us, 13 * us, 200 * us, 201 * us, 1500 * us, 1501 * us}
	i := 0
	now := func() time.Duration {
		r := reads[i]
		i++
		return r
	}
	var sc stallCount
	sc.spin(now, 0, 1501*us)
	if i != len(reads) {
		t.Fatalf("spin read the clock %d times, want %d (until the end)", i, len(reads))
	}
	// Gaps: 1, 1, 10, 1, 187, 1, 1299, 1 µs.
	if want := [3]int64{3, 2, 1}; sc.over != want {
		t.Errorf("over = %v, want %v", sc.over, want)
	}
	if sc.max != 1299*us || sc.spent != 1501*us {
		t.Errorf("max %v spent %v, want 1.299ms and 1.501ms", sc.max, sc.spent)
	}
	s := summarizeStalls([]stallCount{sc, {spent: 1501 * us}})
	secs := 2 * 1501e-6
	if s.Threads != 2 || math.Abs(s.Seconds-1501e-6) > 1e-12 || s.MaxNs != int64(1299*us) {
		t.Errorf("summary %+v", s)
	}
	if math.Abs(s.Over10us-3/secs) > 1e-6 || math.Abs(s.Over100us-2/secs) > 1e-6 || math.Abs(s.Over1ms-1/secs) > 1e-6 {
		t.Errorf("rates %+v, want %v, %v, %v per second", s, 3/secs, 2/secs, 1/secs)
	}
}

// TestMeasureStalls runs the real meter briefly: the threads spin from
// the common start until the deadline (not past it by more than the
// longest gap), and some gap was seen.
func TestMeasureStalls(t *testing.T) {
	d := 20 * time.Millisecond
	s := measureStalls(d, 2)
	if s.Threads != 2 || s.Seconds < d.Seconds()*(1-1e-9) || s.Seconds > (d+time.Duration(s.MaxNs)).Seconds() {
		t.Fatalf("%+v: want 2 threads spinning %v each, past it by at most the longest gap", s, d)
	}
	if s.MaxNs <= 0 {
		t.Errorf("longest gap %d ns", s.MaxNs)
	}
	if s.Over10us < s.Over100us || s.Over100us < s.Over1ms || s.Over1ms < 0 {
		t.Errorf("rates not ordered: %+v", s)
	}
}

// TestStallLateStart: a thread held off until the other has spun past
// the deadline (as a busy machine may hold it) lost all its time: the
// meter counts from the common start, not from the thread's first read.
func TestStallLateStart(t *testing.T) {
	d := 5 * time.Millisecond
	first := make(chan struct{})
	counts := spinThreads(d, 2, func(i int, spin func()) {
		if i == 1 {
			<-first // until thread 0 has read the clock past the deadline
		}
		spin()
		if i == 0 {
			close(first)
		}
	})
	late := counts[1]
	if late.spent < d || late.lost != late.spent || late.over[2] < 1 {
		t.Errorf("the late thread: spent %v, lost %v, %d gaps of 1 ms or more; want at least %v, all of it lost in a gap", late.spent, late.lost, late.over[2], d)
	}
	if s := summarizeStalls(counts); s.Seconds < d.Seconds()*(1-1e-9) || s.Lost < 0.5 || s.Over1ms <= 0 {
		t.Errorf("%+v: want at least %v spun a thread and half of it lost", s, d)
	}
}

// TestBusy: either threshold makes a machine busy, at the start or the
// end of a run, and the verdict says so in its plain words.
func TestBusy(t *testing.T) {
	quiet := Stalls{Threads: 2, Seconds: 0.3, Over10us: 900, Over1ms: 0.5, Lost: 0.004}
	for _, c := range []struct {
		name       string
		start, end Stalls
		busy       bool
	}{
		{"quiet", quiet, quiet, false},
		{"time lost at the start", Stalls{Threads: 2, Lost: busyLost, Over1ms: 1}, quiet, true},
		{"long stalls at the end", quiet, Stalls{Threads: 2, Lost: 0.01, Over1ms: busyOver1ms}, true},
		{"nothing measured", Stalls{}, Stalls{}, false},
	} {
		busy, v := verdict(c.start, c.end)
		want := verdictQuiet
		if c.busy {
			want = verdictBusy
		}
		if busy != c.busy || !strings.HasPrefix(v, want+" (") {
			t.Errorf("%s: busy %v, verdict %q; want %v, %q", c.name, busy, v, c.busy, want)
		}
	}
	if got := (Stalls{Threads: 1, Lost: busyLost - 0.001, Over1ms: busyOver1ms - 0.1}).busy(); got {
		t.Error("busy just under both thresholds")
	}
}

// TestStallLost: the time lost is the gaps of 10µs or more over the time
// spun, from a scripted clock.
func TestStallLost(t *testing.T) {
	us := time.Microsecond
	reads := []time.Duration{5 * us, 25 * us, 30 * us, 130 * us}
	i := 0
	var sc stallCount
	sc.spin(func() time.Duration { r := reads[i]; i++; return r }, 0, 130*us)
	if sc.lost != 120*us {
		t.Errorf("lost %v, want 120µs (the 20µs and 100µs gaps)", sc.lost)
	}
	if s := summarizeStalls([]stallCount{sc}); math.Abs(s.Lost-120.0/130) > 1e-9 {
		t.Errorf("Lost = %v, want %v", s.Lost, 120.0/130)
	}
}

// TestTableVerdict: a busy run's table and JSON carry the verdict, the
// columns n/a in every row are left out (here the cycles counter), and
// each impl of the rows is defined under the table.
func TestTableVerdict(t *testing.T) {
	rep := synthetic(60e6, 20e6)
	rep.StallsEnd = Stalls{Threads: 2, Seconds: 0.3, Lost: 0.5, Over1ms: 120}
	rep.Busy, rep.Verdict = verdict(rep.Stalls, rep.StallsEnd)
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{"verdict: " + verdictBusy, "Machine busy: ratios unreliable; rerun on a quiet machine\n",
		"cpu-ns/msg", "  core xorack: xorack's acker shard", "  core gomap: ", "  core storm: ", "  pipeline xorack: acker.Acker"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "cyc/msg") || strings.Contains(s, "no description") {
		t.Errorf("table has the all-n/a cyc/msg column or an undefined impl:\n%s", s)
	}
	buf.Reset()
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil || !back.Busy || !strings.HasPrefix(back.Verdict, verdictBusy) || back.StallsEnd.Lost != 0.5 {
		t.Errorf("JSON: busy %v verdict %q stalls_end %+v, %v", back.Busy, back.Verdict, back.StallsEnd, err)
	}
	quiet := synthetic(60e6, 20e6)
	quiet.Busy, quiet.Verdict = verdict(quiet.Stalls, quiet.Stalls)
	buf.Reset()
	if err := WriteTable(&buf, quiet); err != nil || strings.Contains(buf.String(), "Machine busy") || !strings.Contains(buf.String(), "verdict: "+verdictQuiet) {
		t.Errorf("a quiet run's table: %v\n%s", err, buf.String())
	}
}

// TestImplDocs: every implementation a level can run is defined.
func TestImplDocs(t *testing.T) {
	for _, l := range []Level{LevelCore, LevelPipeline, LevelNet, LevelTopology, LevelSource, LevelFaults} {
		for _, name := range implNames(l) {
			if implDocs[l][name] == "" {
				t.Errorf("%s %s has no line in implDocs", l, name)
			}
		}
	}
}

package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
)

// TestMeta checks the per-position facts against the stream itself: each
// tree's messages in causal order (j counts up from the INIT), the head
// flag exactly on the rounds at or past the slot's phase.
func TestMeta(t *testing.T) {
	for _, sh := range []workload.Shape{workload.WordCount, workload.Chain(3), workload.Diamonds(2)} {
		st := newStream(workload.Build(sh, 300, 3))
		k := st.K
		for i, m := range st.Cycle {
			md := st.cmeta[i]
			if st.Roots[md.slot] != m.Root {
				t.Fatalf("%s: cycle %d: slot %d has root %#x, message %#x", sh.Name, i, md.slot, st.Roots[md.slot], m.Root)
			}
			if (md.j == 0) != (m.Kind == ackcore.Init) {
				t.Fatalf("%s: cycle %d: j %d for a %v", sh.Name, i, md.j, m.Kind)
			}
			r := i / st.Slots
			if md.head != (r >= int(md.slot)%k) {
				t.Fatalf("%s: cycle %d: head %v in round %d, phase %d", sh.Name, i, md.head, r, int(md.slot)%k)
			}
		}
		for i, m := range st.Prefix {
			if (st.pmeta[i].j == 0) != (m.Kind == ackcore.Init) || !st.pmeta[i].head {
				t.Fatalf("%s: prefix %d: meta %+v for a %v", sh.Name, i, st.pmeta[i], m.Kind)
			}
		}
	}
}

// TestDrain stops each share of a stream at a round boundary after the
// prefix and some of the cycle, drains it into a shard, and expects every
// root emitted to complete and nothing to stay pending, with and without
// faults, for one and for several producers.
func TestDrain(t *testing.T) {
	shapes := []workload.Shape{workload.WordCount, workload.Tree8x8, workload.Chain(4), workload.Diamonds(3)}
	for _, sh := range shapes {
		st := newStream(workload.Build(sh, 400, 5))
		for _, n := range []int{1, 3} {
			for _, extra := range []int{0, 1, len(st.Cycle) / 3, 2*len(st.Cycle) + 17} {
				for _, rates := range [][2]float64{{0, 0}, {0.1, 0.1}} {
					name := fmt.Sprintf("%s/producers=%d/extra=%d/fail=%v", sh.Name, n, extra, rates[0])
					t.Run(name, func(t *testing.T) { drainOne(t, st, n, extra, rates[0], rates[1]) })
				}
			}
		}
	}
}

func drainOne(t *testing.T, st *stream, n, extra int, fail, drop float64) {
	const timeout = 50 * time.Millisecond
	for p, sh := range st.shares(n) {
		clk := &streamClock{}
		s, err := ackcore.NewShard(ackcore.Config{MaxPending: 4 * st.Slots, Timeout: timeout, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		var fg *faultGen
		if fail+drop > 0 {
			fg = newFaultGen(st.K, fail, drop, 9)
		}
		cur := newCursor(sh, fg, 64)
		var got tally
		var out []ackcore.Outcome
		apply := func(m []ackcore.Msg, _ []meta) {
			out = s.Apply(m, out[:0])
			clk.advance(len(m))
			got.add(out)
		}
		cur.prefix(64, apply)
		for done := 0; done < extra; {
			m, md := cur.next(min(64, extra-done), false)
			apply(m, md)
			done += len(m)
		}
		for !cur.atRound() {
			apply(cur.next(64, true))
		}
		exp := expectation{roots: cur.roots()}
		cur.drain(64, apply)
		exp.injFail, exp.injDrop = cur.injFail, cur.injDrop
		clk.Skip(4 * timeout)
		for more := true; more; {
			out, more = s.Expire(make([]ackcore.Outcome, 0, 256))
			got.add(out)
		}
		stats := s.Stats()
		if err := verify(check{exp: exp, got: got, pendingLeft: stats.Pending, checkPending: true, stats: &stats}); err != nil {
			t.Fatalf("share %d: %v", p, err)
		}
		if exp.roots < uint64(len(sh.prefix)/st.K) {
			t.Fatalf("share %d: only %d roots", p, exp.roots)
		}
		if fail > 0 && (exp.injFail == 0 || exp.injDrop == 0) && exp.roots > 200 {
			t.Fatalf("share %d: %d roots but injected %d fails, %d drops", p, exp.roots, exp.injFail, exp.injDrop)
		}
	}
}

// TestFaultRates checks that the fault generator fails and drops about
// the fraction of trees asked, and never touches an INIT. The slots'
// fates are drawn once, so the fractions are those of 20,000 draws: 6
// standard deviations within the bounds.
func TestFaultRates(t *testing.T) {
	st := newStream(workload.Build(workload.WordCount, 20000, 11))
	cur := newCursor(st.shares(1)[0], newFaultGen(st.K, 0.05, 0.10, 4), 4096)
	fails, inits := 0, 0
	for i := 0; i < 2*len(st.Cycle); {
		m, md := cur.next(4096, false)
		i += 4096
		for j := range m {
			switch {
			case md[j].j == 0 && m[j].Kind != ackcore.Init:
				t.Fatalf("INIT rewritten: %+v", m[j])
			case m[j].Kind == ackcore.Fail:
				fails++
			case m[j].Kind == ackcore.Init:
				inits++
			}
		}
	}
	roots := float64(inits)
	if f := float64(cur.injFail) / roots; f < 0.04 || f > 0.06 {
		t.Errorf("fail fraction %.3f, want 0.05", f)
	}
	if d := float64(cur.injDrop) / roots; d < 0.085 || d > 0.115 {
		t.Errorf("drop fraction %.3f, want 0.10", d)
	}
	if fails == 0 {
		t.Error("no FAIL emitted")
	}
}

// TestFaultBlock checks the fault mode's block path (a copy with the
// faulted positions rewritten) and the pipeline producer's path (sendNext:
// the share's memory, the faulted messages rewritten on their way, into a
// recording Sender) against the message-by-message rewrite, over several
// cycles of each of 3 shares, and that every tree left alone keeps its
// slot's root while faulted ones do not.
func TestFaultBlock(t *testing.T) {
	st := newStream(workload.Build(workload.WordCount, 500, 3))
	roots := make(map[uint64]bool, len(st.Roots))
	for _, r := range st.Roots {
		roots[r] = true
	}
	for p, sh := range st.shares(3) {
		fast := newCursor(sh, newFaultGen(st.K, 0.05, 0.05, 9), 100)
		slow := newCursor(sh, newFaultGen(st.K, 0.05, 0.05, 9), 100)
		spans := newCursor(sh, newFaultGen(st.K, 0.05, 0.05, 9), 100)
		rec := &recorder{}
		pr := &producer{cur: spans, s: sender{Sender: rec}, clk: &streamClock{}}
		salted, fresh := 0, map[uint64]bool{}
		for i := 0; i < 4*len(sh.cycle); {
			cyc, from := slow.cyc, slow.pos
			m, md := fast.next(97, false)
			end := from + 97
			if end >= len(sh.cycle) {
				end = len(sh.cycle)
				slow.pos, slow.cyc = 0, slow.cyc+1
			} else {
				slow.pos = end
			}
			want, wmd := slow.rewrite(sh.cycle[from:end], sh.cmeta[from:end], cyc, -1)
			if !slices.Equal(m, want) || !slices.Equal(md, wmd) {
				t.Fatalf("share %d cycle %d at %d: block and rewrite differ", p, cyc, from)
			}
			rec.msgs = rec.msgs[:0]
			if n, err := pr.sendNext(97); err != nil || n != len(want) {
				t.Fatalf("share %d cycle %d at %d: sendNext sent %d (%v), want %d", p, cyc, from, n, err, len(want))
			}
			for j := range want {
				if want[j].Kind == ackcore.Init {
					want[j].Task = pr.task // the producer names its spout task
				}
			}
			if !slices.Equal(rec.msgs, want) {
				t.Fatalf("share %d cycle %d at %d: sendNext and rewrite differ", p, cyc, from)
			}
			for j := range m {
				if !roots[m[j].Root] {
					salted++
					// A faulted slot fails in every generation, each
					// under a root id of its own.
					if m[j].Kind == ackcore.Init && fresh[m[j].Root] {
						t.Fatalf("share %d cycle %d: faulted root %#x started twice", p, cyc, m[j].Root)
					}
					if m[j].Kind == ackcore.Init {
						fresh[m[j].Root] = true
					}
				}
			}
			i += end - from
		}
		if fast.injFail != slow.injFail || fast.injDrop != slow.injDrop || fast.injFail == 0 || fast.injDrop == 0 {
			t.Fatalf("share %d: injected %d/%d fails, %d/%d drops", p, fast.injFail, slow.injFail, fast.injDrop, slow.injDrop)
		}
		if spans.injFail != slow.injFail || spans.injDrop != slow.injDrop {
			t.Fatalf("share %d: spans injected %d/%d fails, %d/%d drops", p, spans.injFail, slow.injFail, spans.injDrop, slow.injDrop)
		}
		if salted == 0 {
			t.Fatalf("share %d: no faulted tree's root rewritten", p)
		}
	}
}

// recorder is an acker.Sender that keeps what it is sent.
type recorder struct{ msgs []ackcore.Msg }

func (r *recorder) Send(m ackcore.Msg) error            { r.msgs = append(r.msgs, m); return nil }
func (r *recorder) SendBatch(ms []ackcore.Msg) error    { r.msgs = append(r.msgs, ms...); return nil }
func (r *recorder) TrySend(m ackcore.Msg) (bool, error) { return true, r.Send(m) }
func (r *recorder) Flush() error                        { return nil }

// discard is an acker.Sender that keeps nothing.
type discard struct{}

func (discard) Send(ackcore.Msg) error            { return nil }
func (discard) SendBatch([]ackcore.Msg) error     { return nil }
func (discard) TrySend(ackcore.Msg) (bool, error) { return true, nil }
func (discard) Flush() error                      { return nil }

// BenchmarkCursor is what a producer spends per message replaying a
// window of 10,000 word-count trees in batches of 256, without faults
// and in fault mode (fails after fan-out; fail=1e-09 is fault mode with
// next to no faulted tree: the machinery's own cost): path=send is the
// pipeline producer's sendNext (the share's memory, faulted messages
// rewritten one by one on their way) into a Sender that discards them,
// path=block the core runner's and the batched producer's rewritten
// copy; ns/op is per message.
func BenchmarkCursor(b *testing.B) {
	st := newStream(workload.Build(workload.WordCount, 10000, 1))
	for _, path := range []string{"send", "block"} {
		for _, fail := range []float64{0, 1e-9, 0.05} {
			b.Run(fmt.Sprintf("path=%s/fail=%g", path, fail), func(b *testing.B) {
				sh := st.shares(1)[0]
				var fg *faultGen
				if fail > 0 {
					fg = newFaultGen(st.K, fail, 0, 1)
				}
				cur := newCursor(sh, fg, 256)
				pr := &producer{cur: cur, s: sender{Sender: discard{}}, clk: &streamClock{}}
				var sum uint64
				b.ResetTimer()
				for n := 0; n < b.N; {
					if path == "block" {
						m, _ := cur.next(256, false)
						for i := range m {
							sum += m[i].Root
						}
						n += len(m)
						continue
					}
					k, err := pr.sendNext(256)
					if err != nil {
						b.Fatal(err)
					}
					n += k
				}
				if sum == 1 {
					b.Log(sum)
				}
			})
		}
	}
}

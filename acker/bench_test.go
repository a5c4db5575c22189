package acker_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"go.uber.org/goleak"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/pipeline"
	"github.com/xorack/xorack/bench/workload"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/ring"
)

// Pipeline benchmarks: producer goroutines replay one word-count stream
// with P = 100,000 roots pending in total through a pipeline of package
// bench/pipeline (the same implementations ackbench's pipeline level
// measures):
//
//   - impl=xorack: the acker, S pinned executors fed by SPSC rings,
//     outcomes drained by one goroutine per spout task, or (spouts=poll) by
//     the producers themselves between batches from one receiver each, as
//     a spout executor that takes the acks of all its tasks between emits
//     does (here a producer's receiver holds the tasks t mod producers,
//     not the roots it sent: roots go to producers by hash; and with
//     -acker.pace=sleep producers do not poll while they sleep): on 2
//     vCPUs, 16 spout goroutines contend with the producers and executors
//     for the two processors, and a goroutine queued behind a busy
//     executor waits milliseconds;
//   - impl=chanshard: one Shard applied by one goroutine that receives
//     blocks of messages on a buffered Go channel and answers through a
//     channel per receiver;
//   - impl=mutexmap: baseline.MutexMap, which every producer applies its
//     batches to itself, under its lock.
//
// The baselines' outcomes are always polled by the producers (one inbox
// per producer, tasks t mod producers), as in spouts=poll.
//
// The stream is split among the producers by root, so each root's messages
// pass through one producer in stream order, and every producer replays its
// part in batches of pipeBatch messages (one SendBatch and Flush per
// batch). Every run ends by completing each tree still pending, stops the
// pipeline and checks that every root came back Completed exactly once.

const (
	// pipePending is the roots pending across the whole pipeline.
	pipePending = 100_000
	// pipeBatch is the messages a producer hands over at once: one
	// SendBatch and Flush (xorack: one ring span a shard; chanshard: four
	// channel sends; mutexmap: one Apply). The shard loop drains this
	// many per ring per pass, the batch BenchmarkShard applies.
	pipeBatch = 256
	// outcomeRing is xorack's shard -> receiver ring.
	outcomeRing = 4096
	// sampleEvery: one root in 64 has its completion timed, so stamping
	// costs one clock read about every 2.5 batches of 256 word-count
	// messages, and the stamps (P/64 of them, ~14 KiB) stay in cache.
	sampleEvery = 64
	// paceSleep: a paced producer further ahead of its schedule than this
	// sleeps, and yields the processor for the rest. On these VMs a
	// time.Sleep of 20 µs to 200 µs in an idle process takes 1 ms (p50)
	// to 2.6 ms (p99), so pacing by sleeps alone would send a
	// millisecond's batches in one burst and measure the burst's queue.
	paceSleep = 3 * time.Millisecond
	// watchdog bounds every wait on the pipeline: a stuck run fails.
	watchdog = 60 * time.Second
	// padBytes separates state written by different goroutines: two 64-byte
	// lines, since the adjacent-line prefetcher moves lines in pairs.
	padBytes = 128
)

// Knobs for investigating the pipeline; the defaults are what the
// benchmarks report.
var (
	paceFlag = flag.String("acker.pace", "yield",
		"how a paced producer waits for its next batch: yield (sleep while over paceSleep ahead, then runtime.Gosched until due) or sleep (time.Sleep when 20µs or more ahead)")
	idleFlag = flag.String("acker.idle", "",
		"impl=xorack's idle strategy as spins,yields (Config.Idle); empty: ring.DefaultIdle")
	pinFlag = flag.Bool("acker.pin", true, "impl=xorack pins its executors (Config.Pin)")
)

// xorackIdle parses -acker.idle.
func xorackIdle() (*ring.Idle, error) {
	if *idleFlag == "" {
		return nil, nil
	}
	var i ring.Idle
	if _, err := fmt.Sscanf(*idleFlag, "%d,%d", &i.Spins, &i.Yields); err != nil {
		return nil, fmt.Errorf("-acker.idle %q: want spins,yields: %w", *idleFlag, err)
	}
	return &i, nil
}

// pipeConfig names one pipeline under test.
type pipeConfig struct {
	impl      string // xorack, chanshard or mutexmap
	shards    int
	producers int
	// poll (impl=xorack): the producers poll the outcome rings
	// themselves, after each batch and while they wait, as a spout
	// executor that both emits and takes its acks does: one receiver per
	// producer (Config.Receivers), producer p's for the tasks t
	// with t mod producers == p. Otherwise one goroutine per spout task
	// waits on its own receiver.
	poll bool
}

func (c pipeConfig) String() string {
	s := fmt.Sprintf("impl=%s/shards=%d/producers=%d", c.impl, c.shards, c.producers)
	if c.poll {
		s += "/spouts=poll"
	}
	return s
}

// ackerConfigs lists the throughput benchmarks: for each producer count,
// xorack with 1..4 shards, then the two baselines with the same producers,
// so that the runs compared are interleaved.
func ackerConfigs() []pipeConfig {
	counts := []int{1, 2, 3, 4}
	if testing.Short() {
		counts = []int{1, 2, 4}
	}
	var cs []pipeConfig
	for _, n := range counts {
		for _, s := range counts {
			cs = append(cs, pipeConfig{impl: "xorack", shards: s, producers: n})
		}
		cs = append(cs, pipeConfig{impl: "xorack", shards: 1, producers: n, poll: true},
			pipeConfig{impl: "chanshard", shards: 1, producers: n}, pipeConfig{impl: "mutexmap", shards: 1, producers: n})
	}
	return cs
}

// latencyConfigs lists the latency benchmarks: xorack with one and two
// shards beside the baselines, with one and two producers.
func latencyConfigs() []pipeConfig {
	counts := []int{1, 2}
	if testing.Short() {
		counts = counts[1:]
	}
	var cs []pipeConfig
	for _, n := range counts {
		cs = append(cs, pipeConfig{impl: "xorack", shards: 1, producers: n}, pipeConfig{impl: "xorack", shards: 2, producers: n},
			pipeConfig{impl: "xorack", shards: 1, producers: n, poll: true},
			pipeConfig{impl: "chanshard", shards: 1, producers: n}, pipeConfig{impl: "mutexmap", shards: 1, producers: n})
	}
	return cs
}

// pipeStream is the stream every pipeline replays, built once per process.
var pipeStream = sync.OnceValue(func() *workload.Stream { return workload.Build(workload.WordCount, pipePending, 1) })

// BenchmarkAcker measures pipeline throughput: ns/op is per message,
// msgs/s the messages applied per second, trees/s the roots completed per
// second (Completed outcomes received by the spouts). The measured phase
// ends when every tree completed by the messages sent has come back.
func BenchmarkAcker(b *testing.B) {
	st := pipeStream()
	for _, c := range ackerConfigs() {
		b.Run(c.String(), func(b *testing.B) {
			res := benchPipe(b, c, splitStream(st, c.producers), 0, false)
			secs := res.elapsed.Seconds()
			b.ReportMetric(float64(b.N)/secs, "msgs/s")
			b.ReportMetric(float64(res.trees)/secs, "trees/s")
			if b.N >= minPeakMsgs {
				peaks.Store(c.String(), float64(b.N)/secs)
			}
		})
	}
}

// BenchmarkAckerLatency measures completion latency at half of the peak
// rate measured for the same pipeline in this process (BenchmarkAcker's
// last run, or a calibration run when BenchmarkAcker did not run): the
// time from the Flush (channel send, Apply) of the batch holding a root's
// last ACK to its Completed outcome reaching the spout, for one root in
// sampleEvery.
func BenchmarkAckerLatency(b *testing.B) {
	st := pipeStream()
	for _, c := range latencyConfigs() {
		b.Run(c.String(), func(b *testing.B) {
			sp := splitStream(st, c.producers)
			peak, err := peakRate(c, sp)
			if err != nil {
				b.Fatal(err)
			}
			res := benchPipe(b, c, sp, peak/2, true)
			h := res.hist
			rate := float64(b.N) / res.elapsed.Seconds()
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(rate/peak, "load")
			b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-ns")
			b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-ns")
			b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "p99.9-ns")
		})
	}
}

// TestPipeModes runs every pipeline of the benchmarks briefly, unpaced and
// paced with latency stamps: runPipe checks that every root came back
// Completed once and the counters agree, so a consumer mode that loses,
// duplicates or strands an outcome (or hangs past the watchdog) fails.
func TestPipeModes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 100,000-root benchmark stream")
	}
	st := pipeStream()
	for _, c := range []pipeConfig{
		{impl: "xorack", shards: 1, producers: 1}, {impl: "xorack", shards: 2, producers: 2},
		{impl: "xorack", shards: 1, producers: 1, poll: true}, {impl: "xorack", shards: 2, producers: 3, poll: true},
		{impl: "chanshard", shards: 1, producers: 2}, {impl: "mutexmap", shards: 1, producers: 2},
	} {
		sp := splitStream(st, c.producers)
		for _, run := range []pipeRun{{n: 50_000}, {n: 50_000, rate: 20e6, lat: true}} {
			res, err := runPipe(c, sp, run)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			if res.trees <= 0 || run.lat && res.hist.TotalCount() == 0 {
				t.Errorf("%v %+v: %d trees, %d latencies", c, run, res.trees, res.hist.TotalCount())
			}
		}
	}
}

// minPeakMsgs is the least run whose rate is kept as a pipeline's peak.
const minPeakMsgs = 1_000_000

var (
	peaks  sync.Map // pipeConfig.String() -> float64 msgs/s
	logged sync.Map // benchmark names whose executor CPUs were logged
)

// peakRate is c's unpaced rate: BenchmarkAcker's, or a calibration run's.
func peakRate(c pipeConfig, sp *split) (float64, error) {
	if v, ok := peaks.Load(c.String()); ok {
		return v.(float64), nil
	}
	n := 4_000_000
	if testing.Short() {
		n = 300_000
	}
	res, err := runPipe(c, sp, pipeRun{n: n})
	if err != nil {
		return 0, fmt.Errorf("calibrating %v: %w", c, err)
	}
	rate := float64(n) / res.elapsed.Seconds()
	peaks.Store(c.String(), rate)
	return rate, nil
}

// benchPipe runs b.N messages through c (paced to rate msgs/s if rate > 0)
// with the benchmark timer around the measured phase only, and checks for
// leaked goroutines.
func benchPipe(b *testing.B, c pipeConfig, sp *split, rate float64, lat bool) pipeResult {
	leaks := goleak.IgnoreCurrent()
	b.ReportAllocs()
	res, err := runPipe(c, sp, pipeRun{n: b.N, rate: rate, lat: lat, b: b})
	if err != nil {
		b.Fatal(err)
	}
	goleak.VerifyNone(b, leaks)
	if res.cpus != nil {
		if _, seen := logged.LoadOrStore(b.Name(), true); !seen {
			b.Logf("executors ran on CPUs %v; %s", res.cpus, res.note)
		}
	}
	return res
}

// A split is a stream divided among producers by root.
type split struct {
	subs     []subStream
	sampleID map[uint64]int32 // timed root -> its index in rig.stamps
}

// subStream is one producer's part of a stream: the prefix, replayed once,
// then the cycle, replayed from position 0 on.
type subStream struct {
	prefix     []ackcore.Msg
	prefixDone int64 // trees the prefix completes
	cycle      []ackcore.Msg
	slot       []int32 // slot[i]: the stream slot (tree) cycle[i] belongs to
	last       []bool  // last[i]: cycle[i] is the last ACK of its tree
	marks      []mark  // the last ACKs of timed roots, by position
}

// mark is the last ACK of a timed root: its position in the cycle and the
// root's stamp.
type mark struct{ pos, id int32 }

// producerOf picks a root's producer from the high half of its mix, and
// timedRoot whether it is timed from the low bits: independently of each
// other and of the shard the acker picks.
func producerOf(root uint64, producers int) int {
	return int((splitmix.Mix64(root) >> 32) % uint64(producers))
}

func timedRoot(root uint64) bool { return splitmix.Mix64(root)%sampleEvery == 0 }

type splitKey struct {
	st *workload.Stream
	n  int
}

var splits sync.Map // splitKey -> *split

// splitStream divides st among n producers, once per process.
func splitStream(st *workload.Stream, n int) *split {
	key := splitKey{st, n}
	if sp, ok := splits.Load(key); ok {
		return sp.(*split)
	}
	slotOf := make(map[uint64]int32, len(st.Roots))
	sp := &split{subs: make([]subStream, n), sampleID: map[uint64]int32{}}
	for i, r := range st.Roots {
		slotOf[r] = int32(i)
		if timedRoot(r) {
			sp.sampleID[r] = int32(len(sp.sampleID))
		}
	}
	// A slot's trees are k messages each, back to back from its first
	// prefix message on, so its running message count says which one is
	// the last of a tree.
	k := st.K
	count := make([]int, len(st.Roots))
	for _, m := range st.Prefix {
		s := slotOf[m.Root]
		sub := &sp.subs[producerOf(m.Root, n)]
		sub.prefix = append(sub.prefix, m)
		if count[s]%k == k-1 {
			sub.prefixDone++
		}
		count[s]++
	}
	for _, m := range st.Cycle {
		s := slotOf[m.Root]
		sub := &sp.subs[producerOf(m.Root, n)]
		last := count[s]%k == k-1
		if id, ok := sp.sampleID[m.Root]; ok && last {
			sub.marks = append(sub.marks, mark{pos: int32(len(sub.cycle)), id: id})
		}
		sub.cycle = append(sub.cycle, m)
		sub.slot = append(sub.slot, s)
		sub.last = append(sub.last, last)
		count[s]++
	}
	splits.Store(key, sp)
	return sp
}

// window counts the trees that n messages of the cycle from pos complete.
func (s *subStream) window(pos, n int) (trees int64) {
	for ; n > 0; n-- {
		if s.last[pos] {
			trees++
		}
		if pos++; pos == len(s.cycle) {
			pos = 0
		}
	}
	return trees
}

// tail is what completes every tree pending after the cycle up to pos:
// each slot's messages from pos on until its next INIT, which would start
// a new tree. One cycle covers every slot's INIT. seen is scratch, one
// entry per stream slot, false on entry and left dirty.
func (s *subStream) tail(pos int, seen []bool) (msgs []ackcore.Msg, trees int64) {
	for i := range len(s.cycle) {
		p := (pos + i) % len(s.cycle)
		sl := s.slot[p]
		if seen[sl] {
			continue
		}
		if s.cycle[p].Kind == ackcore.Init {
			seen[sl] = true
			continue
		}
		msgs = append(msgs, s.cycle[p])
		if s.last[p] {
			trees++
		}
	}
	return msgs, trees
}

// pipeRun is one run of a pipeline.
type pipeRun struct {
	n    int        // messages replayed in the measured phase
	rate float64    // > 0: producers pace themselves to rate msgs/s in all
	lat  bool       // time the completion of timed roots
	b    *testing.B // non-nil: its timer brackets the measured phase
}

type pipeResult struct {
	elapsed time.Duration // the measured phase
	trees   int64         // roots completed in it
	hist    *hdrhistogram.Histogram
	cpus    []int  // xorack: the CPU each executor ran on
	note    string // xorack: the executor placement
}

// runPipe builds the pipeline, replays the prefix, measures run.n
// messages, completes every tree still pending, stops the acker and checks
// its outcomes and counters.
func runPipe(c pipeConfig, sp *split, run pipeRun) (res pipeResult, err error) {
	st := pipeStream()
	r, err := newRig(c, sp, run.lat)
	if err != nil {
		return res, err
	}
	n := c.producers

	// Warm up: the prefix brings every slot to its steady state.
	phases := make([]phase, n)
	var trees int64
	for p := range phases {
		phases[p] = phase{list: sp.subs[p].prefix}
		trees += sp.subs[p].prefixDone
	}
	if err := r.runPhase(phases, trees); err != nil {
		return res, fmt.Errorf("%v: prefix: %w", c, err)
	}

	// Measure: producer p replays its share of run.n messages of its cycle.
	trees = 0
	ends := make([]int, n)
	for p := range phases {
		sub := &sp.subs[p]
		cnt := run.n / n
		if p < run.n%n {
			cnt++
		}
		phases[p] = phase{n: cnt, stamp: run.lat}
		if run.rate > 0 {
			phases[p].every = time.Duration(float64(pipeBatch*n) / run.rate * 1e9)
		}
		trees += sub.window(0, cnt)
		ends[p] = cnt % len(sub.cycle)
	}
	// Collect the setup's garbage now, so that no GC cycle started by it
	// runs on into the measured phase (which allocates nothing).
	runtime.GC()
	done := r.arm(trees)
	r.recording.Store(run.lat)
	if run.b != nil {
		run.b.ResetTimer()
	}
	t0 := time.Now()
	for p := range phases {
		phases[p].start = t0
	}
	r.launch(phases, done)
	err = r.await(done)
	res.elapsed = time.Since(t0)
	if run.b != nil {
		run.b.StopTimer()
	}
	r.recording.Store(false)
	if err != nil {
		return res, fmt.Errorf("%v: measured phase: %w", c, err)
	}
	res.trees = trees

	// Complete every pending tree, so that nothing is left for Stop.
	seen := make([]bool, len(st.Roots))
	trees = 0
	for p := range phases {
		msgs, t := sp.subs[p].tail(ends[p], seen)
		phases[p] = phase{list: msgs}
		trees += t
	}
	if err := r.runPhase(phases, trees); err != nil {
		return res, fmt.Errorf("%v: tail: %w", c, err)
	}
	res.cpus, res.note = r.pipe.Placement()
	if err := r.finish(); err != nil {
		return res, fmt.Errorf("%v: %w", c, err)
	}
	res.hist = hdrhistogram.New(1, int64(watchdog), 3)
	for _, o := range r.obs {
		if o.hist != nil {
			res.hist.Merge(o.hist)
		}
	}
	return res, nil
}

// phase is what one producer replays in one phase of a run.
type phase struct {
	list  []ackcore.Msg // replay once (prefix, tail); nil: n messages of the cycle
	n     int
	every time.Duration // > 0: the k-th batch is due at start + k*every
	start time.Time
	stamp bool            // stamp the flush time of timed roots' last ACKs
	done  <-chan struct{} // closed when the phase's outcomes are all in
}

// rig runs a pipeline: the pipe, its producer goroutines, and the
// observers that count outcomes and time completions.
type rig struct {
	c       pipeConfig
	sp      *split
	pipe    pipeline.Pipe
	senders []acker.Sender
	obs     []*observer
	// polled: producer p polls inbox p (obs[p] its observer, bufs[p] its
	// scratch); otherwise one goroutine per spout task waits on its inbox.
	polled bool
	bufs   [][]ackcore.Outcome
	spouts sync.WaitGroup

	tally     tally
	base      time.Time      // stamps are ns since base, plus one
	stamps    []atomic.Int64 // by sample id: flush time of the root's last ACK, 0 if none
	recording atomic.Bool    // observers record latencies

	cmds  []chan phase   // one per producer goroutine
	errs  []error        // errs[p]: producer p's error in the last phase
	wg    sync.WaitGroup // producers busy with the current phase
	quit  sync.WaitGroup // producer goroutines
	timer *time.Timer    // the watchdog

	expect int64        // trees completed by all phases so far
	sent   atomic.Int64 // messages sent by all phases so far
}

func newRig(c pipeConfig, sp *split, lat bool) (*rig, error) {
	r := &rig{c: c, sp: sp, base: time.Now(), timer: time.NewTimer(watchdog)}
	r.timer.Stop()
	r.tally.target.Store(math.MaxInt64)
	if lat {
		r.stamps = make([]atomic.Int64, len(sp.sampleID))
	}
	if err := r.build(lat); err != nil {
		return nil, err
	}
	r.cmds = make([]chan phase, c.producers)
	r.errs = make([]error, c.producers)
	for p := range r.cmds {
		r.cmds[p] = make(chan phase, 1)
		r.quit.Add(1)
		go r.producer(p)
	}
	return r, nil
}

// shardPending is each shard's MaxPending: its share of the stream's peak
// with 5% and 1024 roots to spare. A root's shard is a hash of it, so a
// shard's share of the pending roots is binomial: at P/S = 25,000 the 5%
// are about nine standard deviations.
func shardPending(st *workload.Stream, shards int) int {
	per := st.MaxPending() / shards
	return per + per/20 + 1024
}

func (r *rig) newObserver(lat bool) *observer {
	o := &observer{r: r}
	if lat {
		o.hist = hdrhistogram.New(1, int64(watchdog), 3)
	}
	r.obs = append(r.obs, o)
	return o
}

// runPhase runs an unmeasured phase to the end.
func (r *rig) runPhase(phases []phase, trees int64) error {
	done := r.arm(trees)
	r.launch(phases, done)
	return r.await(done)
}

// arm sets the outcomes to wait for at the end of the next phase, which
// completes trees more trees, and starts the watchdog.
func (r *rig) arm(trees int64) <-chan struct{} {
	r.expect += trees
	r.timer.Reset(watchdog)
	return r.tally.arm(r.expect)
}

// launch starts the producers on phases; done is the phase's, from arm.
func (r *rig) launch(phases []phase, done <-chan struct{}) {
	r.wg.Add(len(phases))
	for p, ph := range phases {
		ph.done = done
		r.cmds[p] <- ph
	}
}

// await waits for the armed outcomes and the producers' end of the phase.
func (r *rig) await(done <-chan struct{}) error {
	select {
	case <-done:
	case <-r.timer.C:
		r.tally.abort() // releases producers polling in settle
		return fmt.Errorf("stuck: %d outcomes of %d after %v", r.tally.n.Load(), r.expect, watchdog)
	}
	r.timer.Stop()
	r.wg.Wait()
	return errors.Join(r.errs...)
}

func (r *rig) producer(p int) {
	defer r.quit.Done()
	for ph := range r.cmds[p] {
		r.errs[p] = r.play(p, ph)
		if r.errs[p] != nil {
			r.tally.abort()
		}
		r.wg.Done()
	}
}

// play replays one phase for producer p in batches of pipeBatch.
func (r *rig) play(p int, ph phase) error {
	if ph.list != nil {
		for i := 0; i < len(ph.list); i += pipeBatch {
			batch := ph.list[i:min(i+pipeBatch, len(ph.list))]
			if err := r.senders[p].SendBatch(batch); err != nil {
				return err
			}
			if err := r.senders[p].Flush(); err != nil {
				return err
			}
			r.poll(p)
		}
		r.sent.Add(int64(len(ph.list)))
		r.settle(p, ph)
		return nil
	}
	sub := &r.sp.subs[p]
	pos, left := 0, ph.n
	mk := 0
	for k := 0; left > 0; k++ {
		if ph.every > 0 {
			r.pace(p, ph.start.Add(time.Duration(k)*ph.every))
		}
		end := min(pos+pipeBatch, len(sub.cycle), pos+left)
		if err := r.senders[p].SendBatch(sub.cycle[pos:end]); err != nil {
			return err
		}
		if ph.stamp {
			now := int64(-1)
			for ; mk < len(sub.marks) && int(sub.marks[mk].pos) < end; mk++ {
				if now < 0 {
					now = int64(time.Since(r.base)) + 1
				}
				r.stamps[sub.marks[mk].id].Store(now)
			}
		}
		if err := r.senders[p].Flush(); err != nil {
			return err
		}
		r.poll(p)
		left -= end - pos
		if pos = end; pos == len(sub.cycle) {
			pos, mk = 0, 0
		}
	}
	r.sent.Add(int64(ph.n))
	r.settle(p, ph)
	return nil
}

// settle keeps producer p polling its spouts, when it is their poller,
// until every outcome of the phase is in.
func (r *rig) settle(p int, ph phase) {
	if !r.polled {
		return
	}
	for {
		select {
		case <-ph.done:
			return
		default:
		}
		r.idle(p)
	}
}

// idle is one wait step of producer p: poll its spouts (when it is their
// poller), and yield the processor when that found nothing.
func (r *rig) idle(p int) {
	if r.poll(p) == 0 {
		runtime.Gosched()
	}
}

// pace returns at due (not before): it sleeps while far ahead, then
// yields the processor to any runnable goroutine until due (a producer
// that polls its spouts polls them instead, and yields when they had
// nothing). Yielding spins the producer's CPU when nothing else wants it,
// as a busy producer would. With -acker.pace=sleep it only sleeps, and
// sends a millisecond's batches at once after each oversleep.
func (r *rig) pace(p int, due time.Time) {
	if *paceFlag == "sleep" {
		if lead := time.Until(due); lead >= 20*time.Microsecond {
			time.Sleep(lead)
		}
		return
	}
	for {
		lead := time.Until(due)
		switch {
		case lead <= 0:
			return
		case lead > paceSleep:
			time.Sleep(lead - paceSleep)
		default:
			r.idle(p)
		}
	}
}

// lap records the completion latency of timed root.
func (r *rig) lap(h *hdrhistogram.Histogram, root uint64) {
	id, ok := r.sp.sampleID[root]
	if !ok {
		return
	}
	t0 := r.stamps[id].Swap(0)
	if t0 == 0 || !r.recording.Load() {
		return
	}
	h.RecordValue(int64(time.Since(r.base)) + 1 - t0)
}

// finish stops the engine and the producers and checks that every root
// came back Completed, once.
func (r *rig) finish() error {
	st := r.pipe.Stop()
	r.spouts.Wait()
	for _, ch := range r.cmds {
		close(ch)
	}
	r.quit.Wait()
	var completed, bad int64
	var first ackcore.Outcome
	for _, o := range r.obs {
		completed += o.completed
		if o.bad > 0 && bad == 0 {
			first = o.firstBad
		}
		bad += o.bad
	}
	switch want := uint64(r.expect); {
	case bad > 0:
		return fmt.Errorf("%d outcomes not Completed, first %+v; stats %+v", bad, first, st)
	case completed != r.expect:
		return fmt.Errorf("%d Completed outcomes observed, want %d; stats %+v", completed, r.expect, st)
	case st.Completed != want || st.Inits != want:
		return fmt.Errorf("stats %+v, want %d INITs and Completed", st, want)
	case st.Inits+st.Acks != uint64(r.sent.Load()):
		return fmt.Errorf("stats %+v count %d messages, %d sent", st, st.Inits+st.Acks, r.sent.Load())
	case st.Failed() != 0 || st.RefusedFull != 0 || st.RefusedInvalid != 0 || st.Orphans != 0 || st.Pending != 0:
		return fmt.Errorf("stats %+v: failed, refused or left pending", st)
	}
	return nil
}

// tally counts outcomes across observers and signals when a target is
// reached. Observers add per batch of outcomes, not per outcome.
type tally struct {
	n      atomic.Int64
	target atomic.Int64 // MaxInt64 while none is armed
	mu     sync.Mutex   // guards done
	done   chan struct{}
}

func (t *tally) add(d int64) {
	if d != 0 && t.n.Add(d) >= t.target.Load() {
		t.fire(false)
	}
}

// arm returns a channel closed once target outcomes have been counted.
func (t *tally) arm(target int64) <-chan struct{} {
	t.mu.Lock()
	ch := make(chan struct{})
	t.done = ch
	t.target.Store(target)
	t.mu.Unlock()
	t.fire(false) // the target may be reached already
	return ch
}

// abort ends the wait early: a producer failed.
func (t *tally) abort() { t.fire(true) }

func (t *tally) fire(force bool) {
	t.mu.Lock()
	if t.done != nil && (force || t.n.Load() >= t.target.Load()) {
		close(t.done)
		t.done = nil
		t.target.Store(math.MaxInt64)
	}
	t.mu.Unlock()
}

// observer counts the outcomes one goroutine receives and times the
// completions of timed roots.
type observer struct {
	r         *rig
	hist      *hdrhistogram.Histogram // nil: latency not measured
	completed int64
	bad       int64
	firstBad  ackcore.Outcome
	_         [padBytes]byte
}

func (o *observer) see(out []ackcore.Outcome) {
	var done int64
	for i := range out {
		oc := &out[i]
		if oc.Kind != ackcore.Completed {
			if o.bad == 0 {
				o.firstBad = *oc
			}
			o.bad++
			continue
		}
		done++
		if o.hist != nil && timedRoot(oc.Root) {
			o.r.lap(o.hist, oc.Root)
		}
	}
	o.completed += done
	o.r.tally.add(int64(len(out)))
}

// build makes c's pipeline, starts it, and with one goroutine per spout
// task, starts those.
func (r *rig) build(lat bool) error {
	c := r.c
	idle, err := xorackIdle()
	if err != nil {
		return err
	}
	cfg := pipeline.Config{Producers: c.producers, Tasks: workload.Tasks, Shards: c.shards,
		MaxPending: shardPending(pipeStream(), c.shards), Batch: pipeBatch, OutcomeRingSize: outcomeRing, Pin: *pinFlag, Idle: idle}
	r.polled = c.poll || c.impl != "xorack"
	if r.polled {
		cfg.Receivers = c.producers // task t -> inbox t mod producers
	}
	if r.pipe, err = pipeline.New(c.impl, cfg); err != nil {
		return err
	}
	if err := r.pipe.Start(); err != nil {
		return err
	}
	for p := range c.producers {
		r.senders = append(r.senders, r.pipe.Sender(p))
	}
	if r.polled {
		for range c.producers {
			r.newObserver(lat)
			r.bufs = append(r.bufs, make([]ackcore.Outcome, 0, c.shards*outcomeRing))
		}
		return nil
	}
	for t := range workload.Tasks {
		o := r.newObserver(lat)
		in := r.pipe.Inbox(t)
		r.spouts.Add(1)
		go func() {
			defer r.spouts.Done()
			// Wait takes up to a ring's worth from every shard at once.
			buf := make([]ackcore.Outcome, 0, c.shards*outcomeRing)
			for {
				var ok bool
				if buf, ok = in.Wait(buf[:0]); !ok {
					return
				}
				o.see(buf)
			}
		}()
	}
	return nil
}

// poll lets producer p take the outcomes of its inbox, when the producers
// poll, and returns how many it took.
func (r *rig) poll(p int) int {
	if !r.polled {
		return 0
	}
	buf := r.pipe.Inbox(p).Poll(r.bufs[p][:0])
	if len(buf) > 0 {
		r.obs[p].see(buf)
	}
	return len(buf)
}

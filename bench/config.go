package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
)

// Level is how much of the system a run puts between the workload and the
// acker.
type Level string

const (
	// LevelCore applies messages straight to one single-writer acker
	// (ackcore.Interface) on one pinned goroutine: no rings, no other threads.
	LevelCore Level = "core"
	// LevelPipeline runs producers -> SPSC rings -> sharded executors ->
	// outcome rings -> spouts (acker.Acker), beside the same shape
	// built on a mutex-guarded map and on a Go channel.
	LevelPipeline Level = "pipeline"
	// LevelTopology runs word count end to end on the reference engine
	// (package topology), with acking and with AtMostOnce (topology.go).
	LevelTopology Level = "topology"
	// LevelSource runs the topology level's word count fed by the Kafka
	// spout (package source/kafka) from an in-process Kafka cluster, with
	// acking and with AtMostOnce (source.go).
	LevelSource Level = "source"
	// LevelNet puts the acker behind loopback TCP connections, one per
	// producer: package netio's client and server, beside gRPC streams
	// carrying the same records (bench/net.go). Run on request only.
	LevelNet Level = "net"
)

// DefaultLevels is Config.Levels' default, in run order: core, then
// pipeline; the topology, source, net and faults (faults.go) levels run
// when asked for. A function, so that no caller can change the default
// another reads: each call returns a new slice.
func DefaultLevels() []Level { return []Level{LevelCore, LevelPipeline} }

// Defaults. Each explains itself in its comment; Quick swaps in the
// quick ones.
const (
	// DefaultDuration is the measured time per row, split over Reps
	// interleaved repetitions: 3 x 200 ms keeps the default run (6 core
	// impls and 3 pipeline impls at 3 windows) within about a minute on 2
	// cores while each repetition still spans hundreds of thousands of
	// batches.
	DefaultDuration = 600 * time.Millisecond
	// QuickDuration is -quick's: a few seconds for the whole run.
	QuickDuration = 150 * time.Millisecond
	// DefaultReps is the repetitions per row; a row reports their median.
	// Six is what benchstat needs for a confidence interval (-benchfmt),
	// and it costs nothing: a row's measured time (Duration) is split
	// over its reps, and the default run took 38.0 s with 6, 39.5 s with
	// 3 on the 2-vCPU machine.
	DefaultReps = 6
	// QuickReps is -quick's: three reps of its 50 ms keep each long
	// enough to measure.
	QuickReps = 3
	// DefaultBatch is the messages per Apply call at core level and per
	// producer span at pipeline level: what a shard loop drains from its
	// rings at once (ackcore's benchmarks use the same).
	DefaultBatch = 256
	// DefaultLatencyLoad is the fraction of the measured peak that the
	// pipeline's latency run offers: at the peak, queues fill and latency
	// measures queue length, not the acker.
	DefaultLatencyLoad = 0.5
	// DefaultSeed makes runs repeatable unless asked otherwise.
	DefaultSeed = 1
	// DefaultProducers and DefaultShards are the pipeline's: one producer
	// goroutine, one shard.
	DefaultProducers = 1
	DefaultShards    = 1

	// MaxRowPending caps a pending window, to catch a typo before it
	// allocates: the default run at P = 1M peaks at about 2 GiB resident
	// (the stream, 11 M messages and their meta, and every core acker
	// alive at once), so 20 M needs about 40 GiB.
	MaxRowPending = 20_000_000
	// maxProducers and maxShards bound the pipeline's goroutines; more
	// than a few per core only measures the Go scheduler.
	maxProducers = 64
	maxShards    = 64
	maxReps      = 100
	maxBatch     = 1 << 16
)

// DefaultPending and QuickPending are the pending windows P measured by
// default: in L2, past L3, and DRAM-bound on this project's machines
// (an effective L3 of 4-8 MiB on the 2-vCPU machine, so 1M roots at ~40 B is well past it).
var (
	DefaultPending = []int{10_000, 100_000, 1_000_000}
	QuickPending   = []int{10_000, 100_000}
)

// Config is one benchmark run: the cross product levels x shapes x pending
// x impls, each a Row. The zero value means the defaults (see Defaults).
type Config struct {
	// Levels to run; empty means DefaultLevels (core, then pipeline).
	Levels []Level `json:"levels"`
	// Impls names the implementations to run; empty means every one
	// registered at each level (CoreImpls, PipelineImpls), less those that
	// cannot run the workload (limit has no FAIL or timeout handling and
	// is left out of fault runs). A name is run at every selected level
	// that has it and must exist at one of them.
	Impls []string `json:"impls"`
	// Shapes are workload shape names (workload.ByName: wordcount,
	// tree8x8, chainN, diamondN); empty means wordcount.
	Shapes []string `json:"shapes"`
	// Pending lists the pending windows P (roots in flight); empty means
	// DefaultPending (QuickPending with Quick).
	Pending []int `json:"pending"`
	// Producers is the pipeline's producer goroutines (default
	// DefaultProducers); each
	// replays its own share of the stream's trees, and is also the spout
	// task its roots report to.
	Producers int `json:"producers"`
	// Shards is the pipeline's xorack shards (default DefaultShards), and the net
	// level's server shards.
	Shards int `json:"shards"`
	// Conns lists the net level's connection counts (one producer each);
	// empty means DefaultConns.
	Conns []int `json:"conns"`
	// NetBatch lists the net level's producer batch sizes: each producer
	// hands its connection NetBatch messages at a time (SendBatch, then
	// Flush); empty means DefaultNetBatch.
	NetBatch []int `json:"net_batch"`
	// FailRate is the fraction of roots a bolt fails explicitly: one of
	// the root's ACKs, never its INIT's, becomes a FAIL, and the tree's
	// later ACKs still come (a fail after fan-out). The FAIL carries the
	// ACK's val, so the acker keeps a drain that those ACKs empty (rule 3
	// of docs/semantics.md), unless FailBare.
	FailRate float64 `json:"fail_rate"`
	// FailBare makes the FAILs carry no val, as Storm's do: a failed
	// tree's later ACKs then make orphans, which time out or give way at
	// the bound.
	FailBare bool `json:"fail_bare,omitempty"`
	// DropRate is the fraction of roots that lose one ACK on the way, so
	// they time out.
	DropRate float64 `json:"drop_rate"`
	// Duration is the measured time per row; Msgs the measured messages
	// per row instead. At most one may be set; neither means
	// DefaultDuration (QuickDuration with Quick).
	Duration time.Duration `json:"duration_ns"`
	Msgs     int64         `json:"msgs"`
	// Reps is the interleaved repetitions per row (default DefaultReps;
	// QuickReps with Quick).
	Reps int `json:"reps"`
	// Seed makes the workload repeatable (default DefaultSeed).
	Seed uint64 `json:"seed"`
	// Timeout is the acker's message timeout; 0 picks one (see doc.go,
	// "Time"). It must be a whole number of milliseconds.
	Timeout time.Duration `json:"timeout_ns"`
	// Batch is the messages per Apply call (core) or per producer span
	// (pipeline); default DefaultBatch.
	Batch int `json:"batch"`
	// LatencyLoad is the fraction of the measured peak offered during the
	// pipeline's latency run; default DefaultLatencyLoad.
	LatencyLoad float64 `json:"latency_load"`
	// NoPin leaves the core goroutine, the pipeline's executors and the
	// engine's (topology, source and faults levels: topology.Config.Pin,
	// which pins nothing where its threads outnumber the CPUs) unpinned.
	NoPin bool `json:"no_pin"`
	// Quick selects the quick defaults (a few seconds in all).
	Quick bool `json:"quick"`

	// Progress, when set, is told about each step as it starts. It is
	// called from the goroutine running the step and must be cheap.
	Progress func(Progress) `json:"-"`
}

// Progress describes the step a run is about to take.
type Progress struct {
	Step, Steps int    // 0-based step number and the total
	What        string // e.g. "core wordcount P=100000: measure rep 2/3"
	// Done, Weight and Total are the estimated work before this step,
	// in it and in the whole run (a cost model: each measured rep's
	// time, plus per-root costs for building a stream and filling and
	// draining tables), for an ETA: steps are far from equal (a P=1M
	// stream takes a hundred times a P=10k one to build), so Step/Steps
	// is not the fraction done.
	Done, Weight, Total time.Duration
}

// faults reports whether the workload injects fails or drops.
func (c *Config) faults() bool { return c.FailRate > 0 || c.DropRate > 0 }

// Validate checks c as Run does, with an error naming the first bad field
// and value.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is the one check of a Config: it fills every zero field from
// its default (DefaultLevels, DefaultPending or QuickPending, DefaultDuration or
// QuickDuration unless Msgs is set, DefaultReps or QuickReps, and the
// Default constants; Shapes wordcount), checks every field, the shape
// names and the impl names, and returns the filled copy or an error
// naming the first bad field and value.
func (c Config) validate() (Config, error) {
	if len(c.Levels) == 0 {
		c.Levels = DefaultLevels()
	}
	if len(c.Shapes) == 0 {
		c.Shapes = []string{workload.WordCount.Name}
	}
	if len(c.Pending) == 0 {
		if c.Quick {
			c.Pending = slices.Clone(QuickPending)
		} else {
			c.Pending = slices.Clone(DefaultPending)
		}
	}
	c.Producers = cmp.Or(c.Producers, DefaultProducers)
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	if len(c.Conns) == 0 {
		c.Conns = slices.Clone(DefaultConns)
	}
	if len(c.NetBatch) == 0 {
		c.NetBatch = slices.Clone(DefaultNetBatch)
	}
	if c.Duration == 0 && c.Msgs == 0 {
		if c.Quick {
			c.Duration = QuickDuration
		} else {
			c.Duration = DefaultDuration
		}
	}
	if c.Reps == 0 {
		c.Reps = DefaultReps
		if c.Quick {
			c.Reps = QuickReps
		}
	}
	c.Seed = cmp.Or(c.Seed, DefaultSeed)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.LatencyLoad = cmp.Or(c.LatencyLoad, DefaultLatencyLoad)

	seen := map[Level]bool{}
	for _, l := range c.Levels {
		switch l {
		case LevelCore, LevelPipeline, LevelTopology, LevelSource, LevelNet, LevelFaults:
		default:
			return c, fmt.Errorf("bench: Config.Levels: unknown level %q (want core, pipeline, topology, source, net or faults)", l)
		}
		if seen[l] {
			return c, fmt.Errorf("bench: Config.Levels: level %q given twice", l)
		}
		seen[l] = true
	}
	for _, name := range c.Shapes {
		if _, err := workload.ByName(name); err != nil {
			return c, fmt.Errorf("bench: Config.Shapes: %w", err)
		}
	}
	for _, p := range c.Pending {
		if p < 1 || p > MaxRowPending {
			return c, fmt.Errorf("bench: Config.Pending %d out of range [1, %d]", p, MaxRowPending)
		}
	}
	if c.Producers < 1 || c.Producers > maxProducers {
		return c, fmt.Errorf("bench: Config.Producers %d out of range [1, %d]", c.Producers, maxProducers)
	}
	if seen[LevelPipeline] {
		for _, p := range c.Pending {
			if p < c.Producers {
				return c, fmt.Errorf("bench: Config.Pending %d is smaller than Producers %d (each producer needs trees of its own)", p, c.Producers)
			}
		}
	}
	for _, n := range c.Conns {
		if n < 1 || n > maxProducers {
			return c, fmt.Errorf("bench: Config.Conns %d out of range [1, %d]", n, maxProducers)
		}
		if seen[LevelNet] {
			for _, p := range c.Pending {
				if p < n {
					return c, fmt.Errorf("bench: Config.Pending %d is smaller than Conns %d (each connection needs trees of its own)", p, n)
				}
			}
		}
	}
	for _, b := range c.NetBatch {
		if b < 1 || b > maxNetBatch {
			return c, fmt.Errorf("bench: Config.NetBatch %d out of range [1, %d]", b, maxNetBatch)
		}
	}
	if c.Shards < 1 || c.Shards > maxShards {
		return c, fmt.Errorf("bench: Config.Shards %d out of range [1, %d]", c.Shards, maxShards)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"FailRate", c.FailRate}, {"DropRate", c.DropRate}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return c, fmt.Errorf("bench: Config.%s %v out of range [0, 1]", f.name, f.v)
		}
	}
	if c.FailRate+c.DropRate > 1 {
		return c, fmt.Errorf("bench: Config.FailRate %v + DropRate %v exceeds 1", c.FailRate, c.DropRate)
	}
	if c.Duration < 0 {
		return c, fmt.Errorf("bench: Config.Duration %v is negative", c.Duration)
	}
	if c.Msgs < 0 {
		return c, fmt.Errorf("bench: Config.Msgs %d is negative", c.Msgs)
	}
	if c.Duration > 0 && c.Msgs > 0 {
		return c, fmt.Errorf("bench: both Config.Duration %v and Msgs %d given; choose one", c.Duration, c.Msgs)
	}
	if c.Reps < 1 || c.Reps > maxReps {
		return c, fmt.Errorf("bench: Config.Reps %d out of range [1, %d]", c.Reps, maxReps)
	}
	if c.Msgs > 0 && c.Msgs < int64(c.Reps) {
		return c, fmt.Errorf("bench: Config.Msgs %d is fewer than Reps %d", c.Msgs, c.Reps)
	}
	if c.Timeout != 0 {
		if c.Timeout < time.Millisecond || c.Timeout > ackcore.MaxTimeout {
			return c, fmt.Errorf("bench: Config.Timeout %v out of range [1ms, %v]", c.Timeout, ackcore.MaxTimeout)
		}
		if c.Timeout%time.Millisecond != 0 {
			return c, fmt.Errorf("bench: Config.Timeout %v is not a whole number of milliseconds (the ackers' tick)", c.Timeout)
		}
	}
	if c.Batch < 1 || c.Batch > maxBatch {
		return c, fmt.Errorf("bench: Config.Batch %d out of range [1, %d]", c.Batch, maxBatch)
	}
	if math.IsNaN(c.LatencyLoad) || c.LatencyLoad <= 0 || c.LatencyLoad > 1 {
		return c, fmt.Errorf("bench: Config.LatencyLoad %v out of range (0, 1]", c.LatencyLoad)
	}
	if _, err := c.implsByLevel(); err != nil {
		return c, err
	}
	return c, nil
}

// resolved is a validated Config with names turned into values.
type resolved struct {
	Config
	// netSend: producers hand over Batch messages at a time with
	// SendBatch and Flush (set for the net level's rows)
	netSend bool
	shapes  []workload.Shape
	impls   map[Level][]string // per level, in registry order
}

// prepare validates c and turns its names into values.
func (c Config) prepare() (*resolved, error) {
	c, err := c.validate()
	if err != nil {
		return nil, err
	}
	r := &resolved{Config: c}
	for _, name := range c.Shapes {
		s, _ := workload.ByName(name) // validated
		r.shapes = append(r.shapes, s)
	}
	r.impls, _ = c.implsByLevel() // validated
	return r, nil
}

// implsByLevel is, per level of c, the impls c runs, in registry order,
// from c.Impls and the registries; or an error naming a bad impl.
func (c *Config) implsByLevel() (map[Level][]string, error) {
	faults := c.faults()
	impls := map[Level][]string{}
	for _, l := range c.Levels {
		for _, name := range implNames(l) {
			if len(c.Impls) == 0 && (!isDefault(l, name) || faults && !canFault(l, name)) {
				continue
			}
			if len(c.Impls) == 0 || slices.Contains(c.Impls, name) {
				impls[l] = append(impls[l], name)
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range c.Impls {
		if seen[name] {
			return nil, fmt.Errorf("bench: Config.Impls: impl %q given twice", name)
		}
		seen[name] = true
		found := false
		for _, l := range c.Levels {
			if slices.Contains(implNames(l), name) {
				found = true
				if faults && !canFault(l, name) {
					return nil, fmt.Errorf("bench: Config.Impls: impl %q cannot run with fail or drop rates (it has no FAIL or timeout handling)", name)
				}
			}
		}
		if !found {
			var all []string
			for _, l := range c.Levels {
				all = append(all, string(l)+": "+strings.Join(implNames(l), ", "))
			}
			return nil, fmt.Errorf("bench: Config.Impls: unknown impl %q at the selected levels (%s)", name, strings.Join(all, "; "))
		}
	}
	return impls, nil
}

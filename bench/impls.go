package bench

import (
	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/bench/internal/pipeline"
)

// Reference is the implementation every row's ratio is taken against: the
// xorack row of the same level, shape and window.
const Reference = "xorack"

// GoMapName is the Go-map baseline that -check holds xorack to.
const GoMapName = "gomap"

// coreImpl is one single-writer acker measured at core level.
type coreImpl struct {
	name string
	make func(ackcore.Config) (ackcore.Interface, error)
	// exact: the semantics of docs/semantics.md, counters included, so its
	// Stats must agree with the outcomes the harness saw.
	exact bool
	// faults: handles FAIL and timeouts (limit does neither).
	faults bool
	// evicts: its orphans give way at the bound (docs/semantics.md, rule
	// 10), so a fault run needs no room for them (faultHeadroom).
	evicts bool
	// drains: a FAIL with a val leaves a drain that its tree's last ACK
	// empties (rule 3), so a failed tree leaves nothing behind.
	drains bool
	// latency says where the Latency of its Completed outcomes comes from;
	// "" when it reports none.
	latency string
	// dflt: run when Config.Impls is empty.
	dflt bool
}

// coreImpls is the core level's registry, in run (and table) order. Tests
// add to it.
var coreImpls = []coreImpl{
	{name: Reference, make: func(c ackcore.Config) (ackcore.Interface, error) { return ackcore.NewShard(c) },
		exact: true, faults: true, evicts: true, drains: true, latency: latencyTick, dflt: true},
	{name: GoMapName, make: func(c ackcore.Config) (ackcore.Interface, error) {
		return baseline.NewGoMap(baseline.FromShardConfig(c))
	}, exact: true, faults: true, evicts: true, drains: true, latency: latencyTick, dflt: true},
	{name: "mutexmap", make: func(c ackcore.Config) (ackcore.Interface, error) {
		return baseline.NewMutexMap(baseline.FromShardConfig(c))
	}, exact: true, faults: true, evicts: true, drains: true, latency: latencyTick, dflt: true},
	{name: "xsync", make: func(c ackcore.Config) (ackcore.Interface, error) {
		return baseline.NewXsyncMap(baseline.FromShardConfig(c))
	}, exact: true, faults: true, drains: true, latency: latencyTick, dflt: true},
	{name: "storm", make: func(c ackcore.Config) (ackcore.Interface, error) {
		return baseline.NewStorm(baseline.FromShardConfig(c), baseline.StormOptions{})
	}, faults: true, latency: "acker Latency field: creation to completion, clock resolution", dflt: true},
	{name: "limit", make: func(c ackcore.Config) (ackcore.Interface, error) {
		return baseline.NewLimit(baseline.FromShardConfig(c))
	}, dflt: true},
}

const latencyTick = "acker Latency field: INIT to completion, 1 ms tick resolution"

// pipeImpl is one concurrent acker measured at pipeline level: the
// implementations of bench/internal/pipeline.
type pipeImpl struct {
	name string
	make func(pipeline.Config) (pipeline.Pipe, error)
	dflt bool
}

// pipeImpls is the pipeline level's registry, in run (and table) order.
// Tests add to it.
var pipeImpls = []pipeImpl{
	{name: Reference, make: pipeline.NewXorack, dflt: true},
	{name: "mutexmap", make: pipeline.NewMutexMap, dflt: true},
	{name: "chanshard", make: pipeline.NewChanShard, dflt: true},
}

func implNames(l Level) []string {
	var names []string
	switch l {
	case LevelCore:
		for _, i := range coreImpls {
			names = append(names, i.name)
		}
	case LevelPipeline:
		for _, i := range pipeImpls {
			names = append(names, i.name)
		}
	case LevelNet:
		for _, i := range netImpls {
			names = append(names, i.name)
		}
	case LevelTopology:
		names = append(names, topologyImpls...)
	case LevelSource:
		names = append(names, sourceImpls...)
	case LevelFaults:
		names = append(names, faultsImpls...)
	}
	return names
}

func isDefault(l Level, name string) bool {
	switch l {
	case LevelCore:
		if i, ok := findCore(name); ok {
			return i.dflt
		}
	case LevelPipeline:
		if i, ok := findPipe(name); ok {
			return i.dflt
		}
	case LevelNet:
		_, ok := findNet(name)
		return ok
	case LevelTopology, LevelSource, LevelFaults:
		return true
	}
	return false
}

// canFault reports whether impl name at level l can run a workload with
// fails and drops. Every pipeline impl can; the topology and source
// levels inject none, the faults level its own.
func canFault(l Level, name string) bool {
	if l == LevelTopology || l == LevelSource || l == LevelFaults {
		return false
	}
	if l == LevelCore {
		i, ok := findCore(name)
		return ok && i.faults
	}
	return true
}

func findCore(name string) (coreImpl, bool) {
	for _, i := range coreImpls {
		if i.name == name {
			return i, true
		}
	}
	return coreImpl{}, false
}

func findPipe(name string) (pipeImpl, bool) {
	for _, i := range pipeImpls {
		if i.name == name {
			return i, true
		}
	}
	return pipeImpl{}, false
}

package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestConfigRejects feeds Validate bad values; each error must name the
// value that was wrong.
func TestConfigRejects(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // in the error
	}{
		{Config{Levels: []Level{LevelNet}, Conns: []int{0}}, `bench: Config.Conns 0 out of range`},
		{Config{Levels: []Level{LevelNet}, Conns: []int{65}}, `Config.Conns 65 out of range`},
		{Config{Levels: []Level{LevelNet}, Conns: []int{8}, Pending: []int{4}}, `Config.Pending 4 is smaller than Conns 8`},
		{Config{Levels: []Level{"topology"}, FailRate: 0.1, Impls: []string{"acked"}}, `impl "acked" cannot run with fail or drop rates`},
		{Config{Levels: []Level{"disk"}}, `unknown level "disk"`},
		{Config{Levels: []Level{LevelCore, LevelCore}}, `"core" given twice`},
		{Config{Impls: []string{"redis"}}, `unknown impl "redis"`},
		{Config{Impls: []string{"gomap", "gomap"}}, `"gomap" given twice`},
		{Config{Levels: []Level{LevelPipeline}, Impls: []string{"storm"}}, `unknown impl "storm"`},
		{Config{Impls: []string{"limit"}, FailRate: 0.1}, `"limit" cannot run with fail or drop rates`},
		{Config{Shapes: []string{"tree9x9"}}, `"tree9x9"`},
		{Config{Shapes: []string{"chain0"}}, `"chain0"`},
		{Config{Pending: []int{0}}, "Config.Pending 0"},
		{Config{Pending: []int{-5}}, "Config.Pending -5"},
		{Config{Pending: []int{MaxRowPending + 1}}, "Config.Pending 20000001"},
		{Config{Producers: -1}, "Config.Producers -1"},
		{Config{Producers: 65}, "Config.Producers 65"},
		{Config{Pending: []int{3}, Producers: 4}, "Config.Pending 3 is smaller than Producers 4"},
		{Config{Shards: 1000}, "Config.Shards 1000"},
		{Config{FailRate: -0.1}, "Config.FailRate -0.1"},
		{Config{DropRate: 1.5}, "Config.DropRate 1.5"},
		{Config{DropRate: math.NaN()}, "Config.DropRate NaN"},
		{Config{FailRate: 0.6, DropRate: 0.6}, "Config.FailRate 0.6 + DropRate 0.6 exceeds 1"},
		{Config{Duration: -time.Second}, "Config.Duration -1s"},
		{Config{Msgs: -3}, "Config.Msgs -3"},
		{Config{Duration: time.Second, Msgs: 1000}, "both Config.Duration 1s and Msgs 1000"},
		{Config{Msgs: 2, Reps: 3}, "Config.Msgs 2 is fewer than Reps 3"},
		{Config{Reps: -1}, "Config.Reps -1"},
		{Config{Reps: 1000}, "Config.Reps 1000"},
		{Config{Timeout: time.Microsecond}, "Config.Timeout 1µs"},
		{Config{Timeout: 1500 * time.Microsecond}, "Config.Timeout 1.5ms is not a whole number of milliseconds"},
		{Config{Timeout: 48 * time.Hour}, "Config.Timeout 48h0m0s"},
		{Config{Batch: -2}, "Config.Batch -2"},
		{Config{Batch: 1 << 20}, "Config.Batch 1048576"},
		{Config{LatencyLoad: 1.5}, "Config.LatencyLoad 1.5"},
		{Config{LatencyLoad: -1}, "Config.LatencyLoad -1"},
	} {
		err := c.cfg.Validate()
		if err == nil {
			t.Errorf("%+v: accepted", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "bench: ") {
			t.Errorf("%+v: error %q, want it to contain %q", c.cfg, err, c.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	r, err := Config{}.prepare()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.impls[LevelCore]; strings.Join(got, ",") != "xorack,gomap,mutexmap,xsync,storm,limit" {
		t.Errorf("default core impls %v", got)
	}
	if got := r.impls[LevelPipeline]; strings.Join(got, ",") != "xorack,mutexmap,chanshard" {
		t.Errorf("default pipeline impls %v", got)
	}
	if r.Duration != DefaultDuration || r.Reps != DefaultReps || len(r.Pending) != len(DefaultPending) ||
		r.Producers != DefaultProducers || r.Shards != DefaultShards || r.Seed != DefaultSeed || r.Batch != DefaultBatch ||
		r.LatencyLoad != DefaultLatencyLoad || !slices.Equal(r.Conns, DefaultConns) || !slices.Equal(r.NetBatch, DefaultNetBatch) ||
		!slices.Equal(r.Levels, DefaultLevels()) || !slices.Equal(r.Shapes, []string{"wordcount"}) {
		t.Errorf("defaults: %+v", r.Config)
	}
	if again, err := r.Config.validate(); err != nil || again.Duration != r.Duration || again.Reps != r.Reps || !slices.Equal(again.Pending, r.Pending) {
		t.Errorf("validate(filled) = %+v, %v; want the same copy", again, err)
	}
	// Faults leave limit out by default; quick shortens everything.
	r, err = Config{FailRate: 0.01, Quick: true}.prepare()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.impls[LevelCore] {
		if n == "limit" {
			t.Error("limit selected for a fault run")
		}
	}
	if r.Duration != QuickDuration || len(r.Pending) != len(QuickPending) {
		t.Errorf("quick defaults: %+v", r.Config)
	}
	// An impl named for one level runs where it exists.
	r, err = Config{Impls: []string{"chanshard"}}.prepare()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.impls[LevelCore]) != 0 || len(r.impls[LevelPipeline]) != 1 {
		t.Errorf("impls %v", r.impls)
	}
}

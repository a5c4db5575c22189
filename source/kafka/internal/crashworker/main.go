// Command crashworker is the worker of the Kafka spout's process tests
// (source/kafka, TestReplayBoundAcrossProcesses): a Kafka spout into a bolt
// that appends each record it processes to a ledger file, "partition
// offset unixnano\\n", before acking it. The tests run it as a separate
// process against an in-process kfake, SIGKILL it and start it again. One
// record (-stuck-partition, -stuck-offset) fails its first attempt in
// every process, so the engine's backoff (-backoff) pins its partition's
// floor while the records after it complete. -metadata-bytes is the spout's
// Config.CommitMetadataBytes: -1 commits the floor alone (no done set), the
// "before" of the tests' comparison. -id tags each ledger line with the
// worker's number (a fourth field) and names the client
// "crashworker-<id>", -log writes the spout's warnings as
// JSON lines to a file, and -heartbeat, -session and -rebalance set the
// group member's heartbeat interval, session and rebalance timeouts
// (TestCommitsContinueThroughRebalances). SIGTERM stops it cleanly.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/internal/workerproc"
	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/topology"
)

func main() { workerproc.Main(new(worker)) }

// worker is what the flags set.
type worker struct {
	brokers, topic, group, instance string
	interval, backoff               time.Duration
	stuckPart                       int
	stuckOff                        int64
	metaBytes, id                   int
	logFile                         string
	heartbeat, session, rebalance   time.Duration
}

// Flags defines the worker's flags.
func (w *worker) Flags(fs *flag.FlagSet) {
	fs.StringVar(&w.brokers, "brokers", "", "seed brokers")
	fs.StringVar(&w.topic, "topic", "", "topic")
	fs.StringVar(&w.group, "group", "", "consumer group")
	fs.StringVar(&w.instance, "instance", "", "static group member id (a restarted worker takes its predecessor's place at once)")
	fs.DurationVar(&w.interval, "interval", kafka.DefaultCommitInterval, "commit interval")
	fs.IntVar(&w.stuckPart, "stuck-partition", -1, "partition of the stuck record (-1: none)")
	fs.Int64Var(&w.stuckOff, "stuck-offset", -1, "offset of the stuck record")
	fs.DurationVar(&w.backoff, "backoff", 10*time.Second, "retry backoff (the stuck record waits this long)")
	fs.IntVar(&w.metaBytes, "metadata-bytes", 0, "Config.CommitMetadataBytes: 0 the default budget, -1 the floor alone (no done set)")
	fs.IntVar(&w.id, "id", -1, "worker number written as each ledger line's fourth field (-1: none)")
	fs.StringVar(&w.logFile, "log", "", "file the spout's warnings are appended to, as JSON lines (default: discarded)")
	fs.DurationVar(&w.heartbeat, "heartbeat", 100*time.Millisecond, "group heartbeat interval")
	fs.DurationVar(&w.session, "session", 600*time.Millisecond, "group session timeout")
	fs.DurationVar(&w.rebalance, "rebalance", 0, "group rebalance timeout (0: the client's default)")
}

// Run runs the worker until SIGTERM.
func (w *worker) Run(l *workerproc.Ledger, th *workerproc.Throttle) error {
	// A short session by default: the test's cluster allows it, so a
	// killed worker's partitions move on in well under a second.
	opts := []kgo.Opt{kgo.HeartbeatInterval(w.heartbeat), kgo.SessionTimeout(w.session),
		kgo.FetchMaxWait(50 * time.Millisecond)}
	if w.id >= 0 {
		opts = append(opts, kgo.ClientID("crashworker-"+strconv.Itoa(w.id)))
	}
	if w.rebalance > 0 {
		opts = append(opts, kgo.RebalanceTimeout(w.rebalance))
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if w.logFile != "" {
		lf, err := os.OpenFile(w.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		logger = slog.New(slog.NewJSONHandler(lf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if w.instance != "" {
		opts = append(opts, kgo.InstanceID(w.instance))
	}
	sp, err := kafka.New(kafka.Config{Brokers: strings.Split(w.brokers, ","), Topics: []string{w.topic}, Group: w.group,
		CommitInterval: w.interval, CommitMetadataBytes: w.metaBytes, Logger: logger, Opts: opts})
	if err != nil {
		return err
	}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("ledger", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, _ *topology.BasicCollector) error {
			th.Tick()
			r := t.Value(0).(*kgo.Record)
			if r.Partition == int32(w.stuckPart) && r.Offset == w.stuckOff && t.Attempt() == 1 {
				return fmt.Errorf("stuck record %d/%d: first attempt fails", r.Partition, r.Offset)
			}
			fields := []int64{int64(r.Partition), r.Offset, time.Now().UnixNano()}
			if w.id >= 0 {
				fields = append(fields, int64(w.id))
			}
			return l.Record(fields...)
		}))
	}).Executors(2).Input("records", topology.Shuffle())
	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1 << 10, Backoff: w.backoff, MaxBackoff: w.backoff}
	top, err := b.Build(cfg)
	if err != nil {
		return err
	}
	if os.Getenv("CRASHWORKER_STATS") != "" {
		go func() {
			for range time.Tick(500 * time.Millisecond) {
				st := sp.Stats()
				fmt.Fprintf(os.Stderr, "crashworker: emitted %d completed %d skipped-done %d commits %d errors %d |", st.Emitted, st.Completed, st.SkippedDone, st.Commits, st.CommitErrors)
				for _, p := range st.Partitions {
					fmt.Fprintf(os.Stderr, " p%d owned %v paused %v committed %d committable %d pending %d uncommitted %d;", p.Partition, p.Owned, p.Paused, p.Committed, p.Committable, p.Pending, p.Uncommitted)
				}
				fmt.Fprintln(os.Stderr)
			}
		}()
	}
	return workerproc.RunUntilTerm(top)
}

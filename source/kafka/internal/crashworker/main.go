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

func main() {
	brokers := flag.String("brokers", "", "seed brokers")
	topic := flag.String("topic", "", "topic")
	group := flag.String("group", "", "consumer group")
	instance := flag.String("instance", "", "static group member id (a restarted worker takes its predecessor's place at once)")
	ledger := flag.String("ledger", "", "ledger file, appended to")
	interval := flag.Duration("interval", kafka.DefaultCommitInterval, "commit interval")
	stuckPart := flag.Int("stuck-partition", -1, "partition of the stuck record (-1: none)")
	stuckOff := flag.Int64("stuck-offset", -1, "offset of the stuck record")
	backoff := flag.Duration("backoff", 10*time.Second, "retry backoff (the stuck record waits this long)")
	metaBytes := flag.Int("metadata-bytes", 0, "Config.CommitMetadataBytes: 0 the default budget, -1 the floor alone (no done set)")
	id := flag.Int("id", -1, "worker number written as each ledger line's fourth field (-1: none)")
	logFile := flag.String("log", "", "file the spout's warnings are appended to, as JSON lines (default: discarded)")
	heartbeat := flag.Duration("heartbeat", 100*time.Millisecond, "group heartbeat interval")
	session := flag.Duration("session", 600*time.Millisecond, "group session timeout")
	rebalance := flag.Duration("rebalance", 0, "group rebalance timeout (0: the client's default)")
	flag.IntVar(&throttle, "throttle", 0, "sleep 1ms every this many records per executor (0: never): a worker slower than fetching")
	flag.Parse()
	w := worker{id: *id, logFile: *logFile, heartbeat: *heartbeat, session: *session, rebalance: *rebalance}
	if err := w.run(*brokers, *topic, *group, *instance, *ledger, *interval, int32(*stuckPart), *stuckOff, *backoff, *metaBytes); err != nil {
		fmt.Fprintln(os.Stderr, "crashworker:", err)
		os.Exit(1)
	}
}

var throttle int

// worker is what the flags set beyond run's arguments.
type worker struct {
	id                 int
	logFile            string
	heartbeat, session time.Duration
	rebalance          time.Duration
}

func (w worker) run(brokers, topic, group, instance, ledger string, interval time.Duration, stuckPart int32, stuckOff int64, backoff time.Duration, metaBytes int) error {
	l, err := workerproc.OpenLedger(ledger)
	if err != nil {
		return err
	}
	defer l.Close()
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
	if instance != "" {
		opts = append(opts, kgo.InstanceID(instance))
	}
	sp, err := kafka.New(kafka.Config{Brokers: strings.Split(brokers, ","), Topics: []string{topic}, Group: group,
		CommitInterval: interval, CommitMetadataBytes: metaBytes, Logger: logger, Opts: opts})
	if err != nil {
		return err
	}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("ledger", func() topology.Bolt {
		k := 0
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, _ *topology.BasicCollector) error {
			if k++; throttle > 0 && k%throttle == 0 {
				time.Sleep(time.Millisecond) // the throttle, not synchronisation
			}
			r := t.Value(0).(*kgo.Record)
			if r.Partition == stuckPart && r.Offset == stuckOff && t.Attempt() == 1 {
				return fmt.Errorf("stuck record %d/%d: first attempt fails", r.Partition, r.Offset)
			}
			line := strconv.AppendInt(nil, int64(r.Partition), 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, r.Offset, 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, time.Now().UnixNano(), 10)
			if w.id >= 0 {
				line = append(line, ' ')
				line = strconv.AppendInt(line, int64(w.id), 10)
			}
			return l.Write(append(line, '\n'))
		}))
	}).Executors(2).Input("records", topology.Shuffle())
	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1 << 10, Backoff: backoff, MaxBackoff: backoff}
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

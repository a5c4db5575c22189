package kafka

import (
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/topology"
)

// TestWordCount runs records through the word count and checks that every
// record was processed once and the group committed every partition to its
// end.
func TestWordCount(t *testing.T) {
	const topic, group, parts, n = "words", "wc", 3, 1000
	c := startFilled(t, topic, parts, n)
	l := newLedger()
	// A small pending bound keeps records waiting in the buffers, which
	// then never run empty.
	// Small fetches make the byte bound (32 KiB: two polls of kilobyte
	// records) a tenth of the topic's records.
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, MaxPollRecords: 16,
		Opts: []kgo.Opt{kgo.FetchMaxPartitionBytes(1 << 10), kgo.FetchMaxBytes(4 << 10)}},
		top: topology.Config{MaxSpoutPending: 8}})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)
	// The buffers stay bounded in bytes: the poller takes records while
	// they hold less than starveBounds times byteBound, a poll at most
	// MaxPollRecords.
	pl.spout.mu.Lock()
	bound, peak := pl.spout.byteBound(), pl.spout.peakBytes
	pl.spout.mu.Unlock()
	if bound != 32<<10 || peak > starveBounds*bound+16*(recOverhead+1<<10) || peak == 0 {
		t.Errorf("buffers peaked at %d bytes, bound %d (want 32 KiB)", peak, bound)
	}
	if dups := l.checkAll(t, topic, parts, n); dups != 0 {
		t.Errorf("%d duplicates without a fault", dups)
	}
	st := pl.spout.Stats()
	if st.Emitted != parts*n || st.Completed != parts*n || st.Commits == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestConfigErrorsNameTheValue(t *testing.T) {
	ok := Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"t"}, Group: "g"}
	testkit.Refuses(t, ok, func(c Config) error { _, err := New(c); return err }, []testkit.Refusal[Config]{
		{Edit: func(c *Config) { c.Brokers = nil }, Want: "kafka: Config.Brokers is empty"},
		{Edit: func(c *Config) { c.Brokers = []string{"a:1", ""} }, Want: `kafka: empty broker address in Config.Brokers ["a:1" ""]`},
		{Edit: func(c *Config) { c.Topics = nil }, Want: "kafka: Config.Topics is empty"},
		{Edit: func(c *Config) { c.Topics = []string{""} }, Want: `kafka: empty topic in Config.Topics [""]`},
		{Edit: func(c *Config) { c.DeadLetterTopic = "t" }, Want: `kafka: Config.DeadLetterTopic "t" is also consumed (Config.Topics ["t"])`},
		{Edit: func(c *Config) { c.Group = "" }, Want: "kafka: Config.Group is empty"},
		{Edit: func(c *Config) { c.MaxUncommitted = -1 }, Want: "kafka: Config.MaxUncommitted -1 out of range [1, 1073741824]"},
		{Edit: func(c *Config) { c.MaxPollRecords = 1 << 21 }, Want: "kafka: Config.MaxPollRecords 2097152 out of range [1, 1048576]"},
		{Edit: func(c *Config) { c.CommitInterval = time.Microsecond }, Want: "kafka: Config.CommitInterval 1µs below 1ms"},
		{Edit: func(c *Config) { c.CommitTimeout = -time.Second }, Want: "kafka: Config.CommitTimeout -1s below 1ms"},
		{Edit: func(c *Config) { c.CommitMetadataBytes = 20 }, Want: "kafka: Config.CommitMetadataBytes 20 out of range [39, 65536] (or -1: none)"},
	})
	s, err := New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.MaxUncommitted != DefaultMaxUncommitted || s.cfg.MaxPollRecords != DefaultMaxPollRecords ||
		s.cfg.CommitInterval != DefaultCommitInterval || s.cfg.CommitMetadataBytes != DefaultCommitMetadataBytes || s.cfg.Stream != topology.DefaultStream || s.Client() != nil {
		t.Errorf("defaults: %+v", s.cfg)
	}
	if err := s.Close(); err != nil { // never opened: nothing to close
		t.Error(err)
	}
}

// A record the engine refuses to emit (here: Values gives it no values for
// the declared field, three times) is offered again, first, until it goes:
// counted, logged, and still processed once.
func TestRefusedEmitIsOfferedAgain(t *testing.T) {
	const topic, group, n = "t", "g", 20
	c := startFilled(t, topic, 1, n)
	logs := &testkit.Logs{}
	refusals := 0
	values := func(r *kgo.Record) []any {
		if r.Offset == 0 && refusals < 3 {
			refusals++
			return nil
		}
		return []any{r}
	}
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, Values: values, Logger: slog.New(logs)}})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)
	if dups := l.checkAll(t, topic, 1, n); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	if st := pl.spout.Stats(); st.EmitErrors != 3 || st.Emitted != n || st.Completed != n {
		t.Errorf("stats %+v", st)
	}
	if e := find(logs, slog.LevelError, "the engine refused a record"); len(e) != 2 { // at the 1st and 2nd refusal
		t.Errorf("error logs: %v", e)
	}
}

// The default values (the record alone) cost one allocation per valBlock
// records, and each record's values stay its own: a slot is never handed
// out twice.
func TestDefaultValuesAllocate(t *testing.T) {
	s, err := New(Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"t"}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]kgo.Record, 3*valBlock)
	var got [][]any
	for i := range recs {
		got = append(got, s.values(&recs[i]))
	}
	for i, v := range got {
		if len(v) != 1 || cap(v) != 1 || v[0] != &recs[i] {
			t.Fatalf("record %d: values %v (cap %d), want the record alone", i, v, cap(v))
		}
	}
	r := &kgo.Record{}
	if n := testing.AllocsPerRun(10*valBlock, func() { _ = s.values(r) }); n > 1.0/valBlock*2 {
		t.Errorf("%.3f allocations per record's values, want at most %.3f", n, 1.0/valBlock*2)
	}
	s, err = New(Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"t"}, Group: "g",
		Values: func(r *kgo.Record) []any { return []any{string(r.Value)} }})
	if err != nil {
		t.Fatal(err)
	}
	if v := s.values(&kgo.Record{Value: []byte("x")}); len(v) != 1 || v[0] != "x" {
		t.Errorf("Config.Values not used: %v", v)
	}
}

// A fetch asks for the wire bytes whose decoded records fill half the
// buffers' bound: less than the client's setting for small compressed
// records, about all of it for large incompressible ones, never below
// minPartBytes.
func TestFetchSizedToDecodedBytes(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")) // never dialled: UpdateFetchMaxBytes only stores
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		name             string
		wirePerRec       int64 // wire bytes per record read
		recBytes         int64 // recBytes per record taken
		wantMin, wantMax int32
	}{
		{"small compressed", 10, 300, 30 << 10, 40 << 10},       // 30x: 1 MiB / 30
		{"tiny compressed", 1, 300, minPartBytes, minPartBytes}, // 300x: the floor
		{"large incompressible", 4100, 4352, 960 << 10, 1 << 20},
	} {
		s := &Spout{cl: cl, cfg: Config{MaxPollRecords: DefaultMaxPollRecords}, maxPartBytes: 1 << 20, partBytes: 128 << 10,
			fetchBytes: 50 << 20, active: []*partition{{}}}
		s.readRecs.Store(1000)
		s.readBytes.Store(1000 * tc.wirePerRec)
		s.takenRecs, s.takenBytes = 500, 500*tc.recBytes
		s.sizeFetch()
		if s.partBytes < tc.wantMin || s.partBytes > tc.wantMax {
			t.Errorf("%s: a fetch asks for %d bytes of a partition, want %d to %d", tc.name, s.partBytes, tc.wantMin, tc.wantMax)
		}
		if v := cl.OptValue(kgo.FetchMaxPartitionBytes); v != s.partBytes {
			t.Errorf("%s: the client asks for %v, the spout says %d", tc.name, v, s.partBytes)
		}
	}
}

// WaitCaughtUp with an interval that is not positive returns an error
// naming it, rather than panic in the ticker.
func TestWaitCaughtUpIntervalErrorNamesTheValue(t *testing.T) {
	c := startFilled(t, "t", 1, 1)
	for _, every := range []time.Duration{0, -time.Second} {
		ctx, cancel := contextWithTimeout()
		err := WaitCaughtUp(ctx, c.cl, "g", every, "t")
		cancel()
		want := "kafka: WaitCaughtUp interval " + every.String() + " is not positive"
		if err == nil || err.Error() != want {
			t.Errorf("interval %v: error %v, want %q", every, err, want)
		}
	}
}

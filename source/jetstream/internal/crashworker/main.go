// Command crashworker is the worker of the JetStream spout's process test
// (source/jetstream, TestSeveralProcessesOneConsumer): a JetStream spout on
// a durable consumer into a bolt that appends each message it processes to
// a ledger file, "sequence unixnano\n", before acking it. The test runs
// several as separate processes on one consumer, SIGKILLs one and stops
// the others with SIGTERM.
package main

import (
	"flag"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/internal/workerproc"
	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/topology"
)

func main() { workerproc.Main(new(worker)) }

// worker is what the flags set.
type worker struct{ url, stream, consumer string }

// Flags defines the worker's flags.
func (w *worker) Flags(fs *flag.FlagSet) {
	fs.StringVar(&w.url, "nats", "", "server URL")
	fs.StringVar(&w.stream, "stream", "", "stream")
	fs.StringVar(&w.consumer, "consumer", "", "durable consumer")
}

// Run runs the worker until SIGTERM.
func (w *worker) Run(l *workerproc.Ledger, th *workerproc.Throttle) error {
	nc, err := nats.Connect(w.url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	b := topology.NewBuilder()
	b.Spout("js", func() topology.Spout {
		return jetstream.New(jetstream.Config{JetStream: js, Stream: w.stream, Consumer: w.consumer, FetchWait: 50 * time.Millisecond})
	}).Output("pos", "data")
	b.Bolt("ledger", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, _ *topology.BasicCollector) error {
			err := l.Record(int64(t.Value(0).(jetstream.Position).Seq), time.Now().UnixNano())
			th.Tick()
			return err
		}))
	}).Input("js", topology.Shuffle())
	top, err := b.Build(topology.Config{})
	if err != nil {
		return err
	}
	return workerproc.RunUntilTerm(top)
}

// Command crashworker is the worker of the JetStream spout's process test
// (source/jetstream, TestSeveralProcessesOneConsumer): a JetStream spout on
// a durable consumer into a bolt that appends each message it processes to
// a ledger file, "sequence unixnano\n", before acking it. The test runs
// several as separate processes on one consumer, SIGKILLs one and stops
// the others with SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/internal/workerproc"
	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/topology"
)

func main() {
	url := flag.String("nats", "", "server URL")
	stream := flag.String("stream", "", "stream")
	consumer := flag.String("consumer", "", "durable consumer")
	ledger := flag.String("ledger", "", "ledger file, appended to")
	throttle := flag.Int("throttle", 0, "sleep 1ms every this many messages (0: never)")
	flag.Parse()
	if err := run(*url, *stream, *consumer, *ledger, *throttle); err != nil {
		fmt.Fprintln(os.Stderr, "crashworker:", err)
		os.Exit(1)
	}
}

func run(url, stream, consumer, ledger string, throttle int) error {
	l, err := workerproc.OpenLedger(ledger)
	if err != nil {
		return err
	}
	defer l.Close()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	var k atomic.Int64
	b := topology.NewBuilder()
	b.Spout("js", func() topology.Spout {
		return jetstream.New(jetstream.Config{JetStream: js, Stream: stream, Consumer: consumer, FetchWait: 50 * time.Millisecond})
	}).Output("pos", "data")
	b.Bolt("ledger", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, _ *topology.BasicCollector) error {
			line := strconv.AppendUint(nil, t.Value(0).(jetstream.Position).Seq, 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, time.Now().UnixNano(), 10)
			line = append(line, '\n')
			err := l.Write(line)
			if throttle > 0 && k.Add(1)%int64(throttle) == 0 {
				time.Sleep(time.Millisecond) // the throttle, not synchronisation
			}
			return err
		}))
	}).Input("js", topology.Shuffle())
	top, err := b.Build(topology.Config{})
	if err != nil {
		return err
	}
	return workerproc.RunUntilTerm(top)
}

// Command crashworker is the worker of the JetStream spout's process test
// (source/jetstream, TestSeveralProcessesOneConsumer): a JetStream spout on
// a durable consumer into a bolt that appends each message it processes to
// a ledger file, "sequence unixnano\n", before acking it. The test runs
// several as separate processes on one consumer, SIGKILLs one and stops
// the others with SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

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
	f, err := os.OpenFile(ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	k := 0
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
			mu.Lock()
			_, err := f.Write(line)
			k++
			slow := throttle > 0 && k%throttle == 0
			mu.Unlock()
			if slow {
				time.Sleep(time.Millisecond) // the throttle, not synchronisation
			}
			return err
		}))
	}).Input("js", topology.Shuffle())
	top, err := b.Build(topology.Config{})
	if err != nil {
		return err
	}
	if err := top.Start(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return top.Stop(ctx)
}

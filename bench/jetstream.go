package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/source/jetstream/jstest"
	"github.com/xorack/xorack/topology"
)

// jsSource is the source level's NATS server with JetStream (embedded,
// package source/jetstream/jstest) and a stream of sentences per size.
type jsSource struct {
	dir     string
	srv     *jstest.Server
	js      natsjs.JetStream
	streams map[int]string // by messages
}

func startJetStream() (*jsSource, error) {
	dir, err := os.MkdirTemp("", "ackbench-jetstream-")
	if err != nil {
		return nil, fmt.Errorf("bench: jetstream store: %w", err)
	}
	srv, err := jstest.Start(jstest.Config{StoreDir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	js, err := srv.Connect()
	if err != nil {
		srv.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: %w", err)
	}
	return &jsSource{dir: dir, srv: srv, js: js, streams: map[int]string{}}, nil
}

func (j *jsSource) close() {
	j.js.Conn().Close()
	j.srv.Close()
	os.RemoveAll(j.dir)
}

// stream returns the stream of n sentences (the corpus cycled), loading it
// on first use.
func (j *jsSource) stream(corpus *wcCorpus, n int) (string, error) {
	if name, ok := j.streams[n]; ok {
		return name, nil
	}
	name := fmt.Sprintf("SENTENCES_%d", n)
	subject := name + ".in"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := j.js.CreateStream(ctx, natsjs.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		return "", fmt.Errorf("bench: creating stream %q: %w", name, err)
	}
	const window = 4096 // async publishes in flight
	for i := 0; i < n; i += window {
		var acks []natsjs.PubAckFuture
		for k := i; k < min(n, i+window); k++ {
			f, err := j.js.PublishAsync(subject, []byte(corpus.sentences[k%wcSentences]))
			if err != nil {
				return "", fmt.Errorf("bench: loading stream %q: %w", name, err)
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return "", fmt.Errorf("bench: loading stream %q: %w", name, err)
			case <-ctx.Done():
				return "", fmt.Errorf("bench: loading stream %q: %w", name, ctx.Err())
			}
		}
	}
	j.streams[n] = name
	return name, nil
}

// run runs the word count over every message of the stream of n
// sentences through a fresh durable consumer.
func (j *jsSource) run(corpus *wcCorpus, n, rep, shards int, pin bool, seed uint64) (wcResult, error) {
	stream, err := j.stream(corpus, n)
	if err != nil {
		return wcResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	durable := fmt.Sprintf("wc-%d", rep+1) // rep -1 is the warm-up
	_ = j.js.DeleteConsumer(ctx, stream, durable)
	if _, err := j.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig(durable, 0, 0)); err != nil {
		return wcResult{}, fmt.Errorf("bench: consumer %q of %q: %w", durable, stream, err)
	}
	sp := jetstream.New(jetstream.Config{JetStream: j.js, Stream: stream, Consumer: durable,
		Decode: func(m natsjs.Msg, _ jetstream.Position) ([]any, error) { return []any{string(m.Data())}, nil },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w, err := buildWordcount("records", func() topology.Spout { return sp }, true, shards, pin, seed)
	if err != nil {
		return wcResult{}, err
	}
	if err := w.start(); err != nil {
		return wcResult{}, err
	}
	tick := time.NewTicker(time.Millisecond)
	for sp.Stats().Acked < uint64(n) {
		select {
		case <-ctx.Done():
			tick.Stop()
			_ = w.top.Stop(context.Background())
			return wcResult{}, fmt.Errorf("bench: source level: jetstream: %d of %d messages acked: %w", sp.Stats().Acked, n, ctx.Err())
		case <-tick.C:
		}
	}
	tick.Stop()
	if err := w.top.Stop(ctx); err != nil {
		return wcResult{}, err
	}
	res := w.result(corpus, n)
	if st := sp.Stats(); res.err == nil && (st.Emitted != uint64(n) || st.Acked != uint64(n)) {
		res.err = fmt.Errorf("%d messages emitted, %d acked, want %d", st.Emitted, st.Acked, n)
	}
	if res.err == nil {
		c, err := j.js.Consumer(ctx, stream, durable)
		switch {
		case err != nil:
			res.err = err
		case c.CachedInfo().AckFloor.Stream != uint64(n) || c.CachedInfo().NumAckPending != 0:
			res.err = fmt.Errorf("consumer ack floor %d with %d pending, want %d and 0", c.CachedInfo().AckFloor.Stream, c.CachedInfo().NumAckPending, n)
		}
	}
	_ = j.js.DeleteConsumer(ctx, stream, durable)
	return res, nil
}

package kit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream/jstest"
)

// NATS is a JetStream client, and the server it started if it started one.
type NATS struct {
	JS    natsjs.JetStream
	Where string // the server, for a report: its URL, or "an embedded nats-server"
	undo  undo
	dir   string // the embedded server's store
}

// StartNATS connects to the NATS server at url as client name; url empty,
// it starts one in the process with JetStream, its store in a fresh
// temporary directory. Close undoes both.
func StartNATS(url, name string) (_ *NATS, err error) {
	n := &NATS{Where: url}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if url == "" {
		if n.dir, err = os.MkdirTemp("", name+"-"); err != nil {
			return nil, err
		}
		n.undo.push(func() { os.RemoveAll(n.dir) })
		var srv *jstest.Server
		if srv, err = jstest.Start(jstest.Config{StoreDir: n.dir}); err != nil {
			return nil, err
		}
		n.undo.push(srv.Close)
		url, n.Where = srv.URL(), "an embedded nats-server"
	}
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	n.undo.push(nc.Close)
	if n.JS, err = natsjs.New(nc); err != nil {
		return nil, err
	}
	return n, nil
}

// Close closes the connection and stops the server it started, removing
// its store.
func (n *NATS) Close() { n.undo.run() }

// PublishWindow bounds the publishes Publish has in flight, far below the
// client's limit.
const PublishWindow = 256

// Publish publishes sentences 0 to n-1 of s to subject and returns the
// stream sequences of the first and the last; the sentences land in
// order, or it fails naming the one that did not.
func Publish(ctx context.Context, js natsjs.JetStream, subject string, s Sentences, n int) (first, last uint64, err error) {
	// Publish in windows, each acknowledged before the next: the client
	// refuses a publish with ErrTooManyStalledMsgs when its outstanding
	// publishes stay at its limit (4,000 by default) past a short stall
	// (200 ms), which a busy machine reaches with all n in flight.
	futures := make([]natsjs.PubAckFuture, n)
	for i := range n {
		if futures[i], err = js.PublishAsync(subject, []byte(s.At(i))); err != nil {
			return 0, 0, fmt.Errorf("publishing sentence %d: %w", i, err)
		}
		if (i+1)%PublishWindow != 0 && i != n-1 {
			continue
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("publishing %d sentences: %w", n, ctx.Err())
		}
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if i == 0 {
				first = ack.Sequence
			}
			if ack.Sequence != first+uint64(i) {
				return 0, 0, fmt.Errorf("sentence %d stored at sequence %d, want %d: another client is publishing to %q", i, ack.Sequence, first+uint64(i), subject)
			}
			last = ack.Sequence
		case err := <-f.Err():
			return 0, 0, err
		}
	}
	return first, last, nil
}

// WaitAcked polls consumer on stream until its ack floor is at last with
// nothing pending, and returns its last info (nil if none was read); the
// error says where the floor stood when ctx ended.
func WaitAcked(ctx context.Context, js natsjs.JetStream, stream, consumer string, last uint64) (*natsjs.ConsumerInfo, error) {
	var info *natsjs.ConsumerInfo
	var lastErr error
	for {
		if c, err := js.Consumer(ctx, stream, consumer); err == nil {
			info = c.CachedInfo()
			if info.AckFloor.Stream >= last && info.NumAckPending == 0 && info.NumPending == 0 {
				return info, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if info == nil {
				return nil, fmt.Errorf("consumer %q never read: %w", consumer, errors.Join(ctx.Err(), lastErr))
			}
			return info, fmt.Errorf("consumer %q did not settle: ack floor %d of %d, %d ack pending, %d pending: %w",
				consumer, info.AckFloor.Stream, last, info.NumAckPending, info.NumPending, ctx.Err())
		case <-time.After(10 * time.Millisecond): // polling the server, with the deadline
		}
	}
}

package netio_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/netio"
)

// A server on a loopback port and a client Port: one root with two
// edges, acked, completes over the network.
func Example() {
	secret := []byte("example-secret-0123456789")
	addr, stop := exampleServer(secret) // NewServer, net.Listen, Serve: see below
	defer stop()

	cfg := netio.ClientConfig{Hosts: []string{addr}, Secret: secret}
	port, err := cfg.Port(acker.Spec{Producers: 1, Tasks: 1})
	if err != nil {
		panic(err)
	}
	s := port.Sender(0)
	s.Send(ackcore.Msg{Root: 42, Kind: ackcore.Init, Task: 0, Val: 0b01 ^ 0b10})
	s.Send(ackcore.Msg{Root: 42, Kind: ackcore.Ack, Val: 0b01})
	s.Send(ackcore.Msg{Root: 42, Kind: ackcore.Ack, Val: 0b10})
	s.Flush()
	outs, _ := port.Inbox(0).WaitUntil(nil, time.After(5*time.Second))
	for _, o := range outs {
		fmt.Println(o.Root, o.Kind, o.Task)
	}
	port.Stop()
	// Output: 42 completed 0
}

// Validate says what NewServer would refuse, naming the field and its
// value; the zero value of every other field is its default.
func ExampleServerConfig_Validate() {
	cfg := netio.ServerConfig{Secret: []byte("example-secret-0123456789"), MaxConns: -1,
		Shard: ackcore.Config{MaxPending: 1 << 16}}
	fmt.Println(cfg.Validate())
	cfg.MaxConns = 0
	fmt.Println(cfg.Validate())
	// Output:
	// netio: ServerConfig.MaxConns -1 out of range [1, 4096]
	// <nil>
}

// A client with the wrong secret: Port's error says, for each host,
// why it did not connect, and the Port is nil.
func ExampleHostError() {
	addr, stop := exampleServer([]byte("example-secret-0123456789"))
	defer stop()

	cfg := netio.ClientConfig{Hosts: []string{addr}, Secret: []byte("not-the-secret-0123456789"),
		Logger: slog.New(slog.DiscardHandler)}
	port, err := cfg.Port(acker.Spec{Producers: 1, Tasks: 1})
	var he *netio.HostError
	if errors.As(err, &he) {
		fmt.Println(port == nil, he.Addr == addr)
		fmt.Println(he.Err)
	}
	// Output:
	// true true
	// hello MAC does not match (handshake refused, code auth)
}

// A client's view of its hosts and of the roots it waits for.
func ExampleClient_Hosts() {
	secret := []byte("example-secret-0123456789")
	addr, stop := exampleServer(secret)
	defer stop()

	c, err := netio.Dial(netio.ClientConfig{Hosts: []string{addr}, Secret: secret}, acker.Spec{Producers: 1, Tasks: 1})
	if err != nil {
		panic(err)
	}
	defer c.Stop()
	c.Sender(0).Send(ackcore.Msg{Root: 7, Kind: ackcore.Init, Val: 1}) // never acked
	c.Sender(0).Flush()
	deadline := time.Now().Add(5 * time.Second)
	for len(c.OldestPending(1)) == 0 && time.Now().Before(deadline) { // registered by the writer
		time.Sleep(time.Millisecond)
	}
	h := c.Hosts()[0]
	fmt.Println(h.Up, h.Connections, h.Pending)
	fmt.Println(c.OldestPending(1)[0].Root)
	// Output:
	// true 1 1
	// 7
}

// exampleServer serves an acker on a loopback port: the server side of
// the examples.
func exampleServer(secret []byte) (addr string, stop func()) {
	srv, err := netio.NewServer(netio.ServerConfig{Secret: secret, Shard: ackcore.Config{MaxPending: 1024}})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }
}

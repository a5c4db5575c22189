package jstest

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds how long Start waits for the server to accept
// connections. Starting takes milliseconds; the bound is for a machine
// busy with other work.
const readyTimeout = 10 * time.Second

// Default JetStream limits: small, so the server does not reserve a share
// of the machine's disk and memory as a production server would.
const (
	defaultMaxStore  = 1 << 30
	defaultMaxMemory = 256 << 20
)

// Config configures Start.
type Config struct {
	// StoreDir is JetStream's file store; required. In a test,
	// t.TempDir().
	StoreDir string
	// MaxStore and MaxMemory bound JetStream's file and memory storage,
	// in bytes; 1 GiB and 256 MiB when zero.
	MaxStore, MaxMemory int64
}

// Server is a NATS server with JetStream running in the process.
type Server struct {
	server *server.Server
}

// Start starts a nats-server with JetStream on loopback and returns
// when it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("jstest: Config.StoreDir is empty; JetStream needs a directory (t.TempDir() in a test)")
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = defaultMaxStore
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = defaultMaxMemory
	}
	if cfg.MaxStore < 0 || cfg.MaxMemory < 0 {
		return nil, fmt.Errorf("jstest: negative JetStream limits: MaxStore %d, MaxMemory %d", cfg.MaxStore, cfg.MaxMemory)
	}
	s, err := server.NewServer(&server.Options{
		ServerName:         "jstest",
		Host:               "127.0.0.1",
		Port:               server.RANDOM_PORT,
		NoSigs:             true,
		NoLog:              true,
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		JetStreamMaxStore:  cfg.MaxStore,
		JetStreamMaxMemory: cfg.MaxMemory,
	})
	if err != nil {
		return nil, fmt.Errorf("jstest: configuring nats-server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("jstest: nats-server not accepting connections after %v", readyTimeout)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("jstest: nats-server started without JetStream (store %q)", cfg.StoreDir)
	}
	return &Server{server: s}, nil
}

// URL returns the client URL, nats://127.0.0.1:port.
func (n *Server) URL() string { return n.server.ClientURL() }

// Connect connects a client to the server, with opts, and returns a
// JetStream handle on the connection; js.Conn().Close() closes it.
func (n *Server) Connect(opts ...nats.Option) (jetstream.JetStream, error) {
	nc, err := nats.Connect(n.URL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("jstest: connecting to %s: %w", n.URL(), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jstest: JetStream client: %w", err)
	}
	return js, nil
}

// Server returns the embedded server, for what a test needs beyond its URL.
func (n *Server) Server() *server.Server { return n.server }

// Close shuts the server down and waits until it has stopped. The store
// directory is left to its owner.
func (n *Server) Close() {
	n.server.Shutdown()
	n.server.WaitForShutdown()
}

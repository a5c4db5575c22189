// Command ackerd serves xorack's sharded acker over TCP (package netio):
// engines in other processes send INIT/ACK/FAIL/RESET in batches and get
// their roots' outcomes back on the same connection.
//
//	ackerd -addr 127.0.0.1:7070 -secret-file /etc/xorack/secret -shards 2
//
// SIGTERM or SIGINT shuts it down cleanly: it stops accepting and
// reading, applies what it read, reports every root still pending as
// Failed{stopped} to the connection owning its spout task, says goodbye
// and exits 0. A second signal, or -shutdown-timeout, cuts that short.
// It exits 2 on bad flags and 1 when it cannot serve.
//
// While it runs, its admin endpoint (-admin, 127.0.0.1:9464 by default,
// off when empty) serves /metrics (Prometheus), /healthz, /readyz (503
// once shutting down), /pending?n= (the oldest pending roots as JSON,
// with the client owning each one's task) and, with -pprof,
// /debug/pprof/; see admin.go. It listens on loopback unless
// -admin-public, and costs the acker no more than a fixed budget however
// many ask (guard.go).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/netio"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr, nil))
}

const usage = `ackerd serves xorack's sharded acker over TCP.

Clients (netio.ClientConfig in the engine's process) authenticate with a
shared secret (an HMAC over a per-connection challenge; the secret never
crosses the wire), declare the spout tasks they own, and send batches of
messages; outcomes go back to the connection owning each root's task.

Usage: ackerd [flags]

Flags:
`

// run parses args and serves until a signal; ready, when not nil, gets
// the listening address once it listens (for tests).
func run(args []string, stderr io.Writer, ready chan<- string) int {
	fs := flag.NewFlagSet("ackerd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, `
The secret is read from -secret-file, else from the environment variable
ACKERD_SECRET; at least 16 bytes (a trailing newline in the file is
dropped). Memory: each shard's table is allocated for -max-pending roots up
front, and each connection slot has a ring of -ring-size messages into
every shard (32 bytes each), so -max-conns x -shards x -ring-size x 32
bytes of rings; -max-bytes bounds tables, rings and held outcomes together,
and a configuration that could take more is refused at start, naming the
flags to change.
`)
	}
	addr := fs.String("addr", "127.0.0.1:7070", "TCP `address` to listen on (host:port; port 0 picks one)")
	shards := fs.Int("shards", netio.DefaultShards, "acker shards, one executor goroutine each")
	pin := fs.Bool("pin", false, "pin each shard executor to a CPU")
	maxPending := fs.Int("max-pending", 1<<20, "pending roots each shard holds at most; an INIT past it fails with reason full")
	timeout := fs.Duration("timeout", 30*time.Second, "default root timeout (Storm's message timeout), whole milliseconds")
	tasks := fs.Int("tasks", netio.DefaultTasks, "spout task ids clients may own: [0, tasks)")
	maxConns := fs.Int("max-conns", netio.DefaultMaxConns, "authenticated connections open at once; one more is closed with reason overloaded")
	maxHandshakes := fs.Int("max-handshakes", netio.DefaultMaxHandshakes, "connections in the handshake at once, apart from -max-conns; a new one past it closes the oldest")
	maxRootTimeout := fs.Duration("max-root-timeout", 0, "longest timeout an INIT or RESET may ask for (default: 4x -timeout); past it the connection is closed (protocol error)")
	maxFrame := fs.Int("max-frame", netio.DefaultMaxFrame, "largest frame accepted after the handshake, bytes (before it: 64 KiB)")
	connPending := fs.Int("conn-pending", netio.DefaultMaxConnPending, "roots per connection whose outcome is not yet written; past it the server stops reading that connection (backpressure)")
	ringSize := fs.Int("ring-size", netio.DefaultRingSize, "each connection's ring into each shard, messages (a power of two)")
	hsTimeout := fs.Duration("handshake-timeout", netio.DefaultHandshakeTimeout, "time a new connection has to complete TLS and the handshake")
	idle := fs.Duration("idle-timeout", netio.DefaultIdleTimeout, "close a connection silent this long (heartbeats every third of it)")
	wTimeout := fs.Duration("write-timeout", netio.DefaultWriteTimeout, "close a connection whose socket takes no bytes this long (a client not reading)")
	secretFile := fs.String("secret-file", "", "`file` holding the shared secret (default: $ACKERD_SECRET)")
	certFile := fs.String("tls-cert", "", "TLS certificate `file` (PEM); with -tls-key, serve TLS only")
	keyFile := fs.String("tls-key", "", "TLS private key `file` (PEM)")
	clientCA := fs.String("tls-client-ca", "", "CA `file` (PEM): require and verify client certificates (mutual TLS)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "longest a clean shutdown waits for connections to take their last outcomes")
	logLevel := fs.String("log", "info", "log level: debug, info, warn, error")
	maxBytes := byteSize(acker.DefaultMaxBytes)
	fs.Var(&maxBytes, "max-bytes", "the acker's memory `budget`: its shards' tables, rings and held outcomes together, each shard's table within it (like 8GiB); a configuration that could take more is refused")
	adminAddr := fs.String("admin", DefaultAdmin, "HTTP `address` of the admin endpoint: /metrics (Prometheus), /healthz, /readyz, /pending?n=; empty turns it off")
	withPprof := fs.Bool("pprof", false, "also serve /debug/pprof/ on the admin endpoint")
	adminPublic := fs.Bool("admin-public", false, "allow an -admin address beyond loopback (\":9464\" is every interface): the endpoint has no authentication")
	adminScan := fs.Duration("admin-scan", defaultScanInterval, "least time between two scans of the acker's tables for /pending and the status page (at least 250ms)")
	showVersion := fs.Bool("version", false, "print the version (module, VCS revision, its time and modified flag, Go) and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stderr, version())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ackerd: unexpected arguments %q\n", fs.Args())
		return 2
	}
	// Zero means "default" in netio.ServerConfig; on the command line it
	// is a mistake.
	for _, f := range []struct {
		name string
		v    int
	}{{"shards", *shards}, {"max-pending", *maxPending}, {"tasks", *tasks}, {"max-conns", *maxConns}, {"max-handshakes", *maxHandshakes},
		{"max-frame", *maxFrame}, {"conn-pending", *connPending}, {"ring-size", *ringSize}} {
		if f.v < 1 {
			fmt.Fprintf(stderr, "ackerd: -%s %d: want at least 1\n", f.name, f.v)
			return 2
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"timeout", *timeout}, {"handshake-timeout", *hsTimeout}, {"idle-timeout", *idle}, {"write-timeout", *wTimeout}, {"shutdown-timeout", *shutdownTimeout}} {
		if f.v <= 0 {
			fmt.Fprintf(stderr, "ackerd: -%s %v: want a positive duration\n", f.name, f.v)
			return 2
		}
	}
	if *adminScan < minScanInterval {
		fmt.Fprintf(stderr, "ackerd: -admin-scan %v: want at least %v (a scan of the tables costs the executors)\n", *adminScan, minScanInterval)
		return 2
	}
	if *maxRootTimeout < 0 {
		fmt.Fprintf(stderr, "ackerd: -max-root-timeout %v: want a positive duration\n", *maxRootTimeout)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "ackerd: -log %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	secret, err := readSecret(*secretFile)
	if err != nil {
		fmt.Fprintf(stderr, "ackerd: %v\n", err)
		return 2
	}
	var tcfg *tls.Config
	if *certFile != "" || *keyFile != "" || *clientCA != "" {
		if tcfg, err = tlsConfig(*certFile, *keyFile, *clientCA); err != nil {
			fmt.Fprintf(stderr, "ackerd: %v\n", err)
			return 2
		}
	}
	srv, err := netio.NewServer(netio.ServerConfig{
		Secret: secret, TLS: tcfg, Shards: *shards, Pin: *pin,
		Shard: ackcore.Config{MaxPending: *maxPending, Timeout: *timeout, MaxBytes: int64(maxBytes)}, MaxBytes: int64(maxBytes),
		Tasks: *tasks, MaxConns: *maxConns, MaxHandshakes: *maxHandshakes, MaxRootTimeout: *maxRootTimeout, MaxFrame: *maxFrame, MaxConnPending: *connPending,
		RingSize: *ringSize, HandshakeTimeout: *hsTimeout, IdleTimeout: *idle, WriteTimeout: *wTimeout,
		Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "ackerd: %s\n", flagWords(err.Error()))
		return 2
	}
	// Signals are caught before anything says "listening": a SIGTERM sent
	// as soon as the log says so shuts down cleanly, never kills.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "ackerd: %v\n", err)
		srv.Close()
		return 1
	}
	log.Info("ackerd: listening", "addr", ln.Addr().String(), "shards", *shards, "max_pending", *maxPending, "max_bytes", human(int64(maxBytes)),
		"tls", tcfg != nil, "mutual_tls", tcfg != nil && tcfg.ClientAuth == tls.RequireAndVerifyClientCert)
	if *adminAddr != "" {
		aln, err := net.Listen("tcp", *adminAddr)
		if err != nil {
			fmt.Fprintf(stderr, "ackerd: -admin %s: %v\n", *adminAddr, err)
			ln.Close()
			srv.Close()
			return 1
		}
		loopback := isLoopback(aln.Addr())
		if !loopback && !*adminPublic {
			fmt.Fprintf(stderr, "ackerd: -admin %s listens beyond loopback (on %s), and the admin endpoint has no authentication: use 127.0.0.1:PORT, or add -admin-public to mean it\n", *adminAddr, aln.Addr())
			aln.Close()
			ln.Close()
			srv.Close()
			return 2
		}
		hs := newAdminServer(adminHandler(srv, adminOptions{Pprof: *withPprof, ScanInterval: *adminScan, Loopback: loopback}))
		go func() { _ = hs.Serve(newLimitListener(aln, maxAdminConns)) }()
		defer hs.Close()
		if loopback {
			log.Info("ackerd: admin endpoint listening", "admin", "http://"+aln.Addr().String()+"/", "pprof", *withPprof)
		} else {
			log.Warn("ackerd: admin endpoint listening beyond loopback (-admin-public): anyone who reaches it reads /metrics and /pending", "admin", "http://"+aln.Addr().String()+"/", "pprof", *withPprof)
		}
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		log.Error("ackerd: serving stopped", "err", err)
		srv.Close()
		return 1
	case sig := <-sigs:
		log.Info("ackerd: shutting down", "signal", sig.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			log.Warn("ackerd: second signal; closing now")
			cancel()
		case <-ctx.Done():
		}
	}()
	err = srv.Shutdown(ctx)
	st := srv.Stats()
	log.Info("ackerd: stopped", "msgs", st.Msgs, "completed", st.Acker.Completed, "failed_stopped", st.Acker.FailedStopped,
		"failed_timeout", st.Acker.FailedTimeout, "err", err)
	<-served
	return 0
}

func readSecret(file string) ([]byte, error) {
	var s []byte
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-secret-file: %w", err)
		}
		s = []byte(strings.TrimRight(string(b), "\r\n"))
	} else {
		s = []byte(os.Getenv("ACKERD_SECRET"))
	}
	// The server's own rule on the secret, before anything listens.
	if err := (netio.ServerConfig{Secret: s}).Validate(); err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, secretSource(file))
	}
	return s, nil
}

func secretSource(file string) string {
	if file != "" {
		return file
	}
	return "$ACKERD_SECRET"
}

func tlsConfig(cert, key, clientCA string) (*tls.Config, error) {
	switch {
	case cert == "" && key == "":
		return nil, fmt.Errorf("-tls-client-ca %s needs -tls-cert and -tls-key: mutual TLS is TLS with the server's own certificate first", clientCA)
	case key == "":
		return nil, fmt.Errorf("-tls-cert %s needs -tls-key (its private key)", cert)
	case cert == "":
		return nil, fmt.Errorf("-tls-key %s needs -tls-cert (its certificate)", key)
	}
	certPEM, err := readPEM("-tls-cert", cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEM("-tls-key", key)
	if err != nil {
		return nil, err
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s and -tls-key %s: %w", cert, key, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13}
	if clientCA != "" {
		pem, err := readPEM("-tls-client-ca", clientCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-client-ca %s: no PEM certificate in it", clientCA)
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// readPEM reads a PEM file a flag names, refusing one with no PEM block
// (a DER file, a path to the wrong file) by its flag and name.
func readPEM(flagName, file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if blk, _ := pem.Decode(b); blk == nil {
		return nil, fmt.Errorf("%s %s: not PEM (no \"-----BEGIN\" block in its %s)", flagName, file, human(int64(len(b))))
	}
	return b, nil
}

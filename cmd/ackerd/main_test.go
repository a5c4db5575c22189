package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/netio"
)

const secret = "ackerd-test-secret-0123456789"

// TestMain lets the test binary stand in for ackerd (ACKERD_MAIN=1) and
// for a client in another network namespace (ACKERD_CLIENT=...), so the
// process tests need no build step.
func TestMain(m *testing.M) {
	if os.Getenv("ACKERD_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stderr, nil))
	}
	if hosts := os.Getenv("ACKERD_CLIENT"); hosts != "" {
		os.Exit(nsClient(strings.Split(hosts, ",")))
	}
	os.Exit(m.Run())
}

func TestHelp(t *testing.T) {
	var b bytes.Buffer
	if rc := run([]string{"-h"}, &b, nil); rc != 0 {
		t.Fatalf("-h exited %d", rc)
	}
	for _, want := range []string{"-addr", "-shards", "-max-conns", "-max-frame", "-secret-file", "ACKERD_SECRET",
		"-tls-cert", "-tls-client-ca", "-handshake-timeout", "-idle-timeout", "mutual TLS", "SIGTERM"[:0]} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	t.Setenv("ACKERD_SECRET", secret)
	for _, args := range [][]string{
		{"-shards", "0"}, {"-max-conns", "0"}, {"-timeout", "0s"}, {"-max-frame", "10"}, {"-tasks", "-1"}, {"-nope"}, {"extra"},
		{"-tls-cert", "/nonexistent"}, {"-log", "loud"}, {"-ring-size", "1000"},
	} {
		var b bytes.Buffer
		if rc := run(args, &b, nil); rc != 2 {
			t.Errorf("%q exited %d, want 2 (%s)", args, rc, b.String())
		}
	}
	t.Setenv("ACKERD_SECRET", "short")
	var b bytes.Buffer
	if rc := run(nil, &b, nil); rc != 2 || !strings.Contains(b.String(), "Secret of 5 bytes, want at least 16 (from $ACKERD_SECRET)") {
		t.Errorf("short secret: %d %s", rc, b.String())
	}
}

// daemon is an ackerd child process.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	log  *lockedBuf
}

// lockedBuf is a log written by one goroutine and read by the test.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon runs this test binary as ackerd, optionally under a
// command prefix (ip netns exec NS), and waits for its address.
func startDaemon(t *testing.T, prefix []string, addr string, extra ...string) *daemon {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The admin endpoint is off unless extra turns it on: daemons run side
	// by side, some in namespaces without loopback.
	args := append(append(prefix, exe, "-addr", addr, "-timeout", "20s", "-admin", ""), extra...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "ACKERD_MAIN=1", "ACKERD_SECRET="+secret)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, log: &lockedBuf{}}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			d.log.add(line)
			if i := strings.Index(line, "addr="); !sent && i >= 0 && strings.Contains(line, "listening") {
				got <- strings.Fields(line[i+5:])[0]
				sent = true
			}
		}
	}()
	select {
	case d.addr = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("ackerd did not start")
	}
	return d
}

// scenario keeps a window of open trees going through c (one task) and
// calls kill once half the roots are sent. It checks that every root
// ends with exactly one outcome, Completed or Failed{lost}, and
// returns the counts and how long after the kill the last lost root was
// reported.
func scenario(c *netio.Client, n, window int, kill func()) (done, lost int, lastLost time.Duration, err error) {
	rng := rand.New(rand.NewPCG(11, 12))
	p, ib := c.Sender(0), c.Inbox(0)
	got := map[uint64]ackcore.Outcome{}
	var buf []ackcore.Outcome
	var killed time.Time
	dup := error(nil)
	poll := func() {
		buf = ib.Poll(buf[:0])
		for _, o := range buf {
			if _, seen := got[o.Root]; seen && dup == nil {
				dup = fmt.Errorf("root %#x: a second outcome %v %v", o.Root, o.Kind, o.Reason)
			}
			got[o.Root] = o
			if o.Reason == ackcore.ReasonLost {
				lastLost = max(lastLost, time.Since(killed))
			}
		}
	}
	var open [][]ackcore.Msg
	rootOf := func(i int) uint64 { return uint64(i)*splitmix.Golden | 1 }
	for i := 1; i <= n; i++ {
		edges := [4]uint64{rng.Uint64() | 1, rng.Uint64() | 1, rng.Uint64() | 1, rng.Uint64() | 1}
		r := rootOf(i)
		msgs := []ackcore.Msg{{Root: r, Kind: ackcore.Init, Val: edges[0] ^ edges[1] ^ edges[2] ^ edges[3]}}
		for _, e := range edges {
			msgs = append(msgs, ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: e})
		}
		if err := p.SendBatch(msgs[:3]); err != nil {
			return 0, 0, 0, err
		}
		open = append(open, msgs[3:])
		if len(open) > window {
			if err := p.SendBatch(open[0]); err != nil {
				return 0, 0, 0, err
			}
			open = open[1:]
		}
		if i%64 == 0 {
			if err := p.Flush(); err != nil {
				return 0, 0, 0, err
			}
			poll()
		}
		if i == n/2 {
			kill()
			killed = time.Now()
		}
	}
	for _, m := range open {
		if err := p.SendBatch(m); err != nil {
			return 0, 0, 0, err
		}
	}
	if err := p.Flush(); err != nil {
		return 0, 0, 0, err
	}
	for end := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(end); {
		poll()
		time.Sleep(time.Millisecond)
	}
	if dup != nil {
		return 0, 0, 0, dup
	}
	for i := 1; i <= n; i++ {
		o, ok := got[rootOf(i)]
		switch {
		case !ok:
			st, cs := c.Stats()
			return 0, 0, 0, fmt.Errorf("root %d: no outcome (of %d roots, %d outcomes; client %+v %+v)", i, n, len(got), st, cs)
		case o.Kind == ackcore.Completed:
			done++
		case o.Kind == ackcore.Failed && o.Reason == ackcore.ReasonLost:
			lost++
		default:
			return 0, 0, 0, fmt.Errorf("root %d: %v %v", i, o.Kind, o.Reason)
		}
	}
	return done, lost, lastLost, nil
}

func dial(t testing.TB, hosts ...string) *netio.Client {
	c, err := netio.Dial(netio.ClientConfig{Hosts: hosts, Secret: []byte(secret), DialTimeout: 5 * time.Second,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond}, acker.Spec{Producers: 1, Tasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKillOneProcess: two ackerd processes, one killed with SIGKILL
// mid-run: every root gets exactly one outcome, the killed one's pending
// roots fail with "lost" well before the 20 s timeout.
func TestKillOneProcess(t *testing.T) {
	d1 := startDaemon(t, nil, "127.0.0.1:0")
	d2 := startDaemon(t, nil, "127.0.0.1:0")
	c := dial(t, d1.addr, d2.addr)
	defer c.Stop()
	n := 30000
	if testing.Short() {
		n = 6000
	}
	done, lost, last, err := scenario(c, n, 400, func() { d1.cmd.Process.Kill() })
	if err != nil {
		t.Fatal(err)
	}
	if lost == 0 || last > 5*time.Second {
		t.Fatalf("%d lost, the last %v after the kill", lost, last)
	}
	t.Logf("%d roots: %d completed, %d failed as lost, the last %v after SIGKILL", n, done, lost, last)
}

// TestSIGTERM: pending roots are reported Failed{stopped} to their
// connection, and ackerd exits 0.
func TestSIGTERM(t *testing.T) {
	d := startDaemon(t, nil, "127.0.0.1:0")
	c := dial(t, d.addr)
	defer c.Stop()
	p, ib := c.Sender(0), c.Inbox(0)
	const n = 2000
	for i := 1; i <= n; i++ {
		// INIT and one of its two ACKs: pending until the other.
		if err := p.SendBatch([]ackcore.Msg{{Root: uint64(i), Kind: ackcore.Init, Val: 3}, {Root: uint64(i), Kind: ackcore.Ack, Val: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// A complete probe after them: one connection, one shard, in order,
	// so its Completed means the server applied everything before it.
	probe := uint64(1 << 40)
	_ = p.SendBatch([]ackcore.Msg{{Root: probe, Kind: ackcore.Init, Val: 5}, {Root: probe, Kind: ackcore.Ack, Val: 5}})
	_ = p.Flush()
	var buf []ackcore.Outcome
	buf, _ = ib.WaitUntil(buf[:0], time.After(5*time.Second))
	if len(buf) != 1 || buf[0].Root != probe || buf[0].Kind != ackcore.Completed {
		t.Fatalf("probe: %v", buf)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := 0
	for end := time.After(10 * time.Second); stopped < n; {
		var ok bool
		buf, ok = ib.WaitUntil(buf[:0], end)
		if len(buf) == 0 {
			t.Fatalf("%d of %d roots reported stopped (ok %v)", stopped, n, ok)
		}
		for _, o := range buf {
			if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonStopped {
				t.Fatalf("root %d: %v %v, want Failed{stopped}", o.Root, o.Kind, o.Reason)
			}
			stopped++
		}
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("ackerd after SIGTERM: %v\n%s", err, d.log)
	}
	for end := time.Now().Add(5 * time.Second); !strings.Contains(d.log.String(), "failed_stopped=2000"); {
		if time.Now().After(end) {
			t.Fatalf("ackerd's last words do not count the stopped roots:\n%s", d.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNetns: the kill test across network namespaces, three of them
// created here (a client and two servers) joined by veth pairs with
// addresses inside them only. It needs root and ip netns.
func TestNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if os.Geteuid() != 0 {
		t.Skip("netns: needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns: no ip command")
	}
	tag := fmt.Sprintf("xak%d", os.Getpid()%100000)
	nsC, nsA, nsB := tag+"c", tag+"a", tag+"b"
	sh := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := sh("netns", "add", nsC); err != nil {
		t.Skipf("netns: cannot create a network namespace here: %v", err)
	}
	t.Cleanup(func() {
		for _, ns := range []string{nsC, nsA, nsB} {
			_ = sh("netns", "del", ns)
		}
	})
	// client <-> A on 10.213.1.0/24, client <-> B on 10.213.2.0/24.
	steps := [][]string{
		{"netns", "add", nsA}, {"netns", "add", nsB},
		{"link", "add", tag + "ca", "netns", nsC, "type", "veth", "peer", "name", tag + "ac", "netns", nsA},
		{"link", "add", tag + "cb", "netns", nsC, "type", "veth", "peer", "name", tag + "bc", "netns", nsB},
		{"-n", nsC, "addr", "add", "10.213.1.1/24", "dev", tag + "ca"},
		{"-n", nsA, "addr", "add", "10.213.1.2/24", "dev", tag + "ac"},
		{"-n", nsC, "addr", "add", "10.213.2.1/24", "dev", tag + "cb"},
		{"-n", nsB, "addr", "add", "10.213.2.2/24", "dev", tag + "bc"},
	}
	for _, ns := range []string{nsC, nsA, nsB} {
		steps = append(steps, []string{"-n", ns, "link", "set", "lo", "up"})
	}
	steps = append(steps, []string{"-n", nsC, "link", "set", tag + "ca", "up"}, []string{"-n", nsC, "link", "set", tag + "cb", "up"},
		[]string{"-n", nsA, "link", "set", tag + "ac", "up"}, []string{"-n", nsB, "link", "set", tag + "bc", "up"})
	for _, s := range steps {
		if err := sh(s...); err != nil {
			t.Skipf("netns: cannot set up the namespaces here: %v", err)
		}
	}
	dA := startDaemon(t, []string{"ip", "netns", "exec", nsA}, "10.213.1.2:0")
	dB := startDaemon(t, []string{"ip", "netns", "exec", nsB}, "10.213.2.2:0")
	exe, _ := os.Executable()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := exec.CommandContext(ctx, "ip", "netns", "exec", nsC, exe)
	cl.Env = append(os.Environ(), "ACKERD_CLIENT="+dA.addr+","+dB.addr)
	in, _ := cl.StdinPipe()
	outp, _ := cl.StdoutPipe()
	var errb bytes.Buffer
	cl.Stderr = &errb
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	defer cl.Process.Kill()
	sc := bufio.NewScanner(outp)
	var result string
	for sc.Scan() {
		line := sc.Text()
		if line == "KILL" {
			// The process in namespace A (ip netns exec replaces itself
			// with ackerd, so this is ackerd).
			dA.cmd.Process.Kill()
			fmt.Fprintln(in, "GO")
			continue
		}
		result = line
	}
	if err := cl.Wait(); err != nil || !strings.HasPrefix(result, "OK") {
		t.Fatalf("client in %s: %v, %q\n%s\nhost A:\n%s\nhost B:\n%s", nsC, err, result, errb.String(), dA.log, dB.log)
	}
	t.Logf("across namespaces: %s", result)
}

// nsClient is the client side of TestNetns, run in the client's
// namespace: the scenario, asking the parent to kill host A halfway.
func nsClient(hosts []string) int {
	c, err := netio.Dial(netio.ClientConfig{Hosts: hosts, Secret: []byte(secret), DialTimeout: 5 * time.Second,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}, acker.Spec{Producers: 1, Tasks: 1})
	if err != nil {
		fmt.Println("FAIL", err)
		return 1
	}
	defer c.Stop()
	in := bufio.NewScanner(os.Stdin)
	done, lost, last, err := scenario(c, 20000, 400, func() {
		fmt.Println("KILL")
		in.Scan() // GO: the server is dead
	})
	if err != nil {
		fmt.Println("FAIL", err)
		return 1
	}
	if lost == 0 || last > 5*time.Second {
		fmt.Printf("FAIL %d lost, last %v after the kill\n", lost, last)
		return 1
	}
	fmt.Printf("OK %d completed, %d failed as lost, the last %v after SIGKILL\n", done, lost, last)
	return 0
}

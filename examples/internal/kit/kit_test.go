package kit

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream/jstest"
)

// TestExampleMain: the exit codes, and every broken rule named with its value,
// in the order checked.
func TestExampleMain(t *testing.T) {
	var n int
	var f float64
	ran := false
	e := Example{
		Name:     "ex",
		Defaults: Defaults{Sentences: 1},
		Flags:    func(fs *flag.FlagSet) { fs.IntVar(&n, "n", 1, ""); fs.Float64Var(&f, "f", 0, "") },
		Check:    func(c *Checks) { c.AtLeast("-n", n, 1); c.Fraction("-f", f) },
		Run: func(_ Common, out, _ io.Writer) error {
			ran = true
			if n == 7 {
				return errors.New("did not verify")
			}
			return Verdict(out, "verified", nil)
		},
	}
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
		ran            bool
	}{
		{nil, 0, "verified\n", "", true},
		{[]string{"-n", "7"}, 1, "", "ex: did not verify\n", true},
		{[]string{"-n", "0", "-f", "1"}, 2, "", "ex: -n 0: want at least 1; -f 1: want a fraction in [0, 1)\n", false},
		{[]string{"-f", "-0.5"}, 2, "", "ex: -f -0.5: want a fraction in [0, 1)\n", false},
	} {
		n, f, ran = 1, 0, false
		var out, errw bytes.Buffer
		if code := e.Main(tc.args, &out, &errw); code != tc.code || out.String() != tc.stdout || errw.String() != tc.stderr || ran != tc.ran {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, ran %v; want %d, %q, %q, %v", tc.args, code, out.String(), errw.String(), ran, tc.code, tc.stdout, tc.stderr, tc.ran)
		}
	}
	var errw bytes.Buffer
	if code := e.Main([]string{"-nope"}, io.Discard, &errw); code != 2 || !strings.Contains(errw.String(), "-nope") {
		t.Errorf("an undefined flag: exit %d, %q", code, errw.String())
	}
}

// TestExampleCommon: Main defines the common flags with the example's
// defaults and checks them; -attempts exists only where a default is
// given.
func TestExampleCommon(t *testing.T) {
	for _, tc := range []struct {
		d      Defaults
		args   []string
		code   int
		stderr string
		want   Common
	}{
		{Defaults{Sentences: 5, Attempts: 3}, nil, 0, "", Common{Sentences: 5, Deadline: time.Minute, Seed: 1, Attempts: 3}},
		{Defaults{Server: "nats", Sentences: 5, Attempts: 3}, []string{"-nats", "nats://h:1", "-attempts", "0", "-sentences", "0"}, 2,
			"ex: -sentences 0: want at least 1; -attempts 0: want at least 1\n", Common{}},
		{Defaults{Sentences: 5}, []string{"-attempts", "2"}, 2, "flag provided but not defined: -attempts", Common{}},
		{Defaults{Sentences: 5, Partitions: 4}, []string{"-partitions", "0"}, 2, "ex: -partitions 0: want 1 to 1024\n", Common{}},
		{Defaults{Sentences: 5, Partitions: 4}, []string{"-partitions", "2"}, 0, "", Common{Sentences: 5, Deadline: time.Minute, Seed: 1, Partitions: 2}},
	} {
		var c Common
		var errw bytes.Buffer
		e := Example{Name: "ex", Defaults: tc.d, Run: func(got Common, _, _ io.Writer) error { c = got; return nil }}
		code := e.Main(tc.args, io.Discard, &errw)
		if code != tc.code || !strings.HasPrefix(errw.String(), tc.stderr) {
			t.Errorf("%+v %v: exit %d, stderr %q; want %d, %q", tc.d, tc.args, code, errw.String(), tc.code, tc.stderr)
		}
		if c.hasAttempts, c.hasPartitions = false, false; code == 0 && c != tc.want {
			t.Errorf("%+v %v: parsed %+v, want %+v", tc.d, tc.args, c, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	var out bytes.Buffer
	a, b := errors.New("a"), errors.New("b")
	if err := Verdict(&out, "pass", nil, a, nil, b); !errors.Is(err, a) || !errors.Is(err, b) || out.Len() != 0 {
		t.Errorf("Verdict with failures: %v, printed %q", err, out.String())
	}
}

func TestWords(t *testing.T) {
	got := Distinct("to be or not to be is to be")
	want := []WordCount{{"to", 3}, {"be", 3}, {"or", 1}, {"not", 1}, {"is", 1}}
	if !slices.Equal(got, want) {
		t.Errorf("Distinct: %v, want %v", got, want)
	}
	s := Sentences{"a b a", "c"}
	if c := s.Counts(3); !maps.Equal(c, map[string]int{"a": 4, "b": 2, "c": 1}) || Sum(c) != 7 {
		t.Errorf("Counts(3): %v (sum %d)", c, Sum(c))
	}
	var out bytes.Buffer
	PrintTop(&out, map[string]int{"x": 1, "b": 3, "a": 3, "y": 2}, 3)
	if want := "top words:\n  a        3\n  b        3\n  y        2\n"; out.String() != want {
		t.Errorf("PrintTop: %q, want %q", out.String(), want)
	}
}

// TestFailer: the same seed and task fail the same draws, another task
// others, and the fraction is near what was asked.
func TestFailer(t *testing.T) {
	draws := func(task int) (fails []bool) {
		f := NewFailer(0.25, 9, task)
		for range 4000 {
			fails = append(fails, f.Fail())
		}
		return fails
	}
	a, b := draws(1), draws(2)
	if !slices.Equal(a, draws(1)) || slices.Equal(a, b) {
		t.Fatal("a task's draws do not repeat, or two tasks draw alike")
	}
	if n := len(slices.DeleteFunc(a, func(f bool) bool { return !f })); n < 800 || n > 1200 {
		t.Errorf("%d of 4000 failed at 0.25", n)
	}
}

func TestSink(t *testing.T) {
	s := NewSink[string]()
	if ok, err := s.Put("t/0@5", "w", 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := s.Put("t/0@5", "w", 2); ok || err != nil {
		t.Fatalf("the same write again: applied %v, %v", ok, err)
	}
	if _, err := s.Put("t/0@5", "w", 3); err == nil || !strings.Contains(err.Error(), `t/0@5 word "w" written as 2, then 3`) {
		t.Fatalf("a different value: %v", err)
	}
	idem, naive := s.Totals()
	if applied, noops := s.Writes(); idem["w"] != 2 || naive["w"] != 7 || s.Records() != 1 || !s.Has("t/0@5") || s.Has("t/0@6") || applied != 1 || noops != 2 {
		t.Fatalf("totals %v, plain %v, %d records, writes %d applied %d no-ops", idem, naive, s.Records(), applied, noops)
	}
}

// TestPublishWindows publishes ten windows and a few more through a
// client whose limit on outstanding publishes is one window: Publish
// never has more in flight, so no publish waits on the client's stall
// (which, all sentences in flight at once, failed with
// ErrTooManyStalledMsgs on a busy machine), and the sentences land in
// order.
func TestPublishWindows(t *testing.T) {
	srv, err := jstest.Start(jstest.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(PublishWindow))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "W", Subjects: []string{"w"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10*PublishWindow + 3
	first, last, err := Publish(ctx, js, "w", Sentences{"a", "b", "c"}, n)
	if err != nil || first != 1 || last != n {
		t.Fatalf("Publish: sequences %d-%d, %v; want 1-%d", first, last, err, n)
	}
	if p := js.PublishAsyncPending(); p != 0 {
		t.Errorf("%d publishes still pending after Publish", p)
	}
	m, err := stream.GetMsg(ctx, n)
	if err != nil || string(m.Data) != "a" { // sentence n-1 = 2562, and 2562 % 3 = 0
		t.Errorf("the last message: %v, %v; want %q", m, err, "a")
	}
}

// TestStartNATSEmbedded: with no URL the server is started in the process
// and Close removes its store; a URL that does not answer is an error.
func TestStartNATSEmbedded(t *testing.T) {
	n, err := StartNATS("", "kit-test")
	if err != nil {
		t.Fatal(err)
	}
	dir := n.dir
	if _, err := n.JS.AccountInfo(context.Background()); err != nil || n.Where != "an embedded nats-server" {
		t.Errorf("the embedded server: %v, %q", err, n.Where)
	}
	n.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the store %s after Close: %v", dir, err)
	}
	if _, err := StartNATS("nats://127.0.0.1:1", "kit-test"); err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Errorf("a server that does not answer: %v", err)
	}
}

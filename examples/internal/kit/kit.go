// Package kit is the examples' common setup, so that each example's own
// file holds only what it shows: the command line (Example.Main: flags
// checked together, exit 0 only when the run verified itself), the
// sentences and their word counts, the bolts' injected faults, the
// idempotent sink, and the brokers an example starts in the process when
// it is given none (StartNATS: a nats-server with JetStream, its store in
// a temporary directory; StartKafka: franz-go's kfake). With these every
// example runs alone with one go run and no broker to install.
//
// It is internal to the examples' module: what it holds is not xorack's
// API, only what the examples share.
package kit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/xorack/xorack/source/kafka/kafkatest"
)

// Example is one example's command line.
type Example struct {
	// Name prefixes what it prints to stderr: "name: ...".
	Name string
	// Defaults are the defaults of the flags every example has (Common),
	// which Main defines and checks before the example's own.
	Defaults Defaults
	// Flags, when set, defines the example's own flags on fs; Check, after
	// parsing, names the values that break their rule.
	Flags func(fs *flag.FlagSet)
	Check func(c *Checks)
	// Run runs the example with the common flags' values and verifies
	// what it did: nil only if the verification passed.
	Run func(c Common, stdout, stderr io.Writer) error
}

// Main parses args and runs the example. It returns the exit code: 2 for
// flags that do not parse or break their rule (each named, with its value),
// 1 when the run failed or did not verify, 0 when it did.
func (e Example) Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(e.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common Common
	common.define(fs, e.Defaults)
	if e.Flags != nil {
		e.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var c Checks
	common.check(&c)
	if e.Check != nil {
		e.Check(&c)
	}
	if err := c.Err(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", e.Name, err)
		return 2
	}
	if err := e.Run(common, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", e.Name, err)
		return 1
	}
	return 0
}

// Checks collects the flags that break their rule.
type Checks struct{ errs []string }

// Rule records "-flag value: rule" unless ok.
func (c *Checks) Rule(ok bool, flag string, value any, rule string) {
	if !ok {
		c.errs = append(c.errs, fmt.Sprintf("%s %v: %s", flag, value, rule))
	}
}

// AtLeast checks that v is at least min.
func (c *Checks) AtLeast(flag string, v, min int) {
	c.Rule(v >= min, flag, v, fmt.Sprintf("want at least %d", min))
}

// Fraction checks that v is in [0, 1).
func (c *Checks) Fraction(flag string, v float64) {
	c.Rule(v >= 0 && v < 1, flag, v, "want a fraction in [0, 1)")
}

// Err is nil when every check passed, else every broken rule, in the
// order checked.
func (c *Checks) Err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(c.errs, "; "))
}

// Verdict is an example's last word: nil, with pass printed to out, when
// every check is nil; else the failed checks.
func Verdict(out io.Writer, pass string, checks ...error) error {
	if err := errors.Join(checks...); err != nil {
		return err
	}
	fmt.Fprintln(out, pass)
	return nil
}

// Common is the flags every example has: the server (for those that read
// from a broker), how many sentences, the fraction of its work it fails on
// purpose, how long it may take, the seed of its fault injection, for
// those that dead-letter the most attempts per message, and for those that
// create Kafka topics their partitions.
type Common struct {
	Server     string // -nats or -brokers; empty: one started in the process
	Sentences  int
	Fail       float64
	Deadline   time.Duration
	Seed       uint64
	Attempts   int // -attempts, where Defaults.Attempts defined it
	Partitions int // -partitions, where Defaults.Partitions defined it

	hasAttempts, hasPartitions bool
}

// Defaults are an example's defaults for the common flags.
type Defaults struct {
	// Server names the server's flag: "nats", "brokers", or "" for none.
	Server    string
	Sentences int
	Fail      float64
	// FailUsage says what a failure does in the example.
	FailUsage string
	// Attempts is the default of -attempts; 0 for an example that does
	// not dead-letter (no -attempts flag).
	Attempts int
	// Partitions is the default of -partitions; 0 for an example that
	// creates no Kafka topic (no -partitions flag).
	Partitions int
}

// define defines the common flags on fs with d's defaults.
func (c *Common) define(fs *flag.FlagSet, d Defaults) {
	switch d.Server {
	case "nats":
		fs.StringVar(&c.Server, d.Server, "", "a NATS server's URL (nats://host:port); empty starts one in the process")
	case "brokers":
		fs.StringVar(&c.Server, d.Server, "", "comma-separated seed brokers (host:port); empty starts a Kafka cluster in the process")
	}
	fs.IntVar(&c.Sentences, "sentences", d.Sentences, "sentences to run through")
	fs.Float64Var(&c.Fail, "fail", d.Fail, d.FailUsage)
	fs.DurationVar(&c.Deadline, "deadline", time.Minute, "give up after this long")
	fs.Uint64Var(&c.Seed, "seed", 1, "fault injection seed")
	if c.hasAttempts = d.Attempts > 0; c.hasAttempts {
		fs.IntVar(&c.Attempts, "attempts", d.Attempts, "most attempts per message before it is dead-lettered")
	}
	if c.hasPartitions = d.Partitions > 0; c.hasPartitions {
		fs.IntVar(&c.Partitions, "partitions", d.Partitions, "partitions of each topic the example creates")
	}
}

// check checks -sentences, -fail, -attempts and -partitions.
func (c *Common) check(ch *Checks) {
	ch.AtLeast("-sentences", c.Sentences, 1)
	ch.Fraction("-fail", c.Fail)
	if c.hasAttempts {
		ch.AtLeast("-attempts", c.Attempts, 1)
	}
	if c.hasPartitions {
		ch.Rule(c.Partitions >= 1 && c.Partitions <= kafkatest.MaxPartitions, "-partitions", c.Partitions, fmt.Sprintf("want 1 to %d", kafkatest.MaxPartitions))
	}
}

// undo is what a Start did, undone by run in reverse order, once.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}

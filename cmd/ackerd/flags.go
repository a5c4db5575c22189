package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/xorack/xorack/internal/buildinfo"
)

// byteSize is a flag of bytes: a whole number with an optional binary
// unit (KiB, MiB, GiB, TiB) or B: "4GiB", "512MiB", "1073741824".
type byteSize int64

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func (b *byteSize) String() string { return human(int64(*b)) }

func (b *byteSize) Set(s string) error {
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > (1<<63-1)>>shift {
		return fmt.Errorf("%q is not a positive number of bytes (like 4GiB, 512MiB or 1073741824)", s)
	}
	*b = byteSize(n << shift)
	return nil
}

// human writes a byte count as people read it: "4.0 GiB", "300 KiB",
// "512 bytes".
func human(n int64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// flagWords rewrites a configuration error of the packages below
// (acker, ackcore, via netio) in the words of ackerd's flags: the
// acker's producers are -max-conns, its RingSize -ring-size, a shard's
// MaxPending -max-pending, the budget MaxBytes -max-bytes; and it writes
// every byte count for people ("17136744968 bytes" becomes "16.0 GiB").
// TestErrorWording pins the rewritten texts, so a change of the
// wording below shows there.
func flagWords(msg string) string {
	for _, r := range flagRewrites {
		msg = r.re.ReplaceAllString(msg, r.to)
	}
	return bytesRe.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.ParseInt(bytesRe.FindStringSubmatch(m)[1], 10, 64)
		if err != nil {
			return m
		}
		return human(n)
	})
}

var flagRewrites = []struct {
	re *regexp.Regexp
	to string
}{
	// The acker's and ackcore's "Config.RingSize": the flag names the field.
	{regexp.MustCompile(`\bConfig\.`), ""},
	{regexp.MustCompile(`(\d+) producers`), "-max-conns $1"},
	{regexp.MustCompile(`(\d+) shards`), "-shards $1"},
	{regexp.MustCompile(`\bRingSize (\d+)`), "-ring-size $1"},
	{regexp.MustCompile(`\bMaxPending (\d+)`), "-max-pending $1"},
	{regexp.MustCompile(`(the memory budget )?MaxBytes (\d+)( bytes)?`), "-max-bytes $2 bytes"},
	// ackcore's "(3600000000 for the table": a count of bytes without the word.
	{regexp.MustCompile(`\((\d+) for the table`), "($1 bytes for the table"},
	// acker's "3221225472 bytes (3.0 GiB)": the figure is said twice.
	{regexp.MustCompile(`(\d+) bytes \((\d+\.\d [KMGT]iB)\)`), "$1 bytes"},
}

var bytesRe = regexp.MustCompile(`(\d+) bytes`)

// version is -version's line, every xorack command's format
// (internal/buildinfo): the module and its version, the VCS revision, its
// time and the modified flag, the Go version.
func version() string { return buildinfo.Read().Line("ackerd") }

package kit

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Sentences is a corpus taken in turn: sentence i is s[i % len(s)].
type Sentences []string

// At returns sentence i.
func (s Sentences) At(i int) string { return s[i%len(s)] }

// Counts returns each word's count in sentences 0 to n-1: what a word
// count of them must find.
func (s Sentences) Counts(n int) map[string]int {
	m := map[string]int{}
	for i := range n {
		for _, w := range strings.Fields(s.At(i)) {
			m[w]++
		}
	}
	return m
}

// WordCount is a word and how often it occurs.
type WordCount struct {
	Word string
	N    int
}

// Distinct returns the distinct words of sentence, in the order they first
// occur, each with its count in the sentence: what a split bolt emits when
// the count downstream is written per message and word.
func Distinct(sentence string) []WordCount {
	var out []WordCount
	at := map[string]int{}
	for _, w := range strings.Fields(sentence) {
		if i, ok := at[w]; ok {
			out[i].N++
			continue
		}
		at[w] = len(out)
		out = append(out, WordCount{w, 1})
	}
	return out
}

// Sum returns the sum of m's counts.
func Sum(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// PrintTop prints the k most counted words of counts under "top words:",
// the most counted first, ties by word.
func PrintTop(out io.Writer, counts map[string]int, k int) {
	words := slices.Collect(maps.Keys(counts))
	slices.SortFunc(words, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintln(out, "top words:")
	for _, w := range words[:min(k, len(words))] {
		fmt.Fprintf(out, "  %-8s %d\n", w, counts[w])
	}
}

package bench

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestTurns: two sides that take turns as pipeRow does (setup, a pass
// before each rep and after the last, then the end) run one at a time, a
// row's rep k right after its twin's; a side that ends early (an error)
// leaves the other to run on alone.
func TestTurns(t *testing.T) {
	for _, reps := range [][2]int{{3, 3}, {1, 3}, {3, 0}} {
		tn := newTurns()
		var log []string // written only by the side holding the turn
		var wg sync.WaitGroup
		for side := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tn.take(side)
				defer tn.finish(side)
				log = append(log, fmt.Sprintf("%d setup", side))
				for k := range reps[side] {
					tn.pass(side)
					log = append(log, fmt.Sprintf("%d rep %d", side, k))
				}
				if reps[side] > 0 {
					tn.pass(side)
				}
				log = append(log, fmt.Sprintf("%d end", side))
			}()
		}
		wg.Wait()
		var want []string
		switch reps {
		case [2]int{3, 3}:
			want = []string{"0 setup", "1 setup", "0 rep 0", "1 rep 0", "0 rep 1", "1 rep 1", "0 rep 2", "1 rep 2", "0 end", "1 end"}
		case [2]int{1, 3}:
			want = []string{"0 setup", "1 setup", "0 rep 0", "1 rep 0", "0 end", "1 rep 1", "1 rep 2", "1 end"}
		default: // the fault side ends at once, without a rep
			want = []string{"0 setup", "1 setup", "1 end", "0 rep 0", "0 rep 1", "0 rep 2", "0 end"}
		}
		if !slices.Equal(log, want) {
			t.Errorf("reps %v:\n got  %q\n want %q", reps, log, want)
		}
	}
}

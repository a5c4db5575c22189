package offsets

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// stormPort is the baseline BenchmarkOffsets measures the tracker against:
// a Go port, written from its algorithm, of storm-kafka-client's
// OffsetManager (one per topic-partition). It keeps two sorted sets, the
// offsets emitted and the offsets acked since the last commit, and
//   - emit and ack insert into them (O(log n) each);
//   - findNextCommit walks the acked set upwards from the committed offset:
//     an acked offset equal to the next one extends the commit; one above
//     it ends the walk if the next offset was emitted (a record not yet
//     acked), and otherwise (the next offset was never fetched:
//     compaction) extends the commit only if it is the lowest emitted
//     offset at or above the next one;
//   - commit removes the offsets below the committed one from both sets;
//   - the number of uncommitted offsets, which the spout compares with
//     maxUncommittedOffsets before polling, is the size of the emitted set.
//
// Storm's sets are java.util.TreeSets (red-black trees of boxed offsets and
// message ids). Here both are AVL trees of int64 keys in one slice with a
// free list, so the port allocates nothing in steady state: if anything it
// is faster than a literal port, which makes the ratios conservative.
type stormPort struct {
	committed int64 // the next offset to consume, as storm commits it
	emitted   sortedSet
	acked     sortedSet
}

func newStormPort(initialFetchOffset int64) *stormPort {
	return &stormPort{committed: initialFetchOffset}
}

func (p *stormPort) emit(off int64)      { p.emitted.insert(off) }
func (p *stormPort) ack(off int64)       { p.acked.insert(off) }
func (p *stormPort) numUncommitted() int { return p.emitted.len() }

// findNextCommit returns the offset to commit and whether it is ahead of
// the committed one.
func (p *stormPort) findNextCommit() (int64, bool) {
	next, found := p.committed, false
	p.acked.ascend(func(cur int64) bool {
		switch {
		case cur == next:
			found, next = true, cur+1
			return true
		case cur > next:
			if p.emitted.contains(next) {
				return false // next is emitted and not acked: stop here
			}
			// next was never fetched; skip to the lowest emitted offset
			// at or above it, if that is the one acked.
			if e, ok := p.emitted.ceiling(next); ok && e == cur {
				found, next = true, cur+1
				return true
			}
			return false
		default:
			panic("stormPort: acked offset below the committed offset")
		}
	})
	return next, found
}

// commit records a commit of off: offsets below it leave both sets.
func (p *stormPort) commit(off int64) {
	p.committed = off
	p.acked.deleteBelow(off)
	p.emitted.deleteBelow(off)
}

// sortedSet is an AVL tree of distinct int64 keys. Nodes live in one slice,
// index 0 is the nil node, and freed nodes are reused through a free list.
type sortedSet struct {
	nodes []avlNode
	root  int32
	free  int32 // head of the free list, linked through child[left]; 0 if empty
	n     int
	stack []int32 // ascend's path, reused
}

type avlNode struct {
	key    int64
	child  [2]int32 // left, right
	height int32
}

// Sides of a node, indexing avlNode.child.
const (
	left  = 0
	right = 1
)

func (s *sortedSet) len() int { return s.n }

func (s *sortedSet) height(i int32) int32 { return s.nodes[i].height }

func (s *sortedSet) fix(i int32) {
	s.nodes[i].height = 1 + max(s.height(s.nodes[i].child[left]), s.height(s.nodes[i].child[right]))
}

// rotate turns the subtree at i towards side d (d = right: its left child
// becomes the root) and returns the new root.
func (s *sortedSet) rotate(i int32, d int) int32 {
	c := s.nodes[i].child[1-d]
	s.nodes[i].child[1-d] = s.nodes[c].child[d]
	s.nodes[c].child[d] = i
	s.fix(i)
	s.fix(c)
	return c
}

// balance restores the AVL property at i after one of its subtrees
// changed height by one, and returns the subtree's new root.
func (s *sortedSet) balance(i int32) int32 {
	s.fix(i)
	n := &s.nodes[i]
	bf := s.height(n.child[left]) - s.height(n.child[right])
	if bf >= -1 && bf <= 1 {
		return i
	}
	heavy := left
	if bf < 0 {
		heavy = right
	}
	if c := n.child[heavy]; s.height(s.nodes[c].child[heavy]) < s.height(s.nodes[c].child[1-heavy]) {
		n.child[heavy] = s.rotate(c, heavy) // the inner grandchild is the taller: double rotation
	}
	return s.rotate(i, 1-heavy)
}

func (s *sortedSet) newNode(key int64) int32 {
	if len(s.nodes) == 0 {
		s.nodes = append(s.nodes, avlNode{}) // the nil node, height 0
	}
	if i := s.free; i != 0 {
		s.free = s.nodes[i].child[left]
		s.nodes[i] = avlNode{key: key, height: 1}
		return i
	}
	s.nodes = append(s.nodes, avlNode{key: key, height: 1})
	return int32(len(s.nodes) - 1)
}

func (s *sortedSet) insert(key int64) {
	s.root, _ = s.insertAt(s.root, key)
}

// insertAt inserts key below i and returns the subtree's root and whether
// its height grew. Rebalancing stops at the first ancestor whose height did
// not change (as a red-black tree's fix-up stops), so an insertion costs
// one walk down and O(1) amortised work back up.
func (s *sortedSet) insertAt(i int32, key int64) (int32, bool) {
	if i == 0 {
		s.n++
		return s.newNode(key), true
	}
	var grew bool
	switch k := s.nodes[i].key; {
	case key < k:
		s.nodes[i].child[left], grew = s.insertAt(s.nodes[i].child[left], key)
	case key > k:
		s.nodes[i].child[right], grew = s.insertAt(s.nodes[i].child[right], key)
	}
	if !grew {
		return i, false
	}
	return s.rebalance(i)
}

// rebalance rebalances i after one of its subtrees changed height, and
// returns i's subtree's new root and whether its height changed in turn.
func (s *sortedSet) rebalance(i int32) (int32, bool) {
	h := s.nodes[i].height
	i = s.balance(i)
	return i, s.nodes[i].height != h
}

func (s *sortedSet) contains(key int64) bool {
	for i := s.root; i != 0; {
		switch k := s.nodes[i].key; {
		case key < k:
			i = s.nodes[i].child[left]
		case key > k:
			i = s.nodes[i].child[right]
		default:
			return true
		}
	}
	return false
}

// ceiling returns the least key >= key.
func (s *sortedSet) ceiling(key int64) (int64, bool) {
	best, ok := int64(0), false
	for i := s.root; i != 0; {
		switch k := s.nodes[i].key; {
		case key < k:
			best, ok = k, true
			i = s.nodes[i].child[left]
		case key > k:
			i = s.nodes[i].child[right]
		default:
			return k, true
		}
	}
	return best, ok
}

// ascend calls f with each key in increasing order until f returns false.
func (s *sortedSet) ascend(f func(int64) bool) {
	st := s.stack[:0]
	for i := s.root; i != 0 || len(st) > 0; {
		for ; i != 0; i = s.nodes[i].child[left] {
			st = append(st, i)
		}
		i = st[len(st)-1]
		st = st[:len(st)-1]
		if !f(s.nodes[i].key) {
			break
		}
		i = s.nodes[i].child[right]
	}
	s.stack = st
}

// deleteBelow removes every key < key, smallest first (Storm's commit
// iterates the set from its head, removing).
func (s *sortedSet) deleteBelow(key int64) {
	for s.root != 0 {
		i := s.root
		for s.nodes[i].child[left] != 0 {
			i = s.nodes[i].child[left]
		}
		if s.nodes[i].key >= key {
			return
		}
		s.root, _ = s.deleteMin(s.root)
	}
}

// deleteMin removes the least key below i and returns the subtree's root
// and whether its height shrank; rebalancing stops where it did not.
func (s *sortedSet) deleteMin(i int32) (int32, bool) {
	if s.nodes[i].child[left] == 0 {
		r := s.nodes[i].child[right]
		s.nodes[i] = avlNode{child: [2]int32{s.free, 0}}
		s.free = i
		s.n--
		return r, true
	}
	var shrank bool
	s.nodes[i].child[left], shrank = s.deleteMin(s.nodes[i].child[left])
	if !shrank {
		return i, false
	}
	return s.rebalance(i)
}

// TestStormPort holds the baseline to the tracker on a random stream with
// gaps, so the benchmark compares two implementations of one job. The
// port's commit may stop at a gap's start where the tracker's skips it;
// between the two there must be no emitted offset.
func TestStormPort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	tr := New(1 << 12)
	tr.Assign(100)
	p := newStormPort(100)
	var window []Mark
	next := int64(100)
	emitted := map[int64]bool{}
	for i := range 20_000 {
		if len(window) < 64 && r.IntN(3) > 0 {
			next += int64(r.IntN(8) / 6 * r.IntN(50)) // a gap now and then
			m, err := tr.Emit(next)
			if err != nil {
				t.Fatal(err)
			}
			p.emit(next)
			emitted[next] = true
			window = append(window, m)
			next++
		} else if len(window) > 0 {
			j := r.IntN(len(window))
			if err := tr.Done(window[j]); err != nil {
				t.Fatal(err)
			}
			p.ack(window[j].Offset)
			window[j] = window[len(window)-1]
			window = window[:len(window)-1]
		}
		if i%7 != 0 {
			continue
		}
		if off, ok := p.findNextCommit(); ok {
			p.commit(off)
		}
		port, want := p.committed, tr.Committable()
		if port > want {
			t.Fatalf("op %d: port commits %d past the tracker's %d", i, port, want)
		}
		for o := port; o < want; o++ {
			if emitted[o] {
				t.Fatalf("op %d: port commits %d, tracker %d, but %d was emitted between", i, port, want, o)
			}
		}
		if p.numUncommitted() < tr.Uncommitted() {
			t.Fatalf("op %d: port has %d uncommitted, tracker %d", i, p.numUncommitted(), tr.Uncommitted())
		}
	}
	if p.committed < 10_000 {
		t.Fatalf("port committed only up to %d of %d offsets", p.committed, next)
	}
}

// TestSortedSet checks the port's AVL tree against a sorted slice: the
// baseline must be a correct sorted set for its figures to mean anything.
func TestSortedSet(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var s sortedSet
	var ref []int64
	for i := range 30_000 {
		switch k := int64(r.IntN(4000)); r.IntN(3) {
		case 0, 1:
			s.insert(k)
			if j, found := slices.BinarySearch(ref, k); !found {
				ref = slices.Insert(ref, j, k)
			}
		default:
			s.deleteBelow(k / 8)
			j, _ := slices.BinarySearch(ref, k/8)
			ref = ref[j:]
		}
		k := int64(r.IntN(4000))
		j, found := slices.BinarySearch(ref, k)
		c, ok := s.ceiling(k)
		if s.len() != len(ref) || s.contains(k) != found || ok != (j < len(ref)) || (ok && c != ref[j]) {
			t.Fatalf("op %d: len %d contains(%d) %v ceiling %d %v; want %d %v %v", i, s.len(), k, s.contains(k), c, ok, len(ref), found, j < len(ref))
		}
		if i%1000 == 0 {
			var got []int64
			s.ascend(func(k int64) bool { got = append(got, k); return true })
			if !slices.Equal(got, ref) {
				t.Fatalf("op %d: ascend gives %d keys, want %d", i, len(got), len(ref))
			}
			s.checkAVL(s.root)
		}
	}
}

// checkAVL panics if the subtree at i is not ordered and balanced, and
// returns its height.
func (s *sortedSet) checkAVL(i int32) int32 {
	if i == 0 {
		return 0
	}
	n := s.nodes[i]
	l, r := n.child[left], n.child[right]
	lh, rh := s.checkAVL(l), s.checkAVL(r)
	if (l != 0 && s.nodes[l].key >= n.key) || (r != 0 && s.nodes[r].key <= n.key) {
		panic("sortedSet: keys out of order")
	}
	if lh-rh > 1 || rh-lh > 1 || n.height != 1+max(lh, rh) {
		panic("sortedSet: unbalanced or wrong height")
	}
	return n.height
}

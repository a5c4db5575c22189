package netio

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// pendModel is the plain model of pendTable: a Go map.
type pendModel map[uint64]uint64

// checkPend compares t with the model and checks t's own invariants:
// its count, and every entry reachable from its home slot without
// crossing an empty one.
func checkPend(t *testing.T, pt *pendTable, m pendModel) {
	t.Helper()
	if pt.n != len(m) {
		t.Fatalf("table holds %d entries, model %d", pt.n, len(m))
	}
	if len(pt.slots) > 0 && 2*pt.n > len(pt.slots) {
		t.Fatalf("%d entries in %d slots: more than half full", pt.n, len(pt.slots))
	}
	seen := 0
	mask := uint64(len(pt.slots) - 1)
	for i, s := range pt.slots {
		if s.root == 0 {
			continue
		}
		seen++
		if want, ok := m[s.root]; !ok || want != s.val {
			t.Fatalf("slot %d: root %#x val %#x, model has %#x (present %v)", i, s.root, s.val, want, ok)
		}
		for j := pt.home(s.root); j != uint64(i); j = (j + 1) & mask {
			if pt.slots[j].root == 0 {
				t.Fatalf("root %#x in slot %d is cut off from its home %d by empty slot %d", s.root, i, pt.home(s.root), j)
			}
		}
	}
	if seen != pt.n {
		t.Fatalf("%d occupied slots, n = %d", seen, pt.n)
	}
}

// pendOps applies a stream of operations to a table and the model: each
// op is a root (from a small set, so that roots repeat and probe chains
// form) and whether to add or take it.
func pendOps(t *testing.T, ops []uint64, roots []uint64) {
	var pt pendTable
	m := pendModel{}
	for k, op := range ops {
		root := roots[op>>1%uint64(len(roots))]
		if op&1 == 0 {
			val := uint64(k&pendTaskMask) | uint64(k)<<pendMsShift
			ok := pt.add(root, val)
			old, had := m[root]
			switch {
			case !had:
				m[root] = val&^(pendMaxCount<<pendCountShift) | 1<<pendCountShift
			case pendCount(old) < pendMaxCount:
				m[root] = old + 1<<pendCountShift
			}
			if want := !had || pendCount(old) < pendMaxCount; ok != want {
				t.Fatalf("op %d: add %#x = %v, model says %v", k, root, ok, want)
			}
		} else {
			v, ok := pt.take(root)
			old, had := m[root]
			if ok != had || ok && v != old {
				t.Fatalf("op %d: take %#x = %#x %v, model %#x %v", k, root, v, ok, old, had)
			}
			if had && pendCount(old) > 1 {
				m[root] = old - 1<<pendCountShift
			} else {
				delete(m, root)
			}
		}
		if k%64 == 0 || k == len(ops)-1 {
			checkPend(t, &pt, m)
		}
	}
	got := pendModel{}
	pt.each(func(root, val uint64) { got[root] = val })
	if len(got) != len(m) {
		t.Fatalf("each visited %d entries, model has %d", len(got), len(m))
	}
	pt.reset()
	if pt.n != 0 || pt.find(roots[0]) != -1 {
		t.Fatal("reset left entries")
	}
}

// TestPendTable: random adds and takes against the model, with root sets
// chosen to collide: sequential roots, random ones, and roots that all
// hash to a few home slots (long probe chains, shifts across the wrap).
func TestPendTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	seq := make([]uint64, 3000)
	for i := range seq {
		seq[i] = uint64(i + 1)
	}
	random := make([]uint64, 3000)
	for i := range random {
		random[i] = rng.Uint64() | 1
	}
	// Roots whose home in a 256-slot table is slot 0 or 255.
	var probe pendTable
	probe.grow()
	var clash []uint64
	for r := uint64(1); len(clash) < 100; r++ {
		if h := probe.home(r); h == 0 || h == 255 {
			clash = append(clash, r)
		}
	}
	for _, tc := range []struct {
		name  string
		roots []uint64
		n     int
		bias  float64 // probability of an add
	}{
		{"sequential", seq, 40000, 0.6},
		{"random", random, 40000, 0.55},
		{"clash", clash, 20000, 0.5},
		{"grow-then-drain", random, 20000, 0.9},
		{"repeats", seq[:5], 20000, 0.7}, // counts climb to pendMaxCount
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := make([]uint64, tc.n)
			for i := range ops {
				op := rng.Uint64() &^ 1
				if rng.Float64() >= tc.bias {
					op |= 1
				}
				ops[i] = op
			}
			pendOps(t, ops, tc.roots)
		})
	}
}

// FuzzPendTable: any stream of adds and takes over a small root set keeps
// the table equal to the model.
func FuzzPendTable(f *testing.F) {
	f.Add([]byte{0, 2, 4, 1, 3, 5, 0, 0, 1, 1})
	f.Add([]byte("\x00\x02\x04\x06\x08\x0a\x01\x03\x05"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 8 {
			return
		}
		// The first 8 bytes pick the roots: 64 of them, spaced by a
		// stride the fuzzer chooses (stride 0 still varies the low bits).
		stride := binary.LittleEndian.Uint64(data) | 1
		roots := make([]uint64, 64)
		for i := range roots {
			roots[i] = stride * uint64(i+1)
			if roots[i] == 0 {
				roots[i] = uint64(i + 1)
			}
		}
		ops := make([]uint64, len(data)-8)
		for i, b := range data[8:] {
			ops[i] = uint64(b)
		}
		pendOps(t, ops, roots)
	})
}

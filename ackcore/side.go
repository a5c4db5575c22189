package ackcore

// sideTable maps a root to its timing when the slot cannot hold it (kind
// 3, timing.go): open addressing over a power-of-two array of 24-byte
// records, linear probing, backward-shift deletion, keyed by the table's
// hash. Unlike a Go map, its memory is known exactly (bytes) and it shrinks
// when it empties. Rare by design: a root lands here only with a timeout
// or RESET extension beyond what the slot holds.
type sideTable struct {
	recs []sideRec // len is 0 or a power of two; key 0 marks a free record
	n    int       // records in use
	keys *keys
}

type sideRec struct {
	root    uint64
	start   uint64 // tick
	timeout int64  // ns
}

// sideRecBytes is unsafe.Sizeof(sideRec{}).
const sideRecBytes = 24

const sideMin = 16 // the smallest array allocated

func (t *sideTable) len() int { return t.n }

// bytes is the memory the table holds.
func (t *sideTable) bytes() int { return len(t.recs) * sideRecBytes }

func (t *sideTable) slot(root uint64) uint64 {
	return mix(root, t.keys) >> 32 & uint64(len(t.recs)-1)
}

// get returns root's record.
func (t *sideTable) get(root uint64) (sideRec, bool) {
	if t.n == 0 {
		return sideRec{}, false
	}
	m := uint64(len(t.recs) - 1)
	for i := t.slot(root); ; i = (i + 1) & m {
		switch t.recs[i].root {
		case root:
			return t.recs[i], true
		case 0:
			return sideRec{}, false
		}
	}
}

// put sets root's record, growing the table at 3/4 load.
func (t *sideTable) put(r sideRec) {
	if (t.n+1)*4 > len(t.recs)*3 {
		t.resize(max(2*len(t.recs), sideMin))
	}
	m := uint64(len(t.recs) - 1)
	for i := t.slot(r.root); ; i = (i + 1) & m {
		switch t.recs[i].root {
		case r.root:
			t.recs[i] = r
			return
		case 0:
			t.recs[i] = r
			t.n++
			return
		}
	}
}

// del removes root's record, if any, shifting the records after it back
// so that no probe passes a hole, and shrinks the table at 1/8 load.
func (t *sideTable) del(root uint64) {
	if t.n == 0 {
		return
	}
	m := uint64(len(t.recs) - 1)
	i := t.slot(root)
	for t.recs[i].root != root {
		if t.recs[i].root == 0 {
			return
		}
		i = (i + 1) & m
	}
	for j := (i + 1) & m; t.recs[j].root != 0; j = (j + 1) & m {
		// The record at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		if h := t.slot(t.recs[j].root); (j-h)&m >= (j-i)&m {
			t.recs[i] = t.recs[j]
			i = j
		}
	}
	t.recs[i] = sideRec{}
	t.n--
	if t.n == 0 {
		t.recs = nil
	} else if len(t.recs) > sideMin && t.n*8 < len(t.recs) {
		t.resize(len(t.recs) / 2)
	}
}

func (t *sideTable) resize(n int) {
	old := t.recs
	t.recs = make([]sideRec, n)
	t.n = 0
	for _, r := range old {
		if r.root != 0 {
			t.put(r)
		}
	}
}

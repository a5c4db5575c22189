package kafka

import (
	"fmt"
	"slices"

	"github.com/xorack/xorack/internal/invariants"
)

// check verifies the spout's bookkeeping after every change made under
// mu, in invariants builds: a partition is paused exactly while its
// tracker is full (and only while owned), the client is told not to fetch
// it exactly while it is paused, buffered counts the buffers of
// the partitions not paused (bufBytes their bytes), the active list holds exactly the owned
// partitions, once each, and a partition not owned holds nothing.
func (s *Spout) check() {
	if !invariants.Enabled {
		return
	}
	buffered, bufBytes, owned := 0, 0, 0
	for _, p := range s.parts {
		switch {
		case p.paused != (p.owned && p.tr.Full()):
			panic(fmt.Sprintf("kafka: %s/%d paused %v, owned %v, tracker full %v", p.topic, p.partition, p.paused, p.owned, p.tr.Full()))
		case !p.owned && (p.buffered() != 0 || p.tr.Generation() != 0):
			panic(fmt.Sprintf("kafka: %s/%d not owned but holds %d records, generation %d", p.topic, p.partition, p.buffered(), p.tr.Generation()))
		case p.fetchPaused != p.paused:
			panic(fmt.Sprintf("kafka: %s/%d fetch paused %v, paused %v", p.topic, p.partition, p.fetchPaused, p.paused))
		case !p.buf.shaped():
			panic(fmt.Sprintf("kafka: %s/%d buffer of %d blocks, head %d, %d records", p.topic, p.partition, len(p.buf.blocks), p.buf.head, p.buf.n))
		}
		if p.owned {
			owned++
			if slices.Index(s.active, p) < 0 {
				panic(fmt.Sprintf("kafka: %s/%d owned but not active", p.topic, p.partition))
			}
		}
		bytes := 0
		if p.buffered() <= 64 { // summed only for short buffers: check runs after every change
			for i := range p.buf.len() {
				r := p.buf.at(i)
				if n := recBytes(r.rec); n != r.bytes || r.offset != r.rec.Offset || r.control != r.rec.Attrs.IsControl() {
					panic(fmt.Sprintf("kafka: %s/%d buffered offset %d, %d bytes, control %v; its record %d, %d, %v",
						p.topic, p.partition, r.offset, r.bytes, r.control, r.rec.Offset, n, r.rec.Attrs.IsControl()))
				}
				bytes += r.bytes
			}
		} else {
			bytes = p.bytes
		}
		if bytes != p.bytes {
			panic(fmt.Sprintf("kafka: %s/%d buffers %d bytes, counted %d", p.topic, p.partition, bytes, p.bytes))
		}
		if !p.paused {
			buffered += p.buffered()
			bufBytes += p.bytes
		}
	}
	if bufBytes != s.bufBytes {
		panic(fmt.Sprintf("kafka: buffers hold %d bytes, counted %d", bufBytes, s.bufBytes))
	}
	if owned != len(s.active) || buffered != s.buffered || s.stats.Paused < 0 {
		panic(fmt.Sprintf("kafka: %d owned, %d active; buffered %d, counted %d; paused gauge %d", owned, len(s.active), buffered, s.buffered, s.stats.Paused))
	}
}

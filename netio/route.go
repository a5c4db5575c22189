package netio

import (
	"hash/fnv"

	"github.com/xorack/xorack/internal/splitmix"
)

// hostKey is a host's rendezvous identity: its address, hashed.
func hostKey(addr string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(addr))
	return splitmix.Mix64(h.Sum64())
}

// pick returns the host root goes to among hosts: the highest keyed
// rendezvous score (highest random weight). When a host leaves, only its
// roots move, each to the host with its next score; nil when hosts is
// empty.
func pick(hosts []*host, key, root uint64) *host {
	if len(hosts) == 1 {
		return hosts[0]
	}
	r := splitmix.Mix64(root ^ key)
	var best *host
	var bs uint64
	for _, h := range hosts {
		if s := splitmix.Mix64(r ^ h.key); best == nil || s > bs {
			best, bs = h, s
		}
	}
	return best
}

// setLive recomputes the hosts up.
func (c *Client) setLive() {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	var up []*host
	for _, h := range c.hosts {
		if h.up.Load() {
			up = append(up, h)
		}
	}
	c.live.Store(&up)
}

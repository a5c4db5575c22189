package netio

import (
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/testkit"
)

// TestConfigValidate: validate returns the filled copy (every zero field
// at its default, the caller's value untouched), and refuses each bad
// field with an error naming the package, the type, the field and the
// value.
func TestConfigValidate(t *testing.T) {
	secret := []byte("0123456789abcdef")
	sc := ServerConfig{Secret: secret, Shard: ackcore.Config{MaxPending: 1 << 10}}
	got, err := sc.validate()
	if err != nil {
		t.Fatal(err)
	}
	if got.Shards != DefaultShards || got.Tasks != DefaultTasks || got.MaxConns != DefaultMaxConns ||
		got.MaxFrame != DefaultMaxFrame || got.WriteTimeout != DefaultWriteTimeout || got.RingSize != DefaultRingSize || got.IdleTimeout != DefaultIdleTimeout ||
		got.MaxRootTimeout != rootTimeoutFactor*ackcore.DefaultTimeout ||
		got.ShareSlack != defaultSlackRings*DefaultShards*DefaultRingSize || got.Logger == nil || got.Idle == nil {
		t.Errorf("filled server config %+v", got)
	}
	if sc.Shards != 0 || sc.Logger != nil {
		t.Errorf("validate changed its receiver: %+v", sc)
	}
	testkit.Refuses(t, sc, ServerConfig.Validate, []testkit.Refusal[ServerConfig]{
		{Edit: func(c *ServerConfig) { c.Secret = secret[:5] }, Want: "netio: ServerConfig.Secret of 5 bytes..."},
		{Edit: func(c *ServerConfig) { c.Shards = -2 }, Want: "netio: ServerConfig.Shards -2..."},
		{Edit: func(c *ServerConfig) { c.MaxConns = 5000 }, Want: "netio: ServerConfig.MaxConns 5000..."},
		{Edit: func(c *ServerConfig) { c.Tasks = -1 }, Want: "netio: ServerConfig.Tasks -1..."},
		{Edit: func(c *ServerConfig) { c.MaxFrame = 12 }, Want: "netio: ServerConfig.MaxFrame 12..."},
		{Edit: func(c *ServerConfig) { c.MaxConnPending = -3 }, Want: "netio: ServerConfig.MaxConnPending -3..."},
		{Edit: func(c *ServerConfig) { c.MaxBytes = -1 }, Want: "netio: ServerConfig.MaxBytes -1..."},
		{Edit: func(c *ServerConfig) { c.WriteTimeout = -time.Second }, Want: "netio: ServerConfig.WriteTimeout -1s below 0..."},
		{Edit: func(c *ServerConfig) { c.HandshakeTimeout = -time.Second }, Want: "netio: ServerConfig.HandshakeTimeout -1s below 0..."},
		{Edit: func(c *ServerConfig) { c.IdleTimeout = time.Millisecond }, Want: "netio: ServerConfig.IdleTimeout 1ms..."},
		{Edit: func(c *ServerConfig) { c.MaxRootTimeout = 1500 * time.Microsecond }, Want: "netio: ServerConfig.MaxRootTimeout 1.5ms..."},
	})

	cc := ClientConfig{Hosts: []string{"127.0.0.1:1"}, Secret: secret}
	cg, err := cc.validate()
	if err != nil {
		t.Fatal(err)
	}
	if cg.MaxPending != DefaultMaxPending || cg.FrameMsgs != DefaultFrameMsgs || cg.QueueBytes != DefaultQueueBytes ||
		cg.MaxFrame != DefaultMaxFrame || cg.WriteTimeout != DefaultWriteTimeout ||
		cg.MaxBytes != DefaultClientMaxBytes || cg.BackoffMax != DefaultBackoffMax || cg.ID == 0 || cg.HashKey == 0 || cg.Logger == nil {
		t.Errorf("filled client config %+v", cg)
	}
	if cc.ID != 0 || cc.Logger != nil {
		t.Errorf("validate changed its receiver: %+v", cc)
	}
	testkit.Refuses(t, cc, ClientConfig.Validate, []testkit.Refusal[ClientConfig]{
		{Edit: func(c *ClientConfig) { c.Hosts = nil }, Want: "netio: ClientConfig.Hosts is empty..."},
		{Edit: func(c *ClientConfig) { c.Hosts = []string{"a:1", "a:1"} }, Want: `netio: ClientConfig.Hosts lists "a:1" twice`},
		{Edit: func(c *ClientConfig) { c.Secret = nil }, Want: "netio: ClientConfig.Secret of 0 bytes..."},
		{Edit: func(c *ClientConfig) { c.MaxPending = -1 }, Want: "netio: ClientConfig.MaxPending -1..."},
		{Edit: func(c *ClientConfig) { c.MaxBytes = -1 }, Want: "netio: ClientConfig.MaxBytes -1..."},
		{Edit: func(c *ClientConfig) { c.MaxFrame = 12 }, Want: "netio: ClientConfig.MaxFrame 12..."},
		{Edit: func(c *ClientConfig) { c.WriteTimeout = -time.Second }, Want: "netio: ClientConfig.WriteTimeout -1s below 0..."},
		{Edit: func(c *ClientConfig) { c.FrameMsgs = 1 << 30 }, Want: "netio: ClientConfig.FrameMsgs 1073741824..."},
		{Edit: func(c *ClientConfig) { c.QueueBytes = 100 }, Want: "netio: ClientConfig.QueueBytes 100..."},
		{Edit: func(c *ClientConfig) { c.DialTimeout = -time.Second }, Want: "netio: ClientConfig.DialTimeout -1s below 0..."},
		{Edit: func(c *ClientConfig) { c.BackoffMin = -time.Second }, Want: "netio: ClientConfig.BackoffMin -1s below 0..."},
		{Edit: func(c *ClientConfig) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond }, Want: "netio: ClientConfig.BackoffMax 1ms below BackoffMin 1s..."},
	})
}

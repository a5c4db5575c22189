package netio

import (
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
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
		got.MaxFrame != DefaultMaxFrame || got.RingSize != DefaultRingSize || got.IdleTimeout != DefaultIdleTimeout ||
		got.MaxRootTimeout != rootTimeoutFactor*ackcore.DefaultTimeout ||
		got.ShareSlack != defaultSlackRings*DefaultShards*DefaultRingSize || got.Logger == nil || got.Idle == nil {
		t.Errorf("filled server config %+v", got)
	}
	if sc.Shards != 0 || sc.Logger != nil {
		t.Errorf("validate changed its receiver: %+v", sc)
	}
	wantRefused(t, sc, ServerConfig.Validate, []refusal[ServerConfig]{
		{func(c *ServerConfig) { c.Secret = secret[:5] }, "netio: ServerConfig.Secret of 5 bytes"},
		{func(c *ServerConfig) { c.Shards = -2 }, "netio: ServerConfig.Shards -2"},
		{func(c *ServerConfig) { c.MaxConns = 5000 }, "netio: ServerConfig.MaxConns 5000"},
		{func(c *ServerConfig) { c.Tasks = -1 }, "netio: ServerConfig.Tasks -1"},
		{func(c *ServerConfig) { c.MaxFrame = 12 }, "netio: ServerConfig.MaxFrame 12"},
		{func(c *ServerConfig) { c.MaxConnPending = -3 }, "netio: ServerConfig.MaxConnPending -3"},
		{func(c *ServerConfig) { c.MaxBytes = -1 }, "netio: ServerConfig.MaxBytes -1"},
		{func(c *ServerConfig) { c.WriteTimeout = -time.Second }, "netio: ServerConfig.WriteTimeout -1s below 0"},
		{func(c *ServerConfig) { c.HandshakeTimeout = -time.Second }, "netio: ServerConfig.HandshakeTimeout -1s below 0"},
		{func(c *ServerConfig) { c.IdleTimeout = time.Millisecond }, "netio: ServerConfig.IdleTimeout 1ms"},
		{func(c *ServerConfig) { c.MaxRootTimeout = 1500 * time.Microsecond }, "netio: ServerConfig.MaxRootTimeout 1.5ms"},
	})

	cc := ClientConfig{Hosts: []string{"127.0.0.1:1"}, Secret: secret}
	cg, err := cc.validate()
	if err != nil {
		t.Fatal(err)
	}
	if cg.MaxPending != DefaultMaxPending || cg.FrameMsgs != DefaultFrameMsgs || cg.QueueBytes != DefaultQueueBytes ||
		cg.MaxBytes != DefaultClientMaxBytes || cg.BackoffMax != DefaultBackoffMax || cg.ID == 0 || cg.HashKey == 0 || cg.Logger == nil {
		t.Errorf("filled client config %+v", cg)
	}
	if cc.ID != 0 || cc.Logger != nil {
		t.Errorf("validate changed its receiver: %+v", cc)
	}
	wantRefused(t, cc, ClientConfig.Validate, []refusal[ClientConfig]{
		{func(c *ClientConfig) { c.Hosts = nil }, "netio: ClientConfig.Hosts is empty"},
		{func(c *ClientConfig) { c.Hosts = []string{"a:1", "a:1"} }, `netio: ClientConfig.Hosts lists "a:1" twice`},
		{func(c *ClientConfig) { c.Secret = nil }, "netio: ClientConfig.Secret of 0 bytes"},
		{func(c *ClientConfig) { c.MaxPending = -1 }, "netio: ClientConfig.MaxPending -1"},
		{func(c *ClientConfig) { c.MaxBytes = -1 }, "netio: ClientConfig.MaxBytes -1"},
		{func(c *ClientConfig) { c.FrameMsgs = 1 << 30 }, "netio: ClientConfig.FrameMsgs 1073741824"},
		{func(c *ClientConfig) { c.QueueBytes = 100 }, "netio: ClientConfig.QueueBytes 100"},
		{func(c *ClientConfig) { c.DialTimeout = -time.Second }, "netio: ClientConfig.DialTimeout -1s below 0"},
		{func(c *ClientConfig) { c.BackoffMin = -time.Second }, "netio: ClientConfig.BackoffMin -1s below 0"},
		{func(c *ClientConfig) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond }, "netio: ClientConfig.BackoffMax 1ms below BackoffMin 1s"},
	})
}

// refusal is an edit of a valid config and the error it must bring.
type refusal[C any] struct {
	edit func(*C)
	want string
}

// wantRefused checks that validate refuses each edit of good with an
// error containing its want.
func wantRefused[C any](t *testing.T, good C, validate func(C) error, edits []refusal[C]) {
	t.Helper()
	for _, r := range edits {
		bad := good
		r.edit(&bad)
		if err := validate(bad); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("got %v, want an error containing %q", err, r.want)
		}
	}
}

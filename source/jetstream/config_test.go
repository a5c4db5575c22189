package jetstream

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/topology"
)

// TestConfigValidate: validate fills every zero field of Config and
// SinkConfig from its Default constant, keeps the fields set, and refuses
// each bad field with an error naming the type, the field and the value.
func TestConfigValidate(t *testing.T) {
	js := newEnv(t).js

	got, err := Config{JetStream: js, Stream: "S", Consumer: "c"}.validate()
	if err != nil {
		t.Fatalf("validate of a minimal Config: %v", err)
	}
	if got.FetchWait != DefaultFetchWait || got.OpenTimeout != DefaultOpenTimeout || got.Decode == nil || got.Logger != slog.Default() {
		t.Errorf("filled Config: FetchWait %v OpenTimeout %v Decode set %v Logger default %v; want %v, %v, true, true",
			got.FetchWait, got.OpenTimeout, got.Decode != nil, got.Logger == slog.Default(), DefaultFetchWait, DefaultOpenTimeout)
	}
	set := Config{JetStream: js, Stream: "S", Consumer: "c", FetchWait: time.Second, OpenTimeout: 3 * time.Second}
	if got, err := set.validate(); err != nil || got.FetchWait != time.Second || got.OpenTimeout != 3*time.Second {
		t.Errorf("validate kept FetchWait %v OpenTimeout %v (err %v); want 1s, 3s", got.FetchWait, got.OpenTimeout, err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Stream: "S", Consumer: "c"}, "jetstream: Config.JetStream is nil"},
		{Config{JetStream: js, Consumer: "c"}, `jetstream: Config.Stream "" is empty`},
		{Config{JetStream: js, Stream: "S"}, `jetstream: Config.Consumer "" is empty`},
		{Config{JetStream: js, Stream: "S", Consumer: "c", FetchWait: 9 * time.Millisecond}, "jetstream: Config.FetchWait 9ms is below 10ms"},
		{Config{JetStream: js, Stream: "S", Consumer: "c", OpenTimeout: -time.Second}, "jetstream: Config.OpenTimeout -1s is negative"},
	} {
		if _, err := c.cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate: %v; want an error with %q", err, c.want)
		}
	}

	subject := func(*topology.Tuple) string { return "out.x" }
	sc, err := SinkConfig{JetStream: js, Subject: subject, Data: posData, MsgID: posID}.validate()
	if err != nil || sc.PublishTimeout != DefaultPublishTimeout || sc.MaxInFlightBytes != DefaultSinkMaxInFlightBytes {
		t.Errorf("filled SinkConfig: PublishTimeout %v MaxInFlightBytes %d (err %v); want %v, %d",
			sc.PublishTimeout, sc.MaxInFlightBytes, err, DefaultPublishTimeout, DefaultSinkMaxInFlightBytes)
	}
	for _, c := range []struct {
		cfg  SinkConfig
		want string
	}{
		{SinkConfig{Subject: subject, Data: posData, MsgID: posID}, "jetstream: SinkConfig.JetStream is nil"},
		{SinkConfig{JetStream: js, Data: posData, MsgID: posID}, "jetstream: SinkConfig.Subject is nil"},
		{SinkConfig{JetStream: js, Subject: subject, MsgID: posID}, "jetstream: SinkConfig.Data is nil"},
		{SinkConfig{JetStream: js, Subject: subject, Data: posData}, "jetstream: SinkConfig.MsgID is nil"},
		{SinkConfig{JetStream: js, Subject: subject, Data: posData, MsgID: posID, PublishTimeout: -time.Second}, "jetstream: SinkConfig.PublishTimeout -1s is negative"},
		{SinkConfig{JetStream: js, Subject: subject, Data: posData, MsgID: posID, MaxInFlightBytes: -5}, "jetstream: SinkConfig.MaxInFlightBytes -5 is negative"},
	} {
		if _, err := c.cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SinkConfig validate: %v; want an error with %q", err, c.want)
		}
	}
}

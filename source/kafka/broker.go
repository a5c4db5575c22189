package kafka

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerHooks counts and logs the client's broker connection errors, and
// counts the batches it reads (kgo hooks, called on the client's
// goroutines).
type brokerHooks struct{ s *Spout }

var _ kgo.HookBrokerConnect = brokerHooks{}
var _ kgo.HookBrokerDisconnect = brokerHooks{}
var _ kgo.HookFetchBatchRead = brokerHooks{}

// OnFetchBatchRead counts the records and wire bytes of each batch the
// client reads, for the spout's fetch sizing (sizeFetch).
func (h brokerHooks) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.s.readRecs.Add(int64(m.NumRecords))
	h.s.readBytes.Add(int64(m.CompressedBytes))
}

// connLogEvery bounds the log of connection errors to one line per ten
// seconds: a broker that is down is retried many times a second.
const connLogEvery = 10 * time.Second

func (h brokerHooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) ||
		strings.Contains(err.Error(), "operation was canceled") {
		return // the client is closing, not a broker's error
	}
	s := h.s
	s.mu.Lock()
	s.stats.ConnectErrors++
	s.stats.LastBrokerError = err.Error()
	n := s.stats.ConnectErrors
	now := time.Now()
	logIt := now.Sub(s.lastConnLog) >= connLogEvery
	if logIt {
		s.lastConnLog = now
	}
	s.mu.Unlock()
	if logIt {
		s.log.Warn("kafka: broker connection failed", "group", s.cfg.Group, "broker", net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))),
			"err", err, "connect_errors", n)
	}
}

func (h brokerHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) {
	h.s.mu.Lock()
	h.s.stats.Disconnects++
	h.s.mu.Unlock()
}

func (s *Spout) lastBrokerError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.LastBrokerError
}

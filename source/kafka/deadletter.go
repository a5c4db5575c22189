package kafka

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/topology"
)

// Header keys of a dead-letter record (besides the original record's own
// headers, which it keeps).
const (
	HeaderTopic     = "xorack-topic"     // the record's topic
	HeaderPartition = "xorack-partition" // its partition, decimal
	HeaderOffset    = "xorack-offset"    // its offset, decimal
	HeaderReason    = "xorack-reason"    // the last attempt's failure reason (ackcore.Reason)
	HeaderAttempts  = "xorack-attempts"  // the attempts made, decimal
	HeaderError     = "xorack-error"     // the last error, when there was one
)

func (s *Spout) logDead(rep finished, f *topology.Failure, err error) {
	args := []any{"group", s.cfg.Group, "topic", rep.rec.Topic, "partition", rep.rec.Partition, "offset", rep.rec.Offset,
		"reason", f.Reason.String(), "attempts", f.Attempts}
	if f.Err != nil {
		args = append(args, "failure", f.Err.Error())
	}
	switch {
	case err != nil:
		s.log.Error("kafka: dead letter not delivered; the record is not done and its partition's commit stays below it",
			append(args, "dead_letter_topic", s.cfg.DeadLetterTopic, "err", err)...)
	case s.cfg.DeadLetterTopic != "":
		s.log.Error("kafka: record dead-lettered, counted as done", append(args, "dead_letter_topic", s.cfg.DeadLetterTopic)...)
	default:
		s.log.Error("kafka: record failed its last attempt, counted as done (no dead-letter topic)", args...)
	}
}

// deadLetter builds the dead-letter record for r.
func deadLetter(topic string, r *kgo.Record, f *topology.Failure) *kgo.Record {
	h := append(slices.Clip(r.Headers),
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(f.Reason.String())},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(f.Attempts), 10)},
	)
	if f.Err != nil {
		h = append(h, kgo.RecordHeader{Key: HeaderError, Value: []byte(f.Err.Error())})
	}
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: h}
}

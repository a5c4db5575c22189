package bench

import (
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// TestNetRecords: the gRPC arm's records are netio's (the first message
// and outcome records below are those of netio's golden vectors,
// netio/testdata), and they decode back to what was encoded.
func TestNetRecords(t *testing.T) {
	msgs := []ackcore.Msg{{Root: 0x0102030405060708, Val: 0x1112131415161718, Kind: ackcore.Init, Task: 7, TimeoutMs: 30000},
		{Root: 9, Val: 10, Kind: ackcore.Ack}}
	b := appendMsgRecords(nil, msgs)
	want := "080706050403020118171615141312110700000130750000" + "09000000000000000a000000000000000000000200000000"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("message records\n got %s\nwant %s", got, want)
	}
	back, err := decodeMsgRecords(nil, b)
	if err != nil || !slices.Equal(back, msgs) {
		t.Fatalf("messages decoded %v, %v; want %v", back, err, msgs)
	}
	outs := []ackcore.Outcome{{Root: 0x0102030405060708, Latency: 1234567, Task: 7, Kind: ackcore.Completed},
		{Root: 5, Latency: 3 * time.Millisecond, Task: 9, Kind: ackcore.Failed, Reason: ackcore.ReasonTimeout}}
	ob := appendOutcomeRecords(nil, outs)
	if got, want := hex.EncodeToString(ob[:recordSize]), "080706050403020187d61200000000000700000001000000"; got != want {
		t.Fatalf("outcome record\n got %s\nwant %s", got, want)
	}
	oback, err := decodeOutcomeRecords(nil, ob)
	if err != nil || !slices.Equal(oback, outs) {
		t.Fatalf("outcomes decoded %v, %v; want %v", oback, err, outs)
	}
	if _, err := decodeMsgRecords(nil, b[:30]); err == nil {
		t.Fatal("a partial record decoded")
	}
	if _, err := decodeOutcomeRecords(nil, ob[:23+recordSize]); err == nil {
		t.Fatal("a partial outcome record decoded")
	}
}

package netio

import (
	"strings"
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestVersion1Client: a client of protocol version 1 (a hello of version
// 1, msgs frames) is served in version 1 over a real socket: a welcome
// and outcomes of version 1, its tree completed. A packed msgs frame from
// it is refused, naming the versions; so is a packed frame that says
// version 1.
func TestVersion1Client(t *testing.T) {
	s := startServer(t, nil)
	login := func(id uint64) *rawConn {
		rc := rawDial(t, s.addr)
		h := helloBody{ClientID: id, MaxFrame: DefaultMaxFrame, Tasks: []taskRange{{First: uint32(id), Count: 1}}}
		h.MAC = helloMAC(testSecret, &rc.ch.Nonce, &h)
		if _, err := rc.Write(appendHelloV(nil, &h, protoV1)); err != nil {
			t.Fatal(err)
		}
		rc.fr.SetVersion(protoV1) // what a client of version 1 reads
		f, err := rc.fr.Next()
		if err != nil || f.Type != typeWelcome || f.Version != protoV1 {
			t.Fatalf("welcome: type %d version %d, %v", f.Type, f.Version, err)
		}
		return rc
	}
	rc := login(3)
	defer rc.Close()
	msgs := []ackcore.Msg{{Root: 5, Kind: ackcore.Init, Task: 3, Val: 0x11}, {Root: 5, Kind: ackcore.Ack, Val: 0x11}}
	if _, err := rc.Write(appendMsgs(nil, msgs)); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := rc.fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != typeOutcomes {
			continue // a heartbeat
		}
		outs, err := decodeOutcomes(nil, f.Body)
		if err != nil || len(outs) != 1 || outs[0].Root != 5 || outs[0].Kind != ackcore.Completed || outs[0].Task != 3 {
			t.Fatalf("outcomes %+v, %v", outs, err)
		}
		break
	}
	if _, err := rc.Write(appendPacked(nil, []ackcore.Msg{{Root: 6, Kind: ackcore.Ack, Val: 1}})); err != nil {
		t.Fatal(err)
	}
	if r := rc.closedWith(t); !strings.Contains(r, "packed msgs frame of version 2 on a connection that speaks version 1") {
		t.Fatalf("close reason %q", r)
	}

	rc2 := login(4)
	defer rc2.Close()
	p := appendPacked(nil, []ackcore.Msg{{Root: 7, Kind: ackcore.Ack, Val: 1}})
	p[offVersion] = protoV1
	if _, err := rc2.Write(p); err != nil {
		t.Fatal(err)
	}
	if r := rc2.closedWith(t); !strings.Contains(r, "packed msgs frame of version 1: the type needs version 2") {
		t.Fatalf("close reason %q", r)
	}
}

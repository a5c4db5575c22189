package netio

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/splitmix"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/")

// goldenMsgs and friends are the values behind the golden vectors.
var (
	goldenMsgs = []ackcore.Msg{
		{Root: 0x0102030405060708, Val: 0x1112131415161718, Task: 7, Kind: ackcore.Init, TimeoutMs: 30000},
		{Root: 0x0102030405060708, Val: 0xa1a2a3a4a5a6a7a8, Kind: ackcore.Ack},
		{Root: 0x2122232425262728, Kind: ackcore.Fail},
		{Root: 0x3132333435363738, Kind: ackcore.Reset, TimeoutMs: 5},
	}
	goldenOutcomes = []ackcore.Outcome{
		{Root: 0x0102030405060708, Latency: 1234567 * time.Nanosecond, Task: 7, Kind: ackcore.Completed},
		{Root: 0x2122232425262728, Latency: 42, Task: 9, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit},
		{Root: 0x4142434445464748, Task: 1, Kind: ackcore.Failed, Reason: ackcore.ReasonStopped},
	}
	goldenChallenge = challengeBody{Nonce: [32]byte{0: 0xaa, 31: 0xbb}, MaxFrame: DefaultMaxFrame, Tasks: 4096}
	goldenHello     = helloBody{ClientID: 0xc0ffee, MaxFrame: DefaultMaxFrame, Tasks: []taskRange{{0, 8}, {100, 2}}}
	goldenWelcome   = welcomeBody{ServerID: 0x5e5e5e5e, Heartbeat: 10 * time.Second, Idle: 30 * time.Second}
)

func goldenHelloSigned() helloBody {
	h := goldenHello
	h.MAC = helloMAC([]byte("golden-secret-16bytes"), &goldenChallenge.Nonce, &h)
	return h
}

// goldenFrames encodes every golden value.
func goldenFrames() map[string][]byte {
	h := goldenHelloSigned()
	return map[string][]byte{
		"msgs":      appendMsgs(nil, goldenMsgs),
		"outcomes":  appendOutcomes(nil, goldenOutcomes),
		"challenge": appendChallenge(nil, &goldenChallenge),
		"hello":     appendHello(nil, &h),
		"welcome":   appendWelcome(nil, &goldenWelcome),
		"heartbeat": appendHeartbeat(nil),
		"close":     appendClose(nil, closeShutdown, "server shutting down"),
	}
}

// TestGolden: the encoders produce the bytes in testdata/ (hex, 24 bytes
// a line) and the decoders read them back to the same values. A change
// to the wire format shows up here first; go test -run TestGolden
// -update rewrites the files (bump protoVersion when they change). Each file
// has the 8-byte header on its first line, then 24 bytes a line.
func TestGolden(t *testing.T) {
	for name, got := range goldenFrames() {
		path := filepath.Join("testdata", name+".hex")
		if *update {
			// The header on the first line, then 24 bytes (a record) a line.
			var sb strings.Builder
			for i := 0; i < len(got); {
				n := 24
				if i == 0 {
					n = headerSize
				}
				sb.WriteString(hex.EncodeToString(got[i:min(i+n, len(got))]))
				sb.WriteByte('\n')
				i += n
			}
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := hex.DecodeString(strings.ReplaceAll(string(text), "\n", ""))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoder gives\n%x\nwant\n%x", name, got, want)
		}
		f, n, err := parseFrame(want, DefaultMaxFrame)
		if err != nil || n != len(want) {
			t.Fatalf("%s: ParseFrame: %v (n %d of %d)", name, err, n, len(want))
		}
		var back any
		var wantV any
		switch name {
		case "msgs":
			back, err = decodeMsgBody(nil, f.Body)
			wantV = goldenMsgs
		case "outcomes":
			back, err = decodeOutcomes(nil, f.Body)
			wantV = goldenOutcomes
		case "challenge":
			back, err = decodeChallenge(f.Body)
			wantV = goldenChallenge
		case "hello":
			back, err = decodeHello(f.Body, 4096)
			wantV = goldenHelloSigned()
		case "welcome":
			back, err = decodeWelcome(f.Body)
			wantV = goldenWelcome
		case "heartbeat":
			back, wantV = len(f.Body), 0
		case "close":
			code, reason, e := decodeClose(f.Body)
			back, err, wantV = [2]any{code, reason}, e, [2]any{closeShutdown, "server shutting down"}
		}
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !reflect.DeepEqual(back, wantV) {
			t.Errorf("%s: decoded %+v, want %+v", name, back, wantV)
		}
	}
	h := goldenHelloSigned()
	if err := checkHelloMAC([]byte("golden-secret-16bytes"), &goldenChallenge.Nonce, &h); err != nil {
		t.Fatal(err)
	}
	if err := checkHelloMAC([]byte("golden-secret-16byteX"), &goldenChallenge.Nonce, &h); err == nil {
		t.Fatal("a wrong secret passed the MAC check")
	}
}

// stream is every golden frame back to back, and a large msgs frame.
func goldenStream() []byte {
	var b []byte
	for _, name := range []string{"challenge", "hello", "welcome", "msgs", "outcomes", "heartbeat", "close"} {
		b = append(b, goldenFrames()[name]...)
	}
	big := make([]ackcore.Msg, 3000)
	for i := range big {
		big[i] = ackcore.Msg{Root: uint64(i + 1), Val: uint64(i) * 7, Kind: ackcore.Ack}
	}
	return appendMsgs(b, big)
}

// readAll reads every frame of r, copying each.
func readAll(r io.Reader, limit int) ([]wireFrame, error) {
	fr := newFrameReader(r, limit)
	var out []wireFrame
	for {
		f, err := fr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		f.Body = append([]byte(nil), f.Body...)
		out = append(out, f)
	}
}

// TestFrameReaderSetLimit: the handshake's limit keeps the buffer at
// readChunk; the connection's limit grows it to bulkRead, at most the
// limit plus readChunk, keeping the bytes read but not yet parsed.
func TestFrameReaderSetLimit(t *testing.T) {
	s := goldenStream()
	want, err := readAll(bytes.NewReader(s), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{100 << 10, DefaultMaxFrame} {
		fr := newFrameReader(bytes.NewReader(s), handshakeMaxFrame)
		if len(fr.buf) != readChunk {
			t.Fatalf("handshake buffer %d bytes, want %d", len(fr.buf), readChunk)
		}
		f, err := fr.Next() // the challenge, and more behind it
		if err != nil || f.Type != typeChallenge {
			t.Fatalf("first frame %v, %v", typeName(f.Type), err)
		}
		fr.SetLimit(limit)
		if n := min(bulkRead, limit+readChunk); len(fr.buf) != n {
			t.Errorf("limit %d: buffer %d bytes, want %d", limit, len(fr.buf), n)
		}
		f.Body = append([]byte(nil), f.Body...)
		got := []wireFrame{f}
		for {
			f, err := fr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("limit %d: frame %d: %v", limit, len(got), err)
			}
			f.Body = append([]byte(nil), f.Body...)
			got = append(got, f)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: %d frames differ from a plain read's %d", limit, len(got), len(want))
		}
	}
}

// TestFrameReaderSplits: the same frames come out whether the stream
// arrives whole, one byte at a time, or split in two at every offset.
func TestFrameReaderSplits(t *testing.T) {
	s := goldenStream()
	want, err := readAll(bytes.NewReader(s), DefaultMaxFrame)
	if err != nil || len(want) != 8 {
		t.Fatalf("whole: %d frames, %v", len(want), err)
	}
	got, err := readAll(iotest.OneByteReader(bytes.NewReader(s)), DefaultMaxFrame)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("one byte at a time: %d frames, %v", len(got), err)
	}
	step := 1
	if testing.Short() {
		step = 37
	}
	// Every offset where a split can change what the reader does: the
	// small frames and the big frame's header, the stream's last bytes,
	// and around each 4 KiB mark counted from the stream's start or from
	// the big frame's (the buffer's chunk and half-chunk bounds). Between
	// them, inside the big frame's records, a split only moves where one
	// copy stops, so every 97th offset stands for the rest (with the
	// whole range the test took 15-30 s, each split reading the stream).
	big := len(s) - 3000*msgSize - headerSize
	near := func(at, mark int) bool { return (at-mark)%4096 < 64 || (at-mark)%4096 >= 4096-64 }
	for at := 0; at <= len(s); at += step {
		if at > big+64 && len(s)-at > 64 && !near(at, 0) && !near(at, big) && at%97 != 0 {
			continue
		}
		r := io.MultiReader(bytes.NewReader(s[:at]), bytes.NewReader(s[at:]))
		got, err := readAll(r, DefaultMaxFrame)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d: %d frames, %v", at, len(got), err)
		}
	}
	// Cut short anywhere inside a frame: io.ErrUnexpectedEOF, never a
	// frame that was not whole.
	for at := 1; at < len(s); at += 1 + 20*step {
		got, err := readAll(bytes.NewReader(s[:at]), DefaultMaxFrame)
		whole := 0
		for n := 0; n < at; {
			f, k, e := parseFrame(s[n:at], DefaultMaxFrame)
			if e != nil {
				break
			}
			_ = f
			n += k
			whole++
		}
		if len(got) != whole {
			t.Fatalf("cut at %d: %d frames, %d whole", at, len(got), whole)
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v", at, err)
		}
	}
}

// hdr builds a header by hand.
func hdr(n uint32, ver, typ byte, rsv uint16) []byte {
	return []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), ver, typ, byte(rsv), byte(rsv >> 8)}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestMalformed: every input here is rejected with an error naming what
// is wrong; none panics.
func TestMalformed(t *testing.T) {
	rec := func(root, val uint64, kindTask, to uint32) []byte {
		m := make([]byte, msgSize)
		putU64(m[0:], root)
		putU64(m[8:], val)
		putU32(m[16:], kindTask)
		putU32(m[20:], to)
		return m
	}
	outRec := func(root uint64, kind, reason byte, pad uint16) []byte {
		r := make([]byte, outcomeSize)
		putU64(r, root)
		r[20], r[21], r[22], r[23] = kind, reason, byte(pad), byte(pad>>8)
		return r
	}
	msgsFrame := func(recs ...[]byte) []byte {
		body := cat(recs...)
		return cat(hdr(uint32(headerSize+len(body)), protoVersion, typeMsgs, 0), body)
	}
	outsFrame := func(recs ...[]byte) []byte {
		body := cat(recs...)
		return cat(hdr(uint32(headerSize+len(body)), protoVersion, typeOutcomes, 0), body)
	}
	helloBody := func(n uint32, ranges ...uint32) []byte {
		b := make([]byte, helloFixed)
		putU64(b[offHeClient:], 1)
		putU32(b[offHeMaxFrame:], DefaultMaxFrame)
		putU32(b[offHeRanges:], n)
		for _, r := range ranges {
			b = append(b, 0, 0, 0, 0)
			putU32(b[len(b)-4:], r)
		}
		return b
	}
	helloFrame := func(body []byte) []byte {
		return cat(hdr(uint32(headerSize+len(body)), protoVersion, typeHello, 0), body)
	}
	cases := []struct {
		name, in, want string
	}{
		{"oversized length prefix", string(hdr(9437184, protoVersion, typeMsgs, 0)), "frame length 9437184 exceeds limit 1048576"},
		{"max length prefix", string(hdr(^uint32(0), protoVersion, typeMsgs, 0)), "frame length 4294967295 exceeds limit"},
		{"length below header", string(hdr(7, protoVersion, typeHeartbeat, 0)), "frame length 7 below the 8-byte header"},
		{"zero length", string(hdr(0, protoVersion, typeHeartbeat, 0)), "frame length 0 below"},
		{"other version", string(hdr(8, 2, typeHeartbeat, 0)), "frame version 2, this side speaks 1"},
		{"version zero", string(hdr(8, 0, typeHeartbeat, 0)), "frame version 0"},
		{"type zero", string(hdr(8, protoVersion, 0, 0)), "unknown frame type 0"},
		{"type past the last", string(hdr(8, protoVersion, 8, 0)), "unknown frame type 8"},
		{"reserved bits", string(hdr(8, protoVersion, typeHeartbeat, 0x100)), "reserved bits 0x100"},
		{"heartbeat with a body", string(cat(hdr(9, protoVersion, typeHeartbeat, 0), []byte{0})), "heartbeat body of 1 bytes, want 0"},
		{"msgs partial record", string(cat(hdr(8+23, protoVersion, typeMsgs, 0), make([]byte, 23))), "msgs body of 23 bytes is not a whole number"},
		{"outcomes partial record", string(cat(hdr(8+25, protoVersion, typeOutcomes, 0), make([]byte, 25))), "outcomes body of 25 bytes"},
		{"challenge short", string(cat(hdr(8+39, protoVersion, typeChallenge, 0), make([]byte, 39))), "challenge body of 39 bytes, want 40"},
		{"welcome long", string(cat(hdr(8+25, protoVersion, typeWelcome, 0), make([]byte, 25))), "welcome body of 25 bytes, want 24"},
		{"hello short", string(cat(hdr(8+40, protoVersion, typeHello, 0), make([]byte, 40))), "hello body of 40 bytes"},
		{"hello odd ranges", string(cat(hdr(8+52, protoVersion, typeHello, 0), make([]byte, 52))), "hello body of 52 bytes"},
		{"close short", string(cat(hdr(8+3, protoVersion, typeClose, 0), make([]byte, 3))), "close body of 3 bytes out of range"},
		{"close too long", string(cat(hdr(8+4+513, protoVersion, typeClose, 0), make([]byte, 517))), "close body of 517 bytes out of range"},
		{"msg root zero", string(msgsFrame(rec(0, 1, 2<<24, 0))), "message 0 of 1: ackcore: ACK with root 0"},
		{"msg kind zero", string(msgsFrame(rec(1, 1, 0, 0))), "unknown message kind 0"},
		{"msg kind five", string(msgsFrame(rec(1, 1, 5<<24, 0))), "unknown message kind 5"},
		{"msg task too big", string(msgsFrame(rec(1, 1, 1<<24|ackcore.MaxTask+1, 0))), "task 1048576 exceeds MaxTask"},
		{"ack with a task", string(msgsFrame(rec(1, 1, 2<<24|3, 0))), "ACK root 0x1 carries task 3"},
		{"timeout too long", string(msgsFrame(rec(1, 1, 1<<24, 86400001))), "timeout 86400001 ms exceeds"},
		{"second record bad", string(msgsFrame(rec(1, 1, 2<<24, 0), rec(2, 1, 9<<24, 0))), "message 1 of 2"},
		{"outcome kind zero", string(outsFrame(outRec(1, 0, 0, 0))), "outcome 0 of 1: root 0x1 kind 0"},
		{"outcome kind four", string(outsFrame(outRec(1, 4, 0, 0))), "kind 4"},
		{"outcome reason past lost", string(outsFrame(outRec(1, 2, 7, 0))), "reason 7"},
		{"outcome pad", string(outsFrame(outRec(1, 1, 0, 1))), "pad 0x1"},
		{"outcome root zero", string(outsFrame(outRec(0, 1, 0, 0))), "root 0x0"},
		{"hello range count lies", string(helloFrame(helloBody(2, 0, 1))), "hello claims 2 task ranges in 8 bytes"},
		{"hello range past tasks", string(helloFrame(helloBody(1, 4000, 200))), "task range 0 [4000, 4200) outside the server's tasks [0, 4096)"},
		{"hello empty range", string(helloFrame(helloBody(1, 5, 0))), "task range 0 [5, 5)"},
		{"hello range wraps", string(helloFrame(helloBody(1, 0xffffffff, 2))), "outside the server's tasks"},
		{"close length lies", string(cat(hdr(8+6, protoVersion, typeClose, 0), []byte{0, 0, 5, 0, 'a', 'b'})), "need 5 bytes, have 2"},
		{"close trailing", string(cat(hdr(8+6, protoVersion, typeClose, 0), []byte{0, 0, 1, 0, 'a', 'b'})), "1 bytes after its 1-byte reason"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeAny([]byte(tc.in), DefaultMaxFrame)
			if err == nil {
				t.Fatalf("accepted %x", tc.in)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "netio: ") {
				t.Fatalf("error %q does not name the package", err)
			}
			// The same through a frameReader, one byte at a time: the
			// oversized prefix is refused after 4 bytes, without
			// reading (or allocating for) the rest.
			fr := newFrameReader(iotest.OneByteReader(strings.NewReader(tc.in)), DefaultMaxFrame)
			f, err := fr.Next()
			if err == nil {
				err = decodeBody(f)
			}
			if err == nil || errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(tc.want, "need") {
				t.Fatalf("FrameReader: %v", err)
			}
		})
	}
}

// decodeAny parses one frame and decodes its body by type.
func decodeAny(b []byte, limit int) error {
	f, _, err := parseFrame(b, limit)
	if err != nil {
		return err
	}
	return decodeBody(f)
}

func decodeBody(f wireFrame) error {
	var err error
	switch f.Type {
	case typeMsgs:
		_, err = decodeMsgBody(nil, f.Body)
	case typeOutcomes:
		_, err = decodeOutcomes(nil, f.Body)
	case typeChallenge:
		_, err = decodeChallenge(f.Body)
	case typeHello:
		_, err = decodeHello(f.Body, 4096)
	case typeWelcome:
		_, err = decodeWelcome(f.Body)
	case typeClose:
		_, _, err = decodeClose(f.Body)
	}
	return err
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func putU32(b []byte, v uint32) {
	for i := range 4 {
		b[i] = byte(v >> (8 * i))
	}
}

// TestRoundTripRecords: random valid messages and outcomes survive
// encoding; the decoders append to dst.
func TestRoundTripRecords(t *testing.T) {
	msgs := make([]ackcore.Msg, 1000)
	for i := range msgs {
		k := ackcore.Kind(1 + i%4)
		msgs[i] = ackcore.Msg{Root: uint64(i)*splitmix.Golden | 1, Val: uint64(i) << 40, Kind: k, TimeoutMs: uint32(i % 3 * 1000)}
		if k == ackcore.Init {
			msgs[i].Task = uint32(i) & ackcore.MaxTask
		}
	}
	b := appendMsgs([]byte("prefix"), msgs)
	f, n, err := parseFrame(b[6:], DefaultMaxFrame)
	if err != nil || n != len(b)-6 {
		t.Fatal(err)
	}
	pre := []ackcore.Msg{{Root: 9, Kind: ackcore.Fail}}
	got, err := decodeMsgBody(pre, f.Body)
	if err != nil || !reflect.DeepEqual(got[1:], msgs) || got[0] != pre[0] {
		t.Fatalf("msgs differ: %v", err)
	}
	outs := make([]ackcore.Outcome, 500)
	for i := range outs {
		outs[i] = ackcore.Outcome{Root: uint64(i + 1), Latency: time.Duration(i) * time.Microsecond, Task: uint32(i),
			Kind: ackcore.OutcomeKind(1 + i%3), Reason: ackcore.Reason(i % 7)}
	}
	f, _, err = parseFrame(appendOutcomes(nil, outs), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	gotO, err := decodeOutcomes(nil, f.Body)
	if err != nil || !reflect.DeepEqual(gotO, outs) {
		t.Fatalf("outcomes differ: %v", err)
	}
}

// TestEncodeAllocs: the encoders append into a buffer with room without
// allocating; the decoder into a slice with room likewise.
func TestEncodeAllocs(t *testing.T) {
	buf := make([]byte, 0, 1<<16)
	dst := make([]ackcore.Msg, 0, 1024)
	body := appendMsgs(nil, goldenMsgs)[headerSize:]
	n := testing.AllocsPerRun(100, func() {
		buf = appendMsgs(buf[:0], goldenMsgs)
		buf = appendOutcomes(buf, goldenOutcomes)
		buf = appendHeartbeat(buf)
		dst, _ = decodeMsgBody(dst[:0], body)
	})
	if n != 0 {
		t.Fatalf("%v allocations per encode/decode", n)
	}
}

// FuzzDecode: no input panics the frame parser, the body decoders or the
// frameReader; what parses re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, b := range goldenFrames() {
		f.Add(b)
	}
	f.Add(hdr(9437184, protoVersion, typeMsgs, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 16
		fr := newFrameReader(bytes.NewReader(b), limit)
		for {
			fr2, err := fr.Next()
			if err != nil {
				break
			}
			if err := decodeBody(fr2); err != nil {
				continue
			}
			// A valid msgs or outcomes frame re-encodes to itself.
			switch fr2.Type {
			case typeMsgs:
				m, _ := decodeMsgBody(nil, fr2.Body)
				if re := appendMsgs(nil, m); !bytes.Equal(re[headerSize:], fr2.Body) {
					t.Fatalf("msgs re-encode differently")
				}
			case typeOutcomes:
				o, _ := decodeOutcomes(nil, fr2.Body)
				if re := appendOutcomes(nil, o); !bytes.Equal(re[headerSize:], fr2.Body) {
					t.Fatalf("outcomes re-encode differently")
				}
			}
		}
		if len(b) > 0 {
			// The same bytes split at a point chosen by the input parse
			// to the same frames.
			at := int(b[0]) % (len(b) + 1)
			whole, e1 := readAll(bytes.NewReader(b), limit)
			split, e2 := readAll(io.MultiReader(bytes.NewReader(b[:at]), bytes.NewReader(b[at:])), limit)
			if !reflect.DeepEqual(whole, split) || (e1 == nil) != (e2 == nil) {
				t.Fatalf("split at %d: %d frames (%v) vs %d (%v)", at, len(split), e2, len(whole), e1)
			}
		}
	})
}

// parseFrame refuses an oversized length prefix from its first four
// bytes, naming the value (was ExampleParseFrame, before the frame parser
// was unexported).
func TestParseFrameOversized(t *testing.T) {
	hdr := []byte{0x00, 0x00, 0x90, 0x00, protoVersion, typeMsgs, 0, 0} // 9 MiB
	_, _, err := parseFrame(hdr, DefaultMaxFrame)
	const want = "netio: frame length 9437184 exceeds limit 1048576"
	if err == nil || err.Error() != want {
		t.Fatalf("parseFrame: %v, want %q", err, want)
	}
}

// TestDecodeMsgsRule: decodeMsgs' one-flag check accepts a record
// exactly when the reference rule does (ackcore's Msg.Valid, a task only
// on an INIT, the timeout cap, the INIT's task owned), and a frame with
// bad records is refused naming the first of them.
func TestDecodeMsgsRule(t *testing.T) {
	const maxTo = 5000
	owns := func(task uint32) bool { return task%3 != 2 }
	roots := []uint64{0, 1, 1 << 63}
	kinds := []uint32{0, 1, 2, 3, 4, 5, 255}
	tasks := []uint32{0, 1, 2, ackcore.MaxTask, ackcore.MaxTask + 1, taskMask}
	tos := []uint32{0, maxTo, maxTo + 1, ackcore.MaxTimeoutMs + 1}
	rec := func(root uint64, kind, task, to uint32) []byte {
		r := make([]byte, msgSize)
		binary.LittleEndian.PutUint64(r[offMsgRoot:], root)
		binary.LittleEndian.PutUint64(r[offMsgVal:], 7)
		binary.LittleEndian.PutUint32(r[offMsgKind:], kind<<24|task)
		binary.LittleEndian.PutUint32(r[offMsgTimeout:], to)
		return r
	}
	good := rec(9, uint32(ackcore.Ack), 0, 0)
	cases, bad := 0, 0
	for _, root := range roots {
		for _, kind := range kinds {
			for _, task := range tasks {
				for _, to := range tos {
					m := ackcore.Msg{Root: root, Kind: ackcore.Kind(kind), Task: task, TimeoutMs: to}
					want := m.Valid() && (m.Kind == ackcore.Init || task == 0) && to <= maxTo &&
						(m.Kind != ackcore.Init || owns(task))
					r := rec(root, kind, task, to)
					// Alone, and as the third record of a frame whose
					// other records are good.
					_, _, _, err := decodeMsgs(nil, r, owns, maxTo)
					if (err == nil) != want {
						t.Fatalf("root %#x kind %d task %d timeout %d: err %v, want ok %v", root, kind, task, to, err, want)
					}
					body := slices.Concat(good, good, r, good)
					out, _, _, err := decodeMsgs(nil, body, owns, maxTo)
					if (err == nil) != want || !want && !strings.Contains(err.Error(), "message 2 of 4") {
						t.Fatalf("root %#x kind %d task %d timeout %d in a frame: err %v, want ok %v", root, kind, task, to, err, want)
					}
					if !want && len(out) != 0 {
						t.Fatalf("refused frame returned %d messages", len(out))
					}
					cases++
					if !want {
						bad++
					}
				}
			}
		}
	}
	if bad == 0 || bad == cases {
		t.Fatalf("%d of %d cases refused: the table tests one side only", bad, cases)
	}
}

package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/buildinfo"
)

// TestErrorWording pins ackerd's error texts: each names the flag to
// change, the file at fault, and bytes as people read them.
func TestErrorWording(t *testing.T) {
	t.Setenv("ACKERD_SECRET", secret)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "cert.der")
	if err := os.WriteFile(notPEM, []byte{0x30, 0x82, 0x01, 0x0a}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-ring-size", "1000"}, "ackerd: netio: acker: -ring-size 1000 is not a power of two in [2, 1048576] (31.6 KiB a ring, 3.9 MiB for -shards 1 × -max-conns 128)\n"},
		{[]string{"-ring-size", "1048576"}, "ackerd: netio: acker: -shards 1 × -max-pending 1048576, -max-conns 128 × -ring-size 1048576, 1 receivers × OutcomeRingSize 4096 and Backlog 4096 " +
			"may hold 8.2 GiB (tables 168.4 MiB, rings 4.0 GiB, outcome rings 128.3 KiB, held outcomes 4.1 GiB), over -max-bytes 4.0 GiB\n"},
		{[]string{"-max-pending", "100000000", "-shards", "4"}, "ackerd: netio: acker: Shard: ackcore: -max-pending 100000000 needs up to 15.7 GiB, 3.1 GiB of it for the table (allocated up front), over -max-bytes 4.0 GiB\n"},
		{[]string{"-max-bytes", "1MiB"}, "ackerd: netio: acker: Shard: ackcore: -max-pending 1048576 needs up to 168.4 MiB, 33.4 MiB of it for the table (allocated up front), over -max-bytes 1.0 MiB\n"},
		{[]string{"-tls-client-ca", notPEM}, "ackerd: -tls-client-ca " + notPEM + " needs -tls-cert and -tls-key: mutual TLS is TLS with the server's own certificate first\n"},
		{[]string{"-tls-cert", notPEM}, "ackerd: -tls-cert " + notPEM + " needs -tls-key (its private key)\n"},
		{[]string{"-tls-key", notPEM}, "ackerd: -tls-key " + notPEM + " needs -tls-cert (its certificate)\n"},
		{[]string{"-tls-cert", notPEM, "-tls-key", notPEM}, "ackerd: -tls-cert " + notPEM + ": not PEM (no \"-----BEGIN\" block in its 4 bytes)\n"},
	} {
		var b bytes.Buffer
		if rc := run(append([]string{"-addr", "127.0.0.1:0"}, tc.args...), &b, nil); rc != 2 || b.String() != tc.want {
			t.Errorf("%q exited %d:\n%q\nwant\n%q", tc.args, rc, b.String(), tc.want)
		}
	}
}

func TestMaxBytesFlag(t *testing.T) {
	for in, want := range map[string]int64{"1073741824": 1 << 30, "4GiB": 4 << 30, "512 MiB": 512 << 20, "64KiB": 64 << 10, "1TiB": 1 << 40, "100B": 100} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1GiB", "4GB", "1.5GiB", "9999999TiB", "GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("Set(%q) = %v, want an error naming it", in, err)
		}
	}
}

// TestVersion: -version prints the line every xorack command prints
// (ackbench's TestHelpAndVersion holds it to the same function).
func TestVersion(t *testing.T) {
	var b bytes.Buffer
	if rc := run([]string{"-version"}, &b, nil); rc != 0 {
		t.Fatalf("-version exited %d: %s", rc, b.String())
	}
	if want := buildinfo.Read().Line("ackerd") + "\n"; b.String() != want || !strings.Contains(want, " "+runtime.Version()+")") {
		t.Fatalf("-version printed %q, want %q", b.String(), want)
	}
}

// TestTLSClientCANotPEM: with a good key pair, a -tls-client-ca that is
// not PEM is named.
func TestTLSClientCANotPEM(t *testing.T) {
	t.Setenv("ACKERD_SECRET", secret)
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ackerd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile, ca := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.der")
	for f, b := range map[string][]byte{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		ca: der,
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	want := "ackerd: -tls-client-ca " + ca + ": not PEM (no \"-----BEGIN\" block in its " + human(int64(len(der)))
	if rc := run([]string{"-addr", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", keyFile, "-tls-client-ca", ca}, &b, nil); rc != 2 || !strings.HasPrefix(b.String(), want) {
		t.Fatalf("exit %d: %q, want %q...", rc, b.String(), want)
	}
	b.Reset()
	want = "ackerd: -tls-cert " + keyFile + " and -tls-key " + cert + ": tls: "
	if rc := run([]string{"-addr", "127.0.0.1:0", "-tls-cert", keyFile, "-tls-key", cert}, &b, nil); rc != 2 || !strings.HasPrefix(b.String(), want) {
		t.Fatalf("swapped pair: exit %d: %q, want %q...", rc, b.String(), want)
	}
}

package netio

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// testCA issues certificates for loopback names.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestMutualTLS: with TLS and client certificates required, a client with
// a certificate from the CA completes its trees; one without a
// certificate, and one that speaks plain TCP, fail the handshake with a
// logged reason and never reach the acker.
func TestMutualTLS(t *testing.T) {
	ca := newCA(t)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server", x509.ExtKeyUsageServerAuth)},
		ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	s := startServer(t, func(c *ServerConfig) { c.TLS = srvTLS; c.HandshakeTimeout = time.Second })

	cfg := clientCfg(s.addr)
	cfg.TLS = &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.issue(t, "client", x509.ExtKeyUsageClientAuth)}}
	clog := &syncBuf{}
	cfg.Logger = slog.New(slog.NewTextHandler(clog, nil))
	c := mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1})
	rng := mrand.New(mrand.NewPCG(8, 8))
	for i := 1; i <= 500; i++ {
		if err := c.Sender(0).SendBatch(tree(rng, uint64(i), 0, 3)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Sender(0).Flush()
	got := collect(t, c.Inbox(0), 500, 5*time.Second)
	for root, os := range got {
		if len(os) != 1 || os[0].Kind != ackcore.Completed {
			t.Fatalf("root %d: %v; server log:\n%s\nclient log:\n%s", root, os, s.log, clog)
		}
	}
	c.Stop()

	noCert := clientCfg(s.addr)
	noCert.TLS = &tls.Config{RootCAs: ca.pool}
	noCert.DialTimeout = time.Second
	if _, err := Dial(noCert, acker.Spec{Producers: 1, Tasks: 1}); err == nil {
		t.Fatal("a client without a certificate connected")
	}
	plain := clientCfg(s.addr)
	plain.DialTimeout = time.Second
	if _, err := Dial(plain, acker.Spec{Producers: 1, Tasks: 1}); err == nil {
		t.Fatal("a plain TCP client connected to a TLS server")
	}
	waitFor(t, 3*time.Second, "the failed TLS handshakes in the log", func() bool {
		return strings.Count(s.log.String(), "TLS handshake") >= 2
	})
	if st := s.Stats(); st.HandshakeFails < 2 || st.Msgs != 500*4 {
		t.Fatalf("stats %+v", st)
	}
}

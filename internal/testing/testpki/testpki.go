// Package testpki issues throwaway certificates for tests of TLS and
// mutual TLS (Kafka and Temporal connections).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway CA with a server certificate for 127.0.0.1 and
// localhost and a client certificate (CN reckon); the CA, server and client
// files are written to a test temp dir.
type PKI struct {
	Pool                          *x509.CertPool
	Server                        tls.Certificate
	CAFile, ClientCert, ClientKey string
	ServerCert, ServerKey         string
}

// New issues a PKI whose server certificate has common name serverCN.
func New(t testing.TB, serverCN string) PKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "reckon test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, []byte) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := PKI{Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.CAFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	sc, sk := leaf(2, serverCN, x509.ExtKeyUsageServerAuth)
	if p.Server, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	p.ServerCert, p.ServerKey = write("server.pem", sc), write("server-key.pem", sk)
	cc, ck := leaf(3, "reckon", x509.ExtKeyUsageClientAuth)
	p.ClientCert, p.ClientKey = write("client.pem", cc), write("client-key.pem", ck)
	return p
}

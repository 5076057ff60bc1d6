package webhookstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Certificate is a webhook certificate source (webhooks.Certificates) that
// serves one self-signed certificate for 127.0.0.1, the address the API
// server calls in tests (clientConfig.url on loopback).
type Certificate struct {
	// Cert is served at every handshake.
	Cert *tls.Certificate
	// CAPEM is the certificate as PEM, for a webhook configuration's caBundle.
	CAPEM []byte
	// Pool trusts it, for test clients.
	Pool *x509.CertPool

	broken atomic.Bool
}

// NewCertificate makes a certificate for 127.0.0.1 valid for a day.
func NewCertificate() (*Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "echelon-webhook-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &Certificate{
		Cert:  &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Pool:  pool,
	}, nil
}

// GetCertificate serves the certificate.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.Cert, nil
}

// Check fails once Break was called, as a source whose certificate expired.
func (c *Certificate) Check(*http.Request) error {
	if c.broken.Load() {
		return errors.New("certificate expired")
	}
	return nil
}

// Break makes Check fail from now on.
func (c *Certificate) Break() { c.broken.Store(true) }

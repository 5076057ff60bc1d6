package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// maxBackdate bounds how far NotBefore is set before the moment of issue, so
// that a verifier whose clock runs a little behind ours (the API server's)
// does not see a fresh certificate as not yet valid.
const maxBackdate = time.Minute

// caCommonNamePrefix starts the subject of every CA. The time of issue follows,
// so two CAs of one rotation have different subjects and read apart in logs.
const caCommonNamePrefix = "echelon-webhook-ca@"

// keyPair is a certificate with its private key, both parsed and as PEM.
type keyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// SANs are the names a serving certificate is valid for.
type SANs struct {
	DNSNames []string
	IPs      []net.IP
}

// ServingSANs returns the names of the self-signed serving certificate: the
// Service in every form a client may use (<svc>, <svc>.<ns>, <svc>.<ns>.svc,
// <svc>.<ns>.svc.<clusterDomain>), then each extra entry as an IP when it parses
// as one, else as a DNS name. Duplicates are dropped; order is kept.
func ServingSANs(service, namespace, clusterDomain string, extra []string) SANs {
	var s SANs
	addDNS := func(name string) {
		if name != "" && !slices.Contains(s.DNSNames, name) {
			s.DNSNames = append(s.DNSNames, name)
		}
	}
	if service != "" {
		addDNS(service)
		if namespace != "" {
			addDNS(service + "." + namespace)
			addDNS(service + "." + namespace + ".svc")
			if clusterDomain != "" {
				addDNS(service + "." + namespace + ".svc." + clusterDomain)
			}
		}
	}
	for _, e := range extra {
		if ip := net.ParseIP(e); ip != nil {
			if !slices.ContainsFunc(s.IPs, ip.Equal) {
				s.IPs = append(s.IPs, ip)
			}
			continue
		}
		addDNS(e)
	}
	return s
}

// matches reports whether cert names exactly these SANs, in any order.
func (s SANs) matches(cert *x509.Certificate) bool {
	sameDNS := len(cert.DNSNames) == len(s.DNSNames) && !slices.ContainsFunc(s.DNSNames, func(n string) bool {
		return !slices.Contains(cert.DNSNames, n)
	})
	sameIPs := len(cert.IPAddresses) == len(s.IPs) && !slices.ContainsFunc(s.IPs, func(ip net.IP) bool {
		return !slices.ContainsFunc(cert.IPAddresses, ip.Equal)
	})
	return sameDNS && sameIPs
}

// backdate is how far before now a certificate of this lifetime starts: a
// tenth of it, at most maxBackdate, so short test lifetimes keep their shape.
func backdate(validity time.Duration) time.Duration {
	return min(maxBackdate, validity/10)
}

// newCA creates a self-signed CA valid from about now for validity.
func newCA(now time.Time, validity time.Duration) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s%d", caCommonNamePrefix, now.Unix())},
		NotBefore:             now.Add(-backdate(validity)),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return issue(tmpl, nil)
}

// newServing creates a serving certificate for sans signed by ca. It ends no
// later than ca does: a certificate outliving its issuer would fail
// verification before its own renewal time.
func newServing(now time.Time, validity time.Duration, ca *keyPair, sans SANs) (*keyPair, error) {
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	cn := "echelon-webhook"
	if len(sans.DNSNames) > 0 {
		cn = sans.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   now.Add(-backdate(validity)),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    sans.DNSNames,
		IPAddresses: sans.IPs,
	}
	return issue(tmpl, ca)
}

// issue signs tmpl with a fresh ECDSA P-256 key, by parent or by itself when
// parent is nil.
func issue(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return &keyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parseCerts decodes every CERTIFICATE block of data.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs, nil
}

// parseKey decodes the first private key of data, in PKCS#8, SEC 1 or PKCS#1.
func parseKey(data []byte) (crypto.Signer, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no private key")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%T is not a signing key", key)
		}
		return signer, nil
	}
}

// parseKeyPair decodes a certificate (the first of certPEM) and its key, and
// checks that they belong together.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return nil, errors.New("key does not match the certificate")
	}
	return &keyPair{Cert: certs[0], Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// encodeCerts is the PEM of certs, in order.
func encodeCerts(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// renewAt is when two thirds of cert's lifetime have passed.
func renewAt(cert *x509.Certificate) time.Time {
	return cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) * 2 / 3)
}

// expired reports whether cert is no longer valid at now.
func expired(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(cert.NotAfter)
}

// signedBy reports whether ca signed cert.
func signedBy(cert, ca *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, ca.RawSubject) && cert.CheckSignatureFrom(ca) == nil
}

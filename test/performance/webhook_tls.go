/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// trust plays the API server's side of the webhook's TLS: it trusts the CA
// bundle injected into the webhook configuration, takes a new bundle from the
// next handshake on, and verifies the server's certificate for the webhook's
// URL host. It also records which certificate each handshake met.
type trust struct {
	host  string
	roots atomic.Pointer[x509.CertPool]

	mu      sync.Mutex
	bundle  []byte
	changes []time.Time // when a different bundle was taken
	served  []*servedCert
}

// servedCert is a serving certificate the clients met in handshakes.
type servedCert struct {
	Serial string `json:"serial"`
	Issuer string `json:"issuer"`
	// First and last handshake that presented it.
	First      time.Time `json:"firstHandshake"`
	Last       time.Time `json:"lastHandshake"`
	Handshakes int       `json:"handshakes"`
}

func newTrust(host string) *trust { return &trust{host: host} }

// setBundle trusts the PEM bundle from the next handshake on.
func (t *trust) setBundle(pem []byte, at time.Time) error {
	pool := x509.NewCertPool()
	if len(pem) > 0 && !pool.AppendCertsFromPEM(pem) {
		return errors.New("CA bundle: no certificate in it")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if bytes.Equal(pem, t.bundle) {
		return nil
	}
	t.roots.Store(pool)
	t.bundle = bytes.Clone(pem)
	t.changes = append(t.changes, at)
	return nil
}

// currentBundle is the bundle trusted now.
func (t *trust) currentBundle() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bundle
}

// bundleChanges are the times a new bundle was taken.
func (t *trust) bundleChanges() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.changes)
}

// tlsConfig verifies in VerifyConnection, against the bundle of the moment,
// what crypto/tls would verify against fixed roots.
func (t *trust) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified by verify, against roots that change
		VerifyConnection:   t.verify,
	}
}

func (t *trust) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the webhook presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	t.record(leaf, time.Now())
	roots := t.roots.Load()
	if roots == nil {
		return errors.New("no CA bundle injected yet")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: t.host}); err != nil {
		return fmt.Errorf("serving certificate %s: %w", serialOf(leaf), err)
	}
	return nil
}

// record counts a handshake that met cert.
func (t *trust) record(cert *x509.Certificate, at time.Time) {
	serial := serialOf(cert)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.served {
		if s.Serial == serial {
			s.Last = at
			s.Handshakes++
			return
		}
	}
	t.served = append(t.served, &servedCert{Serial: serial, Issuer: cert.Issuer.CommonName, First: at, Last: at, Handshakes: 1})
}

// servedCerts lists the certificates met in handshakes since the last
// forget, in the order they were first met.
func (t *trust) servedCerts() []servedCert {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]servedCert, len(t.served))
	for i, s := range t.served {
		out[i] = *s
	}
	return out
}

// forget drops the record of handshakes and bundle changes, for a phase
// that counts its own.
func (t *trust) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.served, t.changes = nil, nil
}

func serialOf(cert *x509.Certificate) string { return cert.SerialNumber.Text(16) }

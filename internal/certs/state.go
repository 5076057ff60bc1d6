package certs

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the Secret that holds the self-signed certificates. The layout is
// that of a kubernetes.io/tls Secret with its CA, so the Secret can also be
// mounted or read by tools that know that type.
const (
	// KeyCABundle holds the CAs clients must trust, the current CA first: the
	// bytes injected as caBundle.
	KeyCABundle = "ca.crt"
	// KeyCAKey is the private key of the current CA, the first of the bundle.
	// The kubernetes.io/tls type has no such key; tools ignore it.
	KeyCAKey = "ca.key"
	// KeyServingCert and KeyServingKey are the serving certificate and its key.
	KeyServingCert = corev1.TLSCertKey
	KeyServingKey  = corev1.TLSPrivateKeyKey
)

// InjectedAnnotation records on the Secret when its current CA bundle was first
// seen in every labelled webhook configuration, as "<RFC 3339 time> <bundle
// digest>". The digest ties the record to one bundle: a record left over from
// an earlier bundle does not count.
const InjectedAnnotation = "echelon.dev/ca-bundle-injected"

// State is the parsed content of the Secret.
type State struct {
	// CA is the current CA with its key, nil when the Secret holds none that is
	// usable; Problem then says why.
	CA      *keyPair
	Problem string
	// Bundle is every CA clients trust, the current one first.
	Bundle []*x509.Certificate
	// Serving is the certificate in service with its key; nil when missing or
	// unusable.
	Serving *keyPair
	// InjectedAt is when Bundle was first seen injected everywhere; zero when
	// not recorded for this bundle.
	InjectedAt time.Time
}

// ParseSecret reads the State of a Secret; nil reads as an empty State.
func ParseSecret(secret *corev1.Secret) State {
	if secret == nil {
		return State{Problem: "no Secret"}
	}
	var s State
	bundlePEM := secret.Data[KeyCABundle]
	if len(bundlePEM) == 0 {
		s.Problem = "no " + KeyCABundle
	} else if bundle, err := parseCerts(bundlePEM); err != nil {
		s.Problem = fmt.Sprintf("%s: %v", KeyCABundle, err)
	} else if ca, err := parseKeyPair(bundlePEM, secret.Data[KeyCAKey]); err != nil {
		s.Problem = fmt.Sprintf("current CA (first of %s) and %s: %v", KeyCABundle, KeyCAKey, err)
	} else if !ca.Cert.IsCA {
		s.Problem = fmt.Sprintf("first certificate of %s is not a CA", KeyCABundle)
	} else {
		s.CA, s.Bundle = ca, bundle
		// The CA's own PEM, not the whole bundle, so signing code sees one certificate.
		s.CA.CertPEM = encodeCerts(bundle[:1])
	}
	if serving, err := parseKeyPair(secret.Data[KeyServingCert], secret.Data[KeyServingKey]); err == nil {
		s.Serving = serving
	}
	if at, digest, ok := strings.Cut(secret.Annotations[InjectedAnnotation], " "); ok && digest == bundleDigest(bundlePEM) {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			s.InjectedAt = t
		}
	}
	return s
}

// BundlePEM is the CA bundle as injected.
func (s State) BundlePEM() []byte { return encodeCerts(s.Bundle) }

// writeTo stores s in secret's data and annotations, leaving other keys alone.
func (s State) writeTo(secret *corev1.Secret) {
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	bundle := s.BundlePEM()
	secret.Data[KeyCABundle] = bundle
	secret.Data[KeyCAKey] = s.CA.KeyPEM
	secret.Data[KeyServingCert] = s.Serving.CertPEM
	secret.Data[KeyServingKey] = s.Serving.KeyPEM
	if s.InjectedAt.IsZero() {
		delete(secret.Annotations, InjectedAnnotation)
		return
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[InjectedAnnotation] = s.InjectedAt.UTC().Format(time.RFC3339Nano) + " " + bundleDigest(bundle)
}

// bundleDigest names a bundle in InjectedAnnotation.
func bundleDigest(bundlePEM []byte) string {
	sum := sha256.Sum256(bundlePEM)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// sameCerts reports whether a and b hold the same certificates in the same order.
func sameCerts(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Raw, b[i].Raw) {
			return false
		}
	}
	return true
}

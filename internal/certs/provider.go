package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/options"
)

// InjectCALabel marks the ValidatingWebhookConfigurations and
// MutatingWebhookConfigurations whose webhooks get the self-signed CA bundle,
// with the value "<namespace>.<secret>" of the Secret that holds it.
const InjectCALabel = "echelon.dev/inject-ca-from"

// Provider supplies the webhook server's certificate.
//
// The operator calls Bootstrap before the manager starts, so a certificate is
// loaded before the server listens, and adds the Provider to the manager: it
// is a Runnable that runs on every replica, since every replica serves.
type Provider interface {
	// GetCertificate is tls.Config.GetCertificate: each handshake gets the
	// certificate current at that moment.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Check is a healthz checker: it fails while no certificate is loaded or
	// the loaded one has expired.
	Check(*http.Request) error
	// Bootstrap loads the first certificate (creating it in self-signed mode).
	Bootstrap(ctx context.Context) error
	// Start keeps the certificate current until ctx ends.
	Start(ctx context.Context) error
	// NeedLeaderElection is false: every replica serves and needs its certificate.
	NeedLeaderElection() bool
	// Rotate replaces the serving certificate now and returns once this
	// replica serves the new one: a new serving certificate in self-signed
	// mode, a re-read of the files otherwise.
	Rotate(ctx context.Context) error
}

var (
	_ Provider                       = &SelfSigned{}
	_ Provider                       = &Files{}
	_ manager.LeaderElectionRunnable = &SelfSigned{}
	_ manager.LeaderElectionRunnable = &Files{}
)

// New returns the Provider the options ask for: the files of --tls-cert-file
// and --tls-key-file, else a self-signed certificate kept in
// --webhook-cert-secret in the operator's namespace.
func New(cfg *rest.Config, o options.Options) (Provider, error) {
	w := o.Webhook
	if w.CertFile != "" {
		return NewFiles(w.CertFile, w.KeyFile), nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	ns := o.OperatorNamespace()
	opts := SelfSignedOptions{
		Namespace:    ns,
		SecretName:   w.CertSecret,
		SANs:         ServingSANs(w.Service, ns, o.ClusterDomain, w.ExtraSANs),
		CertValidity: w.CertValidity,
		CAValidity:   w.CAValidity,
	}
	if o.GrafanaCompat {
		grafana := ServingSANs(o.GrafanaCompatService, ns, o.ClusterDomain, nil)
		opts.SANs = ServingSANs(w.Service, ns, o.ClusterDomain, append(slices.Clone(w.ExtraSANs), grafana.DNSNames...))
		opts.AlsoInject = []string{GrafanaInjectionSelector(ns)}
	}
	return NewSelfSigned(cs, opts)
}

// The Grafana rollout-operator's labels on the webhook configurations that
// get its CA: compat mode injects Echelon's into them instead.
const (
	GrafanaInjectCALabel  = "grafana.com/inject-rollout-operator-ca"
	GrafanaNamespaceLabel = "grafana.com/namespace"
)

// GrafanaInjectionSelector selects the webhook configurations the Grafana
// rollout-operator of namespace injects its CA into.
func GrafanaInjectionSelector(namespace string) string {
	return GrafanaInjectCALabel + "=true," + GrafanaNamespaceLabel + "=" + namespace
}

// served is the certificate a replica presents, swapped atomically so that a
// handshake never waits for a reload.
type served struct {
	cert atomic.Pointer[tls.Certificate]
}

var errNoCertificate = errors.New("no webhook serving certificate loaded yet")

func (s *served) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errNoCertificate
}

func (s *served) Check(*http.Request) error {
	c := s.cert.Load()
	if c == nil {
		return errNoCertificate
	}
	if now := time.Now(); expired(c.Leaf, now) {
		return fmt.Errorf("webhook serving certificate expired at %s", c.Leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// withLeaf returns cert with its Leaf parsed: tls.X509KeyPair fills it
// unless GODEBUG x509keypairleaf=0 says not to, and set and Check read it.
func withLeaf(cert *tls.Certificate) (*tls.Certificate, error) {
	if cert.Leaf != nil {
		return cert, nil
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse webhook certificate: %w", err)
	}
	c := *cert
	c.Leaf = leaf
	return &c, nil
}

// set serves cert from the next handshake on, and counts and logs the change
// unless cert is the one already served. cert.Leaf must be set.
func (s *served) set(cert *tls.Certificate, log logr.Logger) {
	old := s.cert.Load()
	if old != nil && bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		return
	}
	s.cert.Store(cert)
	metrics.SetWebhookCertificate(cert.Leaf.NotAfter, old != nil)
	leaf := cert.Leaf
	if old == nil {
		log.Info("webhook serving certificate loaded", "serial", leaf.SerialNumber.Text(16), "issuer", leaf.Issuer.CommonName, "notAfter", leaf.NotAfter)
		return
	}
	log.Info("webhook serving certificate rotated", "serial", leaf.SerialNumber.Text(16), "issuer", leaf.Issuer.CommonName,
		"notAfter", leaf.NotAfter, "previousSerial", old.Leaf.SerialNumber.Text(16), "previousIssuer", old.Leaf.Issuer.CommonName)
}

package certs

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/echelon-operator/echelon/internal/options"
)

func TestNewFromOptions(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	t.Setenv("POD_NAMESPACE", "ops")

	o := options.Default()
	o.Webhook.CertFile, o.Webhook.KeyFile = "/tls/tls.crt", "/tls/tls.key"
	if p, err := New(cfg, o); err != nil {
		t.Fatal(err)
	} else if _, ok := p.(*Files); !ok {
		t.Errorf("--tls-cert-file: got %T, want *Files", p)
	}

	o = options.Default()
	o.Webhook.ExtraSANs = []string{"127.0.0.1"}
	p, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := p.(*SelfSigned)
	if !ok {
		t.Fatalf("no files: got %T, want *SelfSigned", p)
	}
	if got, want := s.InjectionSelector(), InjectCALabel+"=ops.echelon-webhook-tls"; got != want {
		t.Errorf("selector %q, want %q", got, want)
	}
	if got := s.policy.SANs.DNSNames; len(got) != 4 || got[3] != "echelon-webhook.ops.svc.cluster.local" {
		t.Errorf("DNS names %v", got)
	}
	if s.policy.Propagation != defaultPropagation {
		t.Errorf("propagation %s, want %s", s.policy.Propagation, defaultPropagation)
	}

	o.Webhook.CertSecret = strings.Repeat("s", 60)
	if _, err := New(cfg, o); err == nil || !strings.Contains(err.Error(), InjectCALabel) {
		t.Errorf("a Secret name too long for the label value: %v", err)
	}
}

func TestNewSelfSignedRefuses(t *testing.T) {
	good := SelfSignedOptions{Namespace: "ops", SecretName: "s", SANs: testSANs, CertValidity: time.Minute, CAValidity: time.Hour}
	tests := []struct {
		name   string
		mutate func(*SelfSignedOptions)
	}{
		{"no namespace", func(o *SelfSignedOptions) { o.Namespace = "" }},
		{"no names", func(o *SelfSignedOptions) { o.SANs = SANs{} }},
		{"CA shorter than the serving certificate", func(o *SelfSignedOptions) { o.CAValidity = time.Second }},
		{"no serving validity", func(o *SelfSignedOptions) { o.CertValidity = 0 }},
	}
	if _, err := NewSelfSigned(nil, good); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for _, tt := range tests {
		o := good
		tt.mutate(&o)
		if _, err := NewSelfSigned(nil, o); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	o := good
	o.CertValidity, o.CAValidity = 12*time.Second, 24*time.Second
	if p, err := NewSelfSigned(nil, o); err != nil {
		t.Fatal(err)
	} else if p.policy.Propagation != 2*time.Second {
		t.Errorf("propagation of a 24s CA: %s, want 2s", p.policy.Propagation)
	}
}

// TestLoadWithoutLeaf: with GODEBUG x509keypairleaf=0, tls.X509KeyPair leaves
// Leaf nil; the self-signed provider must still serve the certificate (Files
// already parses the leaf itself) rather than panic on it.
func TestLoadWithoutLeaf(t *testing.T) {
	t.Setenv("GODEBUG", "x509keypairleaf=0")
	p := newUnstartedSelfSigned(t)
	s, err := apply(ActionCreate, State{}, time.Now(), p.policy)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	s.writeTo(secret)
	if err := p.load(secret); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(nil); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestLoadNeverGoesBack: a replica that served the certificate of a newer
// Secret (Rotate before its informer synced loads the written Secret
// directly) keeps it when the informer then delivers the Secret as its first
// list read it, older: found by TestRotate under load, which counted four
// rotations for two (the old certificate served again for a moment).
func TestLoadNeverGoesBack(t *testing.T) {
	p := newUnstartedSelfSigned(t)
	first, err := apply(ActionCreate, State{}, time.Now(), p.policy)
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := apply(ActionRenewServing, first, time.Now(), p.policy)
	if err != nil {
		t.Fatal(err)
	}
	older, newer := &corev1.Secret{}, &corev1.Secret{}
	first.writeTo(older)
	renewed.writeTo(newer)
	older.ResourceVersion, newer.ResourceVersion = "41", "42"
	for _, s := range []*corev1.Secret{newer, older} {
		if err := p.load(s); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := p.GetCertificate(nil); !c.Leaf.Equal(renewed.Serving.Cert) {
		t.Error("serving the older Secret's certificate after the newer one's")
	}
	newest := newer.DeepCopy()
	newest.ResourceVersion = "43"
	first.writeTo(newest) // a later version may hold any certificate
	if err := p.load(newest); err != nil {
		t.Fatal(err)
	}
	if c, _ := p.GetCertificate(nil); !c.Leaf.Equal(first.Serving.Cert) {
		t.Error("a newer Secret's certificate not served")
	}
}

// newUnstartedSelfSigned is a self-signed provider with no client, for tests
// that only load Secrets into it.
func newUnstartedSelfSigned(t *testing.T) *SelfSigned {
	t.Helper()
	p, err := NewSelfSigned(nil, SelfSignedOptions{Namespace: "ns", SecretName: "tls", SANs: SANs{DNSNames: []string{"svc"}},
		CertValidity: time.Hour, CAValidity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

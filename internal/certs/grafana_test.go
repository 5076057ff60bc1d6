/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package certs

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createGrafana creates a ValidatingWebhookConfiguration labelled as the
// Grafana rollout-operator of namespace finds the ones to inject its CA
// into, and lets the operator patch it.
func (e *certEnv) createGrafana(name, namespace string) string {
	e.t.Helper()
	c := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name:   e.ns + "-" + name,
		Labels: map[string]string{GrafanaInjectCALabel: "true", GrafanaNamespaceLabel: namespace},
	}, Webhooks: []admissionv1.ValidatingWebhook{webhook(name + ".grafana.certs.test")}}
	if err := e.grantPatch(c.Name); err != nil {
		e.t.Fatal(err)
	}
	api := e.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := api.Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = api.Delete(context.Background(), c.Name, metav1.DeleteOptions{}) })
	return c.Name
}

// TestGrafanaInjection: with AlsoInject (compat mode), the configurations
// labelled for the Grafana operator of the namespace get the bundle, those
// made after the start too (the incumbent injects at start-up only), those
// of another namespace not; and a CA rotation moves the serving
// certificate to the new CA only once they hold its bundle.
func TestGrafanaInjection(t *testing.T) {
	e := newCertEnv(t)
	before := e.createGrafana("no-downscale", e.ns)
	elsewhere := e.createGrafana("elsewhere", "another-namespace")
	opts := e.options()
	opts.Propagation = 2 * time.Second
	opts.AlsoInject = []string{GrafanaInjectionSelector(e.ns)}
	ps := e.providers(2, opts)
	e.start(ps...)
	bundle := e.secret()[KeyCABundle]
	eventually(t, 20*time.Second, "the bundle in the Grafana configuration made before the start", func() bool {
		return allEqual(e.validatingBundles(before), bundle)
	})
	after := e.createGrafana("pod-eviction", e.ns)
	eventually(t, 20*time.Second, "the bundle in the Grafana configuration made after the start", func() bool {
		return allEqual(e.validatingBundles(after), bundle)
	})
	if b := e.validatingBundles(elsewhere); len(b[0]) != 0 {
		t.Error("caBundle written into the configuration of another namespace's Grafana operator")
	}

	first := mustParse(t, bundle)
	data, rotated := e.rotateCA(ps[0], first)
	eventually(t, 20*time.Second, "both replicas to serve a certificate of the new CA", allServeCertificatesOf(ps, rotated[0]))
	for _, name := range []string{before, after} {
		if !allEqual(e.validatingBundles(name), data[KeyCABundle]) {
			t.Errorf("a replica serves the new CA's certificate while Grafana configuration %s lacks the new bundle", name)
		}
	}
}

// rotateCA starts a CA rotation on p and returns the Secret's data and its
// bundle: the new CA, then first.
func (e *certEnv) rotateCA(p *SelfSigned, first *x509.Certificate) (map[string][]byte, []*x509.Certificate) {
	e.t.Helper()
	if err := p.RotateCA(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	data := e.secret()
	bundle, err := parseCerts(data[KeyCABundle])
	if err != nil || len(bundle) != 2 || !bundle[1].Equal(first) {
		e.t.Fatalf("bundle after RotateCA: %d CAs (%v), want the new CA and the first", len(bundle), err)
	}
	return data, bundle
}

// allServeCertificatesOf says whether every replica serves a certificate ca
// signed.
func allServeCertificatesOf(ps []*SelfSigned, ca *x509.Certificate) func() bool {
	return func() bool {
		for _, p := range ps {
			c, _ := p.GetCertificate(nil)
			if c.Leaf.CheckSignatureFrom(ca) != nil {
				return false
			}
		}
		return true
	}
}

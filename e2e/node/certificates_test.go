/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/certs"
	"github.com/echelon-operator/echelon/test/installed"
)

// webhookService is the chart's webhook Service for the release.
const webhookService = release + "-webhook"

// readTLSSecret reads a webhook certificate's Secret as the operator does:
// the serving certificate and, in a Secret of the operator's (with the CA's
// key), the CA bundle (ca.crt, the current CA first).
func readTLSSecret(ctx context.Context, g Gomega, name string, withCA bool) certs.State {
	var secret corev1.Secret
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: name}, &secret)).To(Succeed())
	state := certs.ParseSecret(&secret)
	g.Expect(state.Serving).NotTo(BeNil(), "Secret %s: no serving certificate", name)
	if withCA {
		g.Expect(state.Bundle).NotTo(BeEmpty(), "Secret %s: %s", name, state.Problem)
	}
	return state
}

// servedCertificate is the certificate one replica presents through the
// webhook Service (kube-proxy picks the replica).
func servedCertificate(ctx context.Context) (*x509.Certificate, error) {
	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: webhookService}, &svc); err != nil {
		return nil, err
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		// Only the certificate is looked at; it is verified below as the
		// API server would.
		Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "443"))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// expectServedEverywhere expects every answer of a few handshakes through
// the webhook Service to present want, and to verify against each webhook
// configuration's caBundle for the Service's name, as the API server does.
func expectServedEverywhere(ctx context.Context, g Gomega, want *x509.Certificate) {
	for range 6 {
		served, err := servedCertificate(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(served.Equal(want)).To(BeTrue(), "a replica serves the certificate of %s, not %s", served.NotBefore, want.NotBefore)
	}
	bundles := injectedBundles(ctx, g)
	g.Expect(bundles).NotTo(BeEmpty())
	for _, b := range bundles {
		roots := x509.NewCertPool()
		g.Expect(roots.AppendCertsFromPEM(b)).To(BeTrue(), "a caBundle holds PEM certificates")
		_, err := want.Verify(x509.VerifyOptions{Roots: roots, DNSName: webhookService + "." + releaseNamespace + ".svc"})
		g.Expect(err).NotTo(HaveOccurred(), "the served certificate verifies against the injected caBundle")
	}
}

// injectedBundles are the caBundles of every webhook of the release.
func injectedBundles(ctx context.Context, g Gomega) [][]byte {
	instance := client.MatchingLabels{"app.kubernetes.io/instance": release}
	var bundles [][]byte
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	g.Expect(k8s.List(ctx, &validating, instance)).To(Succeed())
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
	}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	g.Expect(k8s.List(ctx, &mutating, instance)).To(Succeed())
	for _, c := range mutating.Items {
		for _, w := range c.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
	}
	return bundles
}

// installForCertificates installs the release with the given values and
// waits until the no-downscale webhook refuses the guarded downscale.
func installForCertificates(ctx context.Context, values ...string) {
	GinkgoHelper()
	args := append([]string{"install", release, chartDir(), "--namespace", releaseNamespace, "--create-namespace",
		"--wait", "--timeout", "2m"}, values...)
	helm(ctx, args...)
	expectScaleRefused(ctx)
}

// rotatesSelfSignedCertificates installs with certificates of a minute (the
// operator's least) and watches the CA and the serving certificate renewed,
// the webhooks refusing a dry-run downscale every 100 ms all along.
func rotatesSelfSignedCertificates(ctx SpecContext) {
	const secretName = "echelon-rotation-tls"
	installedAt := time.Now()
	installForCertificates(ctx,
		"--set", "webhooks.certificates.selfSigned.secretName="+secretName,
		"--set", "webhooks.certificates.selfSigned.certValidity=1m",
		"--set", "webhooks.certificates.selfSigned.caValidity=1m")
	first := readTLSSecret(ctx, Default, secretName, true)
	Expect(first.Serving.Cert.NotAfter.Sub(first.Serving.Cert.NotBefore)).To(BeNumerically("<=", 2*time.Minute), "the chart passed the short validity")
	probe := startWebhookProbe(ctx)

	Eventually(func(g Gomega) {
		rotated := readTLSSecret(ctx, g, secretName, true)
		g.Expect(rotated.Bundle[0].Equal(first.Bundle[0])).To(BeFalse(), "the CA was renewed")
		g.Expect(rotated.Serving.Cert.Equal(first.Serving.Cert)).To(BeFalse(), "the serving certificate was renewed")
		g.Expect(rotated.Serving.Cert.CheckSignatureFrom(rotated.Bundle[0])).To(Succeed(), "the new CA signs the serving certificate")
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	renewed := time.Since(installedAt)
	Eventually(func(g Gomega) {
		expectServedEverywhere(ctx, g, readTLSSecret(ctx, g, secretName, true).Serving.Cert)
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	served := time.Since(installedAt)
	failures, longest := probe.stop()
	AddReportEntry("self-signed certificates of 1m rotated", fmt.Sprintf("CA and serving certificate renewed %s after helm install, served by every replica after %s; %d webhook requests, %d failed, longest unavailability %s",
		renewed.Round(time.Second), served.Round(time.Second), probe.count(), len(failures), longest))
	Expect(failures).To(BeEmpty(), "admission requests that failed during the rotation (longest unavailability %s)", longest)
	helm(ctx, "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "3m")
	err := k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: secretName}, &corev1.Secret{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the uninstall hook deletes the Secret named by selfSigned.secretName: %v", err)
}

// servesProvidedSecret installs with a TLS Secret the user created: the
// webhooks serve its certificate, trusted through the caBundle given, and
// helm uninstall leaves the Secret, which the release does not own.
func servesProvidedSecret(ctx SpecContext) {
	const secretName = "echelon-provided-tls"
	secret, caPEM, err := installed.ProvidedWebhookSecret(releaseNamespace, secretName, webhookService)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, secret)).To(Succeed())
	values := filepath.Join(node.ControlPlane().Dir(), "provided-secret-values.yaml")
	Expect(os.WriteFile(values, []byte(fmt.Sprintf("webhooks:\n  certificates:\n    mode: secret\n    secret:\n      name: %s\n      caBundle: %s\n",
		secretName, base64.StdEncoding.EncodeToString(caPEM))), 0o600)).To(Succeed())
	installForCertificates(ctx, "--values", values)
	provided := readTLSSecret(ctx, Default, secretName, false).Serving.Cert
	Eventually(func(g Gomega) { expectServedEverywhere(ctx, g, provided) }).WithContext(ctx).Should(Succeed())
	for _, b := range injectedBundles(ctx, Default) {
		Expect(bytes.Equal(b, caPEM)).To(BeTrue(), "each webhook's caBundle is the one given")
	}

	helm(ctx, "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "3m")
	Expect(injectedBundles(ctx, Default)).To(BeEmpty(), "no webhook configuration left")
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})).To(Succeed(), "the user's Secret stays")
}

/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package installed

import (
	"context"
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
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GuardDownscales has the API server call the installation's webhooks:
//   - StatefulSet <app>-guarded, of three pods, whose ScalingPolicy
//     <app>-no-downscale sets downscale.allowed: false, is not scaled down,
//     neither through /scale (what `kubectl scale` sends; a server-side dry
//     run first) nor by a spec update, and the refusal names the policy; it
//     is scaled up;
//   - StatefulSet <app>-prepared, of two pods, whose ScalingPolicy
//     <app>-prepare asks the pods being removed to prepare, is not scaled down
//     since its kwok pods serve no HTTP, and the refusal names the pod.
//
// The operator then exports its webhook series, failed pod calls included.
func GuardDownscales(ctx context.Context, c client.Client, namespace, app string) error {
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()

	guarded, noDownscale := app+"-guarded", app+"-no-downscale"
	if err := c.Create(ctx, StatefulSet(namespace, guarded, app+"-guarded", 3, "example.com/"+app+":1.0")); err != nil {
		return err
	}
	if err := createPolicy(ctx, c, namespace, noDownscale, guarded, map[string]any{"allowed": false}); err != nil {
		return err
	}
	// The webhook reads policies from the operator's cache: a dry run, which
	// changes nothing, until it refuses.
	var last error
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = scale(ctx, c, namespace, guarded, 2, client.DryRunAll)
		return last != nil && strings.Contains(last.Error(), noDownscale), nil
	}); err != nil {
		return fmt.Errorf("a dry-run scale of %s from 3 to 2 was never refused naming ScalingPolicy %s: last answer %v: %w", guarded, noDownscale, last, err)
	}
	if err := scale(ctx, c, namespace, guarded, 1); err == nil || !strings.Contains(err.Error(), noDownscale) {
		return fmt.Errorf("scale of %s from 3 to 1: %v, want a refusal naming ScalingPolicy %s", guarded, err, noDownscale)
	}
	sts := &appsv1.StatefulSet{}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
	if err := c.Patch(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: guarded}}, patch); err == nil || !strings.Contains(err.Error(), noDownscale) {
		return fmt.Errorf("spec.replicas of %s from 3 to 2: %v, want a refusal naming ScalingPolicy %s", guarded, err, noDownscale)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: guarded}, sts); err != nil {
		return err
	}
	if *sts.Spec.Replicas != 3 {
		return fmt.Errorf("StatefulSet %s has %d replicas after refused downscales, want 3", guarded, *sts.Spec.Replicas)
	}
	if err := scale(ctx, c, namespace, guarded, 4); err != nil {
		return fmt.Errorf("scale of %s from 3 to 4 (an upscale): %w", guarded, err)
	}

	prepared, prepare := app+"-prepared", app+"-prepare"
	if err := c.Create(ctx, StatefulSet(namespace, prepared, app+"-prepared", 2, "example.com/"+app+":1.0")); err != nil {
		return err
	}
	if err := createPolicy(ctx, c, namespace, prepare, prepared, map[string]any{
		"prepare": map[string]any{"path": "/prepare", "port": int64(8080), "timeout": "1s"},
	}); err != nil {
		return err
	}
	// Dry runs call no pod, so they cannot tell when the operator knows the
	// policy; its controller reporting on it can, since both read one cache.
	if err := waitObserved(ctx, c, namespace, prepare); err != nil {
		return err
	}
	// The refusal names the pod the downscale removes, which the webhook
	// must find: wait for the StatefulSet controller to have created both
	// pods (on a loaded machine it lags), or the downscale removes no pod,
	// prepares none and is admitted.
	if err := waitPodsReady(ctx, c, namespace, prepared); err != nil {
		return err
	}
	removed := prepared + "-1"
	if err := scale(ctx, c, namespace, prepared, 1); err == nil || !strings.Contains(err.Error(), removed) {
		return fmt.Errorf("scale of %s from 2 to 1: %v, want a refusal naming pod %s, which cannot be prepared", prepared, err, removed)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: prepared}, sts); err != nil {
		return err
	}
	if *sts.Spec.Replicas != 2 {
		return fmt.Errorf("StatefulSet %s has %d replicas after a refused downscale, want 2", prepared, *sts.Spec.Replicas)
	}
	return nil
}

// scale sets the StatefulSet's replicas through its scale subresource, as
// `kubectl scale` does.
func scale(ctx context.Context, c client.Client, namespace, name string, replicas int32, opts ...client.SubResourceUpdateOption) error {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	s := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, sts, s); err != nil {
		return err
	}
	s.Spec.Replicas = replicas
	// Unconditional, as kubectl scale without --current-replicas: the
	// StatefulSet's status changes under us.
	s.ResourceVersion = ""
	return c.SubResource("scale").Update(ctx, sts, append(opts, client.WithSubResourceBody(s))...)
}

func createPolicy(ctx context.Context, c client.Client, namespace, name, target string, downscale map[string]any) error {
	sp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "echelon.dev/v1alpha1",
		"kind":       "ScalingPolicy",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec":       map[string]any{"targetRef": map[string]any{"name": target}, "downscale": downscale},
	}}
	if err := c.Create(ctx, sp); err != nil {
		return fmt.Errorf("create ScalingPolicy %s: %w", name, err)
	}
	return nil
}

// waitPodsReady waits until every pod of the StatefulSet exists and is Ready
// on its update revision.
func waitPodsReady(ctx context.Context, c client.Client, namespace, name string) error {
	var why string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		done, state, err := rolledOut(ctx, c, namespace, name)
		why = state
		return done, err
	})
	if err != nil {
		return fmt.Errorf("pods of StatefulSet %s/%s never all Ready (%s): %w", namespace, name, why, err)
	}
	return nil
}

// waitObserved waits until the ScalingPolicy's status reports its generation.
func waitObserved(ctx context.Context, c client.Client, namespace, name string) error {
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sp := &unstructured.Unstructured{}
		sp.SetAPIVersion("echelon.dev/v1alpha1")
		sp.SetKind("ScalingPolicy")
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sp); err != nil {
			return false, err
		}
		observed, _, _ := unstructured.NestedInt64(sp.Object, "status", "observedGeneration")
		return observed >= sp.GetGeneration(), nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("ScalingPolicy %s/%s never observed", namespace, name), err)
	}
	return nil
}

// ProvidedWebhookSecret returns a kubernetes.io/tls Secret namespace/name for
// the chart's webhooks.certificates.mode=secret, as a user would provide it:
// a serving certificate for the webhook Service (and 127.0.0.1, where the
// tests' API server calls it), signed by a CA of its own whose PEM is returned
// for webhooks.certificates.secret.caBundle. The Secret also holds ca.crt.
func ProvidedWebhookSecret(namespace, name, service string) (*corev1.Secret, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "provided-webhook-ca"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: service},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		DNSNames:    []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caTemplate, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
			"ca.crt":                caPEM,
		},
	}, caPEM, nil
}

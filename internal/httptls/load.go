package httptls

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// DefaultCAKey is the key a CA reference reads when it names none.
const DefaultCAKey = "ca.crt"

// Material is a tls block with the objects it names read: what a transport
// is built from.
type Material struct {
	// Field is the spec path of the tls block, for errors
	// ("spec.analysis.checks[consul].http.tls").
	Field string
	// CAPEM holds the trusted authorities; the system's when empty. CAField
	// names where they came from.
	CAPEM   []byte
	CAField string
	// CertPEM and KeyPEM are the client certificate and key; none when empty.
	CertPEM, KeyPEM []byte
	ServerName      string
	// InsecureSkipVerify accepts any server certificate (tests only).
	InsecureSkipVerify bool
}

// Load reads the Secrets and ConfigMaps spec names in namespace, live
// through reader, and returns the material a transport is built from; nil
// for a nil spec. field is the spec path of the block; every error names
// the field at fault and, for a refused read, the Helm value that grants it.
func Load(ctx context.Context, reader client.Reader, namespace string, spec *v1alpha1.TLSConfig, field string) (*Material, error) {
	if spec == nil {
		return nil, nil
	}
	if reader == nil {
		return nil, fmt.Errorf("%s: no reader of Secrets and ConfigMaps was configured", field)
	}
	m := &Material{Field: field, ServerName: spec.ServerName, InsecureSkipVerify: spec.InsecureSkipVerify}
	switch {
	case spec.CASecretRef != nil:
		ref := spec.CASecretRef
		m.CAField = field + ".caSecretRef"
		secret := &corev1.Secret{}
		if err := get(ctx, reader, namespace, ref.Name, secret, m.CAField); err != nil {
			return nil, err
		}
		key := keyOr(ref.Key)
		if m.CAPEM = secret.Data[key]; len(m.CAPEM) == 0 {
			return nil, fmt.Errorf("%s: Secret %s has no key %s", m.CAField, ref.Name, key)
		}
	case spec.CAConfigMapRef != nil:
		ref := spec.CAConfigMapRef
		m.CAField = field + ".caConfigMapRef"
		cm := &corev1.ConfigMap{}
		if err := get(ctx, reader, namespace, ref.Name, cm, m.CAField); err != nil {
			return nil, err
		}
		key := keyOr(ref.Key)
		if s, ok := cm.Data[key]; ok && s != "" {
			m.CAPEM = []byte(s)
		} else if m.CAPEM = cm.BinaryData[key]; len(m.CAPEM) == 0 {
			return nil, fmt.Errorf("%s: ConfigMap %s has no key %s", m.CAField, ref.Name, key)
		}
	}
	if ref := spec.ClientCertSecretRef; ref != nil {
		f := field + ".clientCertSecretRef"
		secret := &corev1.Secret{}
		if err := get(ctx, reader, namespace, ref.Name, secret, f); err != nil {
			return nil, err
		}
		m.CertPEM, m.KeyPEM = secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
		if len(m.CertPEM) == 0 || len(m.KeyPEM) == 0 {
			return nil, fmt.Errorf("%s: Secret %s needs keys %s and %s (a Secret of type kubernetes.io/tls)", f, ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		}
	}
	return m, nil
}

func keyOr(key string) string {
	if key == "" {
		return DefaultCAKey
	}
	return key
}

// get reads one object live. A refusal says what to grant: the operator
// reads no Secret or ConfigMap unless granted, so a missing grant is the
// likely cause, not a bug.
func get(ctx context.Context, reader client.Reader, namespace, name string, obj client.Object, field string) error {
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %s %s not found in namespace %s", field, kind, name, namespace)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: the operator may not read %s %s in namespace %s: grant it get on %ss there (Helm value rbac.analysisSecretNamespaces)",
			field, kind, name, namespace, kind)
	}
	return fmt.Errorf("%s: read %s %s: %w", field, kind, name, err)
}

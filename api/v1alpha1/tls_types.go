package v1alpha1

// TLSConfig is how Echelon verifies the certificate of an HTTPS server it
// calls (an http gate check, a hook, a pod's endpoint) and which certificate
// it presents. Without it, an https:// call trusts the system's authorities
// and presents none. The Secrets and ConfigMaps it names are read live in
// the namespace of the object that refers to them, on every call, so a
// rotated certificate takes effect without a restart; the operator needs
// get on them there (Helm value rbac.analysisSecretNamespaces).
// +kubebuilder:validation:XValidation:rule="!has(self.caSecretRef) || !has(self.caConfigMapRef)",message="set at most one of tls.caSecretRef and tls.caConfigMapRef"
// +kubebuilder:validation:XValidation:rule="!(has(self.insecureSkipVerify) && self.insecureSkipVerify) || (!has(self.caSecretRef) && !has(self.caConfigMapRef) && !has(self.serverName))",message="tls.insecureSkipVerify verifies nothing, so it cannot be set together with tls.caSecretRef, tls.caConfigMapRef or tls.serverName"
type TLSConfig struct {
	// caSecretRef names a Secret key holding the PEM certificates of the
	// authorities that sign the server's certificate, trusted instead of the
	// system's. Its key defaults to "ca.crt", as in the Secrets cert-manager
	// writes.
	// +optional
	CASecretRef *SecretKeyReference `json:"caSecretRef,omitempty"`

	// caConfigMapRef names a ConfigMap key holding the PEM certificates of
	// the authorities, as caSecretRef does: for a CA that is no secret, such
	// as the cluster's own in the ConfigMap kube-root-ca.crt that every
	// namespace holds. Its key defaults to "ca.crt".
	// +optional
	CAConfigMapRef *ConfigMapKeyReference `json:"caConfigMapRef,omitempty"`

	// serverName is the name the server's certificate must carry, when it
	// differs from the URL's host: for example the Service name, when pods
	// are called by IP.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`

	// clientCertSecretRef names a Secret of type kubernetes.io/tls whose
	// keys tls.crt and tls.key are the certificate (PEM, its chain after
	// it) and private key Echelon presents, for servers that require
	// client certificates (mutual TLS).
	// +optional
	ClientCertSecretRef *LocalSecretReference `json:"clientCertSecretRef,omitempty"`

	// insecureSkipVerify accepts any certificate the server presents. For
	// tests only: anyone on the path can impersonate the server. It cannot be
	// set together with a CA or a serverName.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// ConfigMapKeyReference names one key of a ConfigMap in the namespace of
// the referring object.
type ConfigMapKeyReference struct {
	// name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the ConfigMap's data. Defaults to "ca.crt".
	// +optional
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

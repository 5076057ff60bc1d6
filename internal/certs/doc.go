// Package certs provides the admission webhook server's TLS certificate, on
// every replica: either from files that something else (cert-manager) keeps,
// or self-signed, kept in one Secret that every replica and every restart
// shares, with the CA bundle injected into the webhook configurations
// labelled InjectCALabel=<namespace>.<secret>.
//
// Every handshake reads the certificate through an atomic pointer, so a new
// certificate is served from the next handshake on, without a restart and
// without touching connections already open.
//
// # Rotation without a dropped request
//
// A request fails when the API server does not trust the certificate a
// replica presents. Whatever a replica presents must therefore be signed by a
// CA of the bundle the API server uses, at every moment, on every replica,
// however far behind its view of the Secret is. The self-signed Secret moves
// through these states, each written by whichever replica sees the need first
// (Create, or Update with the resourceVersion read: a replica that loses the
// race gets a Conflict, reads again and finds nothing left to do):
//
//  1. The serving certificate is renewed at two thirds of its lifetime, by
//     the same CA. Clients already trust that CA, so replicas may pick the new
//     certificate up in any order.
//  2. The CA is renewed at two thirds of its lifetime: the new CA becomes the
//     one that signs, and the bundle becomes [new CA, old CA]. The serving
//     certificate does not change: it is still signed by the old CA, which the
//     old and the new bundle both hold.
//  3. Every replica injects the new bundle into every labelled configuration.
//     Once a replica sees it in all of them, it records the time on the
//     Secret (InjectedAnnotation), and after Policy.Propagation more, the
//     time the API server's own informer needs to use it, it renews the
//     serving certificate with the new CA. Clients with the new bundle trust
//     it, and only those remain.
//  4. The old CA leaves the bundle when it expires: nothing signed by it can
//     be trusted after that, whichever replica still presents it.
//
// The decision between these steps is Decide, a function of the time and the
// Secret's content alone. An injector on every replica puts the bundle back
// whenever a configuration's caBundle differs from it (helm upgrade resets
// it), reading the Secret from the API server before each patch so that a
// replica whose cache lags behind never restores an older bundle.
//
// Deleting the Secret starts over with a new CA: its key is gone, so the
// replicas serve the new certificate before the API server trusts it, and
// requests fail until the new bundle is injected, a moment later.
//
// SelfSigned.Rotate renews the serving certificate at once (benchmarks and
// tests use it to rotate under load); SelfSigned.RotateCA starts a CA
// rotation, which then follows the steps above.
package certs

// The self-signed mode injects the CA bundle into webhook configurations,
// which are cluster-scoped. Its Secret is namespaced and named, so its rights
// are in config/rbac/webhook_cert_role.yaml, not in a marker.
//
// A CA of the operator's choosing in another admission webhook's configuration
// would let it answer for that webhook, so patch is limited to Echelon's own
// configurations: echelon, the name config/webhook gives them (the chart puts
// the release's name in its place). The informers list and watch, which RBAC
// cannot limit by name. Compat mode's injection into the Grafana
// rollout-operator's configurations (SelfSignedOptions.AlsoInject), whose
// names are the Grafana deployment's, needs patch on any name: that right is
// in config/rbac/grafana_compat_role.yaml, granted with compat mode only.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=patch,resourceNames=echelon

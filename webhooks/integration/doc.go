// Package integration tests Echelon's webhooks with a real kube-apiserver
// calling them over TLS: the webhook configurations `make manifests` generates
// (config/webhook), pointed at the test's server by URL on loopback, in front
// of the operator's manager running as the user its generated RBAC binds.
// Only etcd and kube-apiserver run: the tests create pods themselves, and a
// test server answers as each of them on its loopback IP.
package integration

/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RealNodes configures a control plane for real kubelets (test/nodetier)
// instead of kwok's fake nodes: the API server listens on and advertises the
// node's address, so that pods reach it through the `kubernetes` Service, with a
// serving certificate valid for that Service; it authorizes kubelets with the
// Node authorizer, signs ServiceAccount tokens for pods, and calls kubelets with
// a client certificate; the controller manager runs the loops a cluster of real
// pods needs (ServiceAccounts, endpoints, kube-root-ca.crt). Nothing plays the
// kubelet: Start returns with no nodes, and the caller starts them.
type RealNodes struct {
	// Address is the node's IP address, on which the API server listens.
	Address string
}

const (
	// ServiceCIDR is the Service range of a control plane for real nodes, and
	// KubernetesServiceIP the `kubernetes` Service's address in it.
	ServiceCIDR         = "10.0.0.0/24"
	KubernetesServiceIP = "10.0.0.1"

	// realNodeControllers add to controllers what real pods need:
	// ServiceAccounts and their tokens' CA (root-ca-cert-publisher), endpoints
	// for Services, role aggregation (the chart's aggregated roles), and Jobs
	// (the chart's uninstall hook).
	realNodeControllers = controllers + ",serviceaccount,endpoint,endpointslice,root-ca-cert-publisher,clusterrole-aggregation,job"

	// Files of the PKI written for real nodes, in the run directory's pki/.
	servingCAFile        = "serving-ca.crt"
	kubeletClientCert    = "kubelet-client.crt"
	kubeletClientKey     = "kubelet-client.key"
	serviceAccountSigner = "sa-signer.key"
)

// PKIDir is where a control plane for real nodes keeps its certificates: the
// serving CA (ServingCAFile), which also signs the API server's client
// certificate to kubelets, so that kubelets trust it as their client CA.
func (cp *ControlPlane) PKIDir() string { return filepath.Join(cp.dir, "pki") }

// ServingCAFile is the CA of the API server's serving certificate, the one
// pods find in kube-root-ca.crt; kubelets take it as their client CA.
func (cp *ControlPlane) ServingCAFile() string {
	return filepath.Join(cp.PKIDir(), servingCAFile)
}

// realNodePKI writes what envtest would generate, the API server's serving
// certificate and the ServiceAccount signing key, into envtest's certificate
// directory (envtest keeps files it finds there), with a serving certificate
// that also names the node's address and the `kubernetes` Service, plus the
// API server's client certificate to kubelets. It returns the serving CA,
// which envtest cannot know and puts in every user's kubeconfig.
func (cp *ControlPlane) realNodePKI(certDir string) ([]byte, error) {
	pki := cp.PKIDir()
	for _, d := range []string{pki, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	ca, caKey, err := newCert(&x509.Certificate{
		Subject: pkix.Name{CommonName: "echelon-nodetier-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	serving, servingKey, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP), net.ParseIP(cp.opts.RealNodes.Address)},
	}, ca, caKey)
	if err != nil {
		return nil, err
	}
	// system:masters, because the kubelet authorizes the API server's calls
	// (logs, exec, port-forward) with a SubjectAccessReview like any client's.
	kubeletClient, kubeletClientKeyPair, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	if err != nil {
		return nil, err
	}
	_, saKey, err := newCert(&x509.Certificate{Subject: pkix.Name{CommonName: "service-accounts"}}, ca, caKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		filepath.Join(pki, servingCAFile):        pemCert(ca),
		filepath.Join(pki, kubeletClientCert):    pemCert(kubeletClient),
		filepath.Join(pki, kubeletClientKey):     pemKey(kubeletClientKeyPair),
		filepath.Join(pki, serviceAccountSigner): pemKey(saKey),
		// The names envtest looks for.
		filepath.Join(certDir, "apiserver.crt"): pemCert(serving),
		filepath.Join(certDir, "apiserver.key"): pemKey(servingKey),
		filepath.Join(certDir, "sa-signer.crt"): pemKey(saKey), // a public key is read from a private key file too
		filepath.Join(certDir, "sa-signer.key"): pemKey(saKey),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return pemCert(ca), nil
}

// configureRealNodeAPIServer sets what an API server for real nodes needs on
// top of envtest's defaults.
func (cp *ControlPlane) configureRealNodeAPIServer(s *envtest.APIServer) error {
	certDir := filepath.Join(cp.dir, "apiserver-certs")
	ca, err := cp.realNodePKI(certDir)
	if err != nil {
		return fmt.Errorf("real node certificates: %w", err)
	}
	s.CertDir = certDir
	// envtest replaces the address when it has to choose the port.
	port, err := freePort(cp.opts.RealNodes.Address)
	if err != nil {
		return err
	}
	s.SecureServing.Address, s.SecureServing.Port = cp.opts.RealNodes.Address, port
	s.SecureServing.CA = ca
	pki := cp.PKIDir()
	args := s.Configure()
	args.Set("advertise-address", cp.opts.RealNodes.Address)
	args.Set("service-cluster-ip-range", ServiceCIDR)
	args.Set("authorization-mode", "Node,RBAC")
	// envtest turns ServiceAccount admission off (no controller creates the
	// default ServiceAccount there); real pods need their token volume.
	args.Set("disable-admission-plugins", "")
	args.Set("enable-admission-plugins", "NodeRestriction")
	args.Set("kubelet-client-certificate", filepath.Join(pki, kubeletClientCert))
	args.Set("kubelet-client-key", filepath.Join(pki, kubeletClientKey))
	// Else `kubectl logs` looks the node's name up in DNS.
	args.Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// realNodeControllerManagerArgs are the controller manager's flags for real
// nodes: ServiceAccount tokens signed with the API server's key and the CA
// published in every namespace's kube-root-ca.crt.
func (cp *ControlPlane) realNodeControllerManagerArgs() []string {
	return []string{
		"--controllers=" + realNodeControllers,
		"--service-account-private-key-file=" + filepath.Join(cp.PKIDir(), serviceAccountSigner),
		"--root-ca-file=" + cp.ServingCAFile(),
	}
}

// StartComponent starts a process that belongs with the control plane (a
// kubelet, containerd): its output goes to logs/<name>.log, it dies with the
// test binary, and Stop stops it (SIGTERM to its process group, SIGKILL after a
// grace period) before the components started earlier. It returns the PID.
func (cp *ControlPlane) StartComponent(name, path string, env []string, args ...string) (int, error) {
	if err := cp.startProcessWithEnv(name, path, env, args...); err != nil {
		return 0, err
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.extraLogs = append(cp.extraLogs, name)
	return cp.procs[len(cp.procs)-1].pid(), nil
}

// ComponentExited reports whether a component started by Start or
// StartComponent has exited, and how.
func (cp *ControlPlane) ComponentExited(name string) (bool, error) {
	for _, p := range cp.procs {
		if p.name == name {
			return p.exited()
		}
	}
	return false, nil
}

// freePort returns a port free on address.
func freePort(address string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		return "", fmt.Errorf("find a free port on %s: %w", address, err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// newCert issues a certificate from template, signed by parent (self-signed
// when nil), with a new P-256 key.
func newCert(template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(7 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func pemKey(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// StartKwok starts kwok beside real kubelets, once: it plays the kubelet of
// the fake nodes a test then creates (annotated FakeNodeAnnotation=fake),
// e.g. a node to drain that runs no real container, and leaves the real
// nodes alone.
func (cp *ControlPlane) StartKwok() error {
	for _, p := range cp.procs {
		if p.name == "kwok" {
			return nil
		}
	}
	return cp.startKwok()
}

package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// filesPollInterval is how often the files are re-read besides the change
// notifications: a safety net for file systems that notify nothing.
const filesPollInterval = 10 * time.Second

// Files serves a certificate and key read from files, such as a Secret that
// cert-manager keeps and the kubelet mounts. The kubelet updates a mounted
// Secret by swapping a symlink to a new directory; certwatcher sees the old
// target go away, watches the new one and re-reads both files.
type Files struct {
	served
	certFile, keyFile string

	mu      sync.Mutex
	watcher *certwatcher.CertWatcher
	log     logr.Logger
	loadMu  sync.Mutex
}

// NewFiles returns a Provider of the certificate in certFile and its key in
// keyFile. Nothing is read before Bootstrap.
func NewFiles(certFile, keyFile string) *Files {
	return &Files{certFile: certFile, keyFile: keyFile}
}

// Bootstrap reads the files; it fails if they do not hold a certificate and
// its key.
func (f *Files) Bootstrap(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watcher != nil {
		return nil
	}
	f.log = ctrl.LoggerFrom(ctx).WithName("webhook-certs").WithValues("certFile", f.certFile, "keyFile", f.keyFile)
	w, err := certwatcher.New(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("webhook certificate from --tls-cert-file=%s and --tls-key-file=%s: %w", f.certFile, f.keyFile, err)
	}
	f.watcher = w.WithWatchInterval(filesPollInterval)
	// The watcher calls back in a goroutine of its own per change, so two
	// quick changes may call it out of order; and once at registration, with
	// its lock held. The callback therefore serves what the watcher holds
	// when it runs, from a goroutine of its own, rather than the certificate
	// it was given.
	w.RegisterCallback(func(tls.Certificate) { go f.load() })
	f.load()
	return nil
}

// load serves the watcher's current certificate. Loads run one at a time, so
// the last to run serves the latest certificate.
func (f *Files) load() {
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	cert, err := f.watcher.GetCertificate(nil)
	if err != nil || cert == nil {
		return
	}
	cert, err = withLeaf(cert)
	if err != nil {
		f.log.Error(err, "parse webhook certificate")
		return
	}
	f.set(cert, f.log)
}

// Start watches the files until ctx ends.
func (f *Files) Start(ctx context.Context) error {
	if err := f.Bootstrap(ctx); err != nil {
		return err
	}
	return f.watcher.Start(ctx)
}

// NeedLeaderElection is false: every replica serves.
func (f *Files) NeedLeaderElection() bool { return false }

// Rotate re-reads the files now, for when they are known to have changed.
func (f *Files) Rotate(ctx context.Context) error {
	if err := f.Bootstrap(ctx); err != nil {
		return err
	}
	if err := f.watcher.ReadCertificate(); err != nil {
		return fmt.Errorf("re-read webhook certificate: %w", err)
	}
	f.load()
	return nil
}

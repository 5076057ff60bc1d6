package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
)

const (
	// defaultPropagation is Policy.Propagation unless the CA lives so briefly
	// (tests) that a twelfth of its lifetime is shorter.
	defaultPropagation = 10 * time.Second
	// resync bounds the time between two decisions when nothing changes, so
	// that a missed event costs minutes at most.
	resync = 5 * time.Minute
	// maxWrites bounds the writes of one reconcile: a Create is followed by
	// nothing, a CA rotation by at most a bundle update and a serving renewal.
	maxWrites = 8
	// retryAfterError is the first wait after a failed reconcile; it doubles
	// up to resync.
	retryAfterError = time.Second
	// minWait keeps the loop from spinning should a decision ask to be
	// taken again at once.
	minWait = 10 * time.Millisecond
	// rotatePoll is how often Rotate looks whether the informer has brought
	// the new certificate.
	rotatePoll = 10 * time.Millisecond
)

// SelfSignedOptions configure a SelfSigned Provider.
type SelfSignedOptions struct {
	// Namespace and SecretName name the one Secret every replica shares.
	Namespace  string
	SecretName string
	// SANs are the names of the serving certificate; see ServingSANs.
	SANs SANs
	// CertValidity and CAValidity are the lifetimes of the serving
	// certificate and of the CA; each is renewed after two thirds of it.
	// Seconds work (tests); the operator's flags ask for a minute at least.
	CertValidity time.Duration
	CAValidity   time.Duration
	// Propagation: see Policy.Propagation. Zero means 10s, or a twelfth of
	// CAValidity when that is shorter.
	Propagation time.Duration
	// AlsoInject are label selectors of further webhook configurations that
	// get the CA bundle (compat mode: the Grafana rollout-operator's). They
	// are kept current, and waited for in a CA rotation, as Echelon's own.
	AlsoInject []string
}

// SelfSigned keeps a self-signed CA and serving certificate in one Secret
// shared by every replica, injects the CA bundle into the labelled webhook
// configurations, and renews both before they expire. See the package doc.
type SelfSigned struct {
	served
	client kubernetes.Interface
	opts   SelfSignedOptions
	policy Policy
	// selector selects the webhook configurations to inject into.
	selector string

	// trigger wakes the decision loop: the Secret or a webhook configuration changed.
	trigger chan struct{}

	mu      sync.Mutex
	log     logr.Logger
	secrets cache.SharedIndexInformer
	// inject are the injectors of selector and of opts.AlsoInject, in order.
	inject  []*injector
	started bool
	// loadedVersion is the resourceVersion of the Secret whose certificate
	// is served (0 when unknown): load never goes back to an older one.
	loadedVersion uint64
	// waiting is the reason of the last decision to wait, logged once.
	waiting string
}

// NewSelfSigned returns a SelfSigned Provider that works through client.
func NewSelfSigned(client kubernetes.Interface, opts SelfSignedOptions) (*SelfSigned, error) {
	var errs []error
	if opts.Namespace == "" || opts.SecretName == "" {
		errs = append(errs, errors.New("namespace and Secret name are required"))
	}
	if opts.CertValidity <= 0 || opts.CAValidity < opts.CertValidity {
		errs = append(errs, fmt.Errorf("validities: serving %s, CA %s: want 0 < serving <= CA", opts.CertValidity, opts.CAValidity))
	}
	if len(opts.SANs.DNSNames) == 0 && len(opts.SANs.IPs) == 0 {
		errs = append(errs, errors.New("the serving certificate needs at least one DNS name or IP"))
	}
	value := opts.Namespace + "." + opts.SecretName
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("label %s=%s: %v", InjectCALabel, value, msgs))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("self-signed webhook certificates: %w", errors.Join(errs...))
	}
	propagation := opts.Propagation
	if propagation == 0 {
		propagation = min(defaultPropagation, opts.CAValidity/12)
	}
	return &SelfSigned{
		client: client,
		opts:   opts,
		policy: Policy{
			CertValidity: opts.CertValidity,
			CAValidity:   opts.CAValidity,
			Propagation:  propagation,
			SANs:         opts.SANs,
		},
		selector: InjectCALabel + "=" + value,
		trigger:  make(chan struct{}, 1),
		log:      logr.Discard(),
	}, nil
}

// InjectionSelector is the label selector of the webhook configurations that
// get this Provider's CA bundle.
func (p *SelfSigned) InjectionSelector() string { return p.selector }

// NeedLeaderElection is false: every replica serves, so every replica keeps
// its certificate current, and any replica may renew.
func (p *SelfSigned) NeedLeaderElection() bool { return false }

// Bootstrap makes sure the Secret holds a usable CA and serving certificate,
// creating or renewing them as needed, and serves the certificate. Replicas
// starting together race: one Create wins and the others read its Secret.
func (p *SelfSigned) Bootstrap(ctx context.Context) error {
	p.mu.Lock()
	p.log = ctrl.LoggerFrom(ctx).WithName("webhook-certs").WithValues("secret", p.opts.Namespace+"/"+p.opts.SecretName)
	p.mu.Unlock()
	_, secret, err := p.reconcile(ctx)
	if err != nil {
		return err
	}
	return p.load(secret)
}

// Start keeps the certificates current until ctx ends: it watches the Secret
// (and serves each new certificate it holds), injects the bundle, and renews.
func (p *SelfSigned) Start(ctx context.Context) error {
	if p.leafOrNil() == nil {
		if err := p.Bootstrap(ctx); err != nil {
			return err
		}
	}
	log := p.logger()
	p.secrets = cache.NewSharedIndexInformer(p.secretListWatch(), &corev1.Secret{}, 0, cache.Indexers{})
	if _, err := p.secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.onSecret(obj) },
		UpdateFunc: func(_, obj any) { p.onSecret(obj) },
		DeleteFunc: func(any) { p.wake() },
	}); err != nil {
		return err
	}
	var injectors []*injector
	for _, selector := range append([]string{p.selector}, p.opts.AlsoInject...) {
		injectors = append(injectors, newInjector(p.client, selector, p.bundleFromCache, p.liveBundle, p.wake, log.WithValues("selector", selector)))
	}
	p.mu.Lock()
	p.inject = injectors
	p.mu.Unlock()
	go p.secrets.RunWithContext(ctx)
	injectDone := runInjectors(ctx, injectors)
	if !cache.WaitForCacheSync(ctx.Done(), p.secrets.HasSynced) {
		// Only an ended ctx stops the wait: a shutdown, not a failure.
		return <-injectDone
	}
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()

	backoff := retryAfterError
	for {
		plan, _, err := p.reconcile(ctx)
		var wait time.Duration
		if err != nil {
			log.Error(err, "keeping the webhook certificates current", "retryIn", backoff)
			wait, backoff = backoff, min(2*backoff, resync)
		} else {
			backoff = retryAfterError
			wait = resync
			if !plan.Next.IsZero() {
				wait = min(wait, time.Until(plan.Next))
			}
		}
		timer := time.NewTimer(max(wait, minWait))
		select {
		case <-ctx.Done():
			timer.Stop()
			return <-injectDone
		case <-p.trigger:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Rotate renews the serving certificate now, and returns once this replica
// serves the new one. It refuses during a CA rotation, whose own sequence
// decides when the serving certificate changes.
func (p *SelfSigned) Rotate(ctx context.Context) error {
	return p.force(ctx, ActionRenewServing)
}

// RotateCA starts a CA rotation now; the rest of the sequence follows as for
// a CA renewed at two thirds of its lifetime. It returns once the Secret holds
// the new CA, long before the serving certificate moves to it.
func (p *SelfSigned) RotateCA(ctx context.Context) error {
	return p.force(ctx, ActionRenewCA)
}

func (p *SelfSigned) force(ctx context.Context, action Action) error {
	for range maxWrites {
		secret, err := p.get(ctx)
		if err != nil {
			return err
		}
		s := ParseSecret(secret)
		if s.CA == nil || unusable(s.Serving, s.Bundle, time.Now()) != "" {
			return fmt.Errorf("%s: the Secret holds no usable certificates yet; run Bootstrap first", action)
		}
		if !signedBy(s.Serving.Cert, s.CA.Cert) {
			return fmt.Errorf("%s: a CA rotation is in progress; the serving certificate moves to the new CA once its bundle is injected", action)
		}
		written, err := p.write(ctx, secret, s, Plan{Action: action, Reason: "forced"})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		if action != ActionRenewServing {
			return nil
		}
		return p.awaitServed(ctx, written)
	}
	return fmt.Errorf("%s: the Secret kept changing", action)
}

// awaitServed waits until this replica serves the serving certificate of
// secret: at once before Start, through the Secret's informer after, so that
// the informer stays the one path by which certificates arrive.
func (p *SelfSigned) awaitServed(ctx context.Context, secret *corev1.Secret) error {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return p.load(secret)
	}
	want := ParseSecret(secret).Serving
	if want == nil {
		return errors.New("the written Secret holds no usable serving certificate")
	}
	return wait.PollUntilContextCancel(ctx, rotatePoll, true, func(context.Context) (bool, error) {
		cur := p.leafOrNil()
		return cur != nil && cur.Leaf.Equal(want.Cert), nil
	})
}

// reconcile decides and writes until the Secret needs nothing, and returns
// the last plan with the Secret as it then is.
func (p *SelfSigned) reconcile(ctx context.Context) (Plan, *corev1.Secret, error) {
	for range maxWrites {
		secret, err := p.get(ctx)
		if err != nil {
			return Plan{}, nil, err
		}
		s := ParseSecret(secret)
		plan := Decide(time.Now(), s, p.injected(secret), p.policy)
		if plan.Action == ActionNone {
			p.logWaiting(plan)
			return plan, secret, nil
		}
		if _, err := p.write(ctx, secret, s, plan); err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return plan, nil, err
		}
		// Written, or another replica wrote first: decide again on what is there now.
	}
	return Plan{}, nil, errors.New("webhook certificate Secret: still changing after several writes")
}

// write carries out plan on the Secret read as secret (nil: none yet) and
// returns the Secret written. Create and Update with the read
// resourceVersion make concurrent replicas safe: one write wins, the others
// get AlreadyExists or Conflict and decide again.
func (p *SelfSigned) write(ctx context.Context, secret *corev1.Secret, s State, plan Plan) (*corev1.Secret, error) {
	now := time.Now()
	next, err := apply(plan.Action, s, now, p.policy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", plan.Action, err)
	}
	secrets := p.client.CoreV1().Secrets(p.opts.Namespace)
	var written *corev1.Secret
	if secret == nil {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      p.opts.SecretName,
				Namespace: p.opts.Namespace,
				Labels:    map[string]string{"app.kubernetes.io/managed-by": "echelon"},
			},
			Type: corev1.SecretTypeTLS,
		}
		next.writeTo(secret)
		written, err = secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		secret = secret.DeepCopy()
		next.writeTo(secret)
		written, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return nil, fmt.Errorf("write webhook certificate Secret (%s): %w", plan.Action, err)
	}
	p.logWrite(plan, next)
	return written, nil
}

func (p *SelfSigned) logWrite(plan Plan, s State) {
	p.logger().Info("webhook certificate Secret updated", "action", plan.Action, "reason", plan.Reason,
		"ca", s.CA.Cert.Subject.CommonName, "caNotAfter", s.CA.Cert.NotAfter, "bundle", len(s.Bundle),
		"servingSerial", s.Serving.Cert.SerialNumber.Text(16), "servingIssuer", s.Serving.Cert.Issuer.CommonName,
		"servingNotAfter", s.Serving.Cert.NotAfter)
}

// get reads the Secret from the API server, not from the informer: a decision
// on a stale copy would only end in a Conflict.
func (p *SelfSigned) get(ctx context.Context) (*corev1.Secret, error) {
	secret, err := p.client.CoreV1().Secrets(p.opts.Namespace).Get(ctx, p.opts.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get webhook certificate Secret: %w", err)
	}
	return secret, nil
}

// injected reports whether every labelled webhook configuration carries the
// bundle of secret, byte for byte as the injector copies it; false before
// Start, when it is not known.
func (p *SelfSigned) injected(secret *corev1.Secret) bool {
	p.mu.Lock()
	injectors := p.inject
	p.mu.Unlock()
	if len(injectors) == 0 || secret == nil || len(secret.Data[KeyCABundle]) == 0 {
		return false
	}
	for _, inj := range injectors {
		if !inj.injected(secret.Data[KeyCABundle]) {
			return false
		}
	}
	return true
}

// logWaiting logs why nothing is done while a rotation waits, once per reason.
func (p *SelfSigned) logWaiting(plan Plan) {
	p.mu.Lock()
	changed := plan.Reason != p.waiting
	p.waiting = plan.Reason
	log := p.log
	p.mu.Unlock()
	if changed && plan.Reason != "" {
		log.Info(plan.Reason, "next", plan.Next)
	}
}

// load serves the serving certificate of secret.
//
// A Secret older than the one served is skipped: Rotate before the informer
// synced loads the Secret it wrote directly, and the informer may then
// deliver the Secret as its first list read it, before the write.
// resourceVersions of one API server are ordered; one that is not a number
// is loaded whatever it is.
func (p *SelfSigned) load(secret *corev1.Secret) error {
	if secret == nil {
		return errors.New("webhook certificate Secret is missing")
	}
	version, _ := strconv.ParseUint(secret.ResourceVersion, 10, 64)
	p.mu.Lock()
	defer p.mu.Unlock()
	if version != 0 && version < p.loadedVersion {
		return nil
	}
	cert, err := tls.X509KeyPair(secret.Data[KeyServingCert], secret.Data[KeyServingKey])
	if err != nil {
		return fmt.Errorf("webhook certificate Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	served, err := withLeaf(&cert)
	if err != nil {
		return fmt.Errorf("webhook certificate Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	p.set(served, p.log)
	if version != 0 {
		p.loadedVersion = version
	}
	return nil
}

// onSecret serves the certificate of a changed Secret, re-injects its bundle
// and wakes the decision loop.
func (p *SelfSigned) onSecret(obj any) {
	if secret, ok := obj.(*corev1.Secret); ok {
		if err := p.load(secret); err != nil {
			// The decision loop replaces what cannot be served; until then
			// the previous certificate stays in service.
			p.logger().Error(err, "not serving the certificate of the changed Secret")
		}
	}
	p.mu.Lock()
	injectors := p.inject
	p.mu.Unlock()
	for _, inj := range injectors {
		inj.enqueueAll()
	}
	p.wake()
}

// bundleFromCache is the bundle of the Secret as the informer holds it.
func (p *SelfSigned) bundleFromCache() []byte {
	obj, ok, err := p.secrets.GetStore().GetByKey(p.opts.Namespace + "/" + p.opts.SecretName)
	if err != nil || !ok {
		return nil
	}
	return obj.(*corev1.Secret).Data[KeyCABundle]
}

// liveBundle is the bundle of the Secret as the API server holds it.
func (p *SelfSigned) liveBundle(ctx context.Context) ([]byte, error) {
	secret, err := p.get(ctx)
	if err != nil || secret == nil {
		return nil, err
	}
	return secret.Data[KeyCABundle], nil
}

func (p *SelfSigned) wake() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

func (p *SelfSigned) secretListWatch() *cache.ListWatch {
	byName := fields.OneTermEqualSelector("metadata.name", p.opts.SecretName).String()
	secrets := p.client.CoreV1().Secrets(p.opts.Namespace)
	return listWatch(secrets.List, secrets.Watch, func(o *metav1.ListOptions) { o.FieldSelector = byName })
}

// listWatch lists and watches through a typed client, every request narrowed
// by narrow.
func listWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), narrow func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return watchFn(ctx, o)
		},
	}
}

func (p *SelfSigned) logger() logr.Logger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log
}

func (p *SelfSigned) leafOrNil() *tls.Certificate { return p.cert.Load() }

// runInjectors runs every injector until ctx ends; the channel gives the
// first error, or nil, once all have returned.
func runInjectors(ctx context.Context, injectors []*injector) <-chan error {
	done := make(chan error, 1)
	errs := make(chan error, len(injectors))
	for _, inj := range injectors {
		go func() { errs <- inj.run(ctx) }()
	}
	go func() {
		var first error
		for range injectors {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		done <- first
	}()
	return done
}

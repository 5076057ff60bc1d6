package certs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// fieldManager names the certificate machinery in managedFields of the Secret
// and of the webhook configurations it patches.
const fieldManager = "echelon-webhook-certs"

// configKey names one webhook configuration.
type configKey struct {
	mutating bool
	name     string
}

func (k configKey) String() string {
	if k.mutating {
		return "MutatingWebhookConfiguration " + k.name
	}
	return "ValidatingWebhookConfiguration " + k.name
}

// injector keeps the CA bundle in clientConfig.caBundle of every webhook of
// the labelled webhook configurations, and puts it back whenever something
// else (helm upgrade) changes it.
type injector struct {
	client kubernetes.Interface
	// bundle is the bundle as the Secret's informer holds it; live reads it
	// from the API server before a patch, so that a replica whose informer is
	// behind never puts an older bundle back over a newer one.
	bundle func() []byte
	live   func(context.Context) ([]byte, error)
	// changed is called on every change of a configuration: the decision
	// loop waits for the bundle to be everywhere.
	changed func()
	log     logr.Logger

	validating, mutating cache.SharedIndexInformer
	queue                workqueue.TypedRateLimitingInterface[configKey]
	synced               atomic.Bool
	// patches counts the patches sent, for tests.
	patches atomic.Int64
}

func newInjector(client kubernetes.Interface, selector string, bundle func() []byte, live func(context.Context) ([]byte, error), changed func(), log logr.Logger) *injector {
	in := &injector{
		client:  client,
		bundle:  bundle,
		live:    live,
		changed: changed,
		log:     log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[configKey](),
			workqueue.TypedRateLimitingQueueConfig[configKey]{Name: "webhook-ca-injection"}),
	}
	bySelector := func(o *metav1.ListOptions) { o.LabelSelector = selector }
	vwcs := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	mwcs := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	in.validating = cache.NewSharedIndexInformer(listWatch(vwcs.List, vwcs.Watch, bySelector), &admissionv1.ValidatingWebhookConfiguration{}, 0, cache.Indexers{})
	in.mutating = cache.NewSharedIndexInformer(listWatch(mwcs.List, mwcs.Watch, bySelector), &admissionv1.MutatingWebhookConfiguration{}, 0, cache.Indexers{})
	return in
}

// run watches the configurations and injects until ctx ends.
func (in *injector) run(ctx context.Context) error {
	defer in.queue.ShutDown()
	for _, inf := range []struct {
		informer cache.SharedIndexInformer
		mutating bool
	}{{in.validating, false}, {in.mutating, true}} {
		mutating := inf.mutating
		enqueue := func(obj any) {
			if m, err := meta(obj); err == nil {
				in.queue.Add(configKey{mutating: mutating, name: m.GetName()})
			}
			in.changed()
		}
		if _, err := inf.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: func(any) { in.changed() },
		}); err != nil {
			return err
		}
		go inf.informer.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), in.validating.HasSynced, in.mutating.HasSynced) {
		return nil
	}
	in.synced.Store(true)
	in.changed()
	go func() {
		<-ctx.Done()
		in.queue.ShutDown()
	}()
	for in.next(ctx) {
	}
	return nil
}

// next handles one queued configuration; false once the queue is shut down.
func (in *injector) next(ctx context.Context) bool {
	key, shutdown := in.queue.Get()
	if shutdown {
		return false
	}
	defer in.queue.Done(key)
	if err := in.sync(ctx, key); err != nil {
		switch {
		case ctx.Err() != nil:
		case apierrors.IsConflict(err):
			// Another replica injected first, or someone else changed the
			// configuration: the retry decides on what is there now.
			in.log.V(1).Info("CA bundle injection raced with another change; retrying", "config", key.String())
		default:
			in.log.Error(err, "inject CA bundle", "config", key.String())
		}
		in.queue.AddRateLimited(key)
		return true
	}
	in.queue.Forget(key)
	return true
}

// enqueueAll queues every labelled configuration, as when the bundle changed.
func (in *injector) enqueueAll() {
	for _, k := range in.validating.GetStore().ListKeys() {
		in.queue.Add(configKey{name: k})
	}
	for _, k := range in.mutating.GetStore().ListKeys() {
		in.queue.Add(configKey{mutating: true, name: k})
	}
}

// injected reports whether every labelled configuration carries bundle.
func (in *injector) injected(bundle []byte) bool {
	if !in.synced.Load() {
		return false
	}
	for _, store := range []cache.Store{in.validating.GetStore(), in.mutating.GetStore()} {
		for _, obj := range store.List() {
			if _, stale := staleWebhooks(obj, bundle); len(stale) > 0 {
				return false
			}
		}
	}
	return true
}

// sync patches the caBundle of the configuration's webhooks that differ from
// the bundle, and nothing when none does.
func (in *injector) sync(ctx context.Context, key configKey) error {
	store := in.validating.GetStore()
	if key.mutating {
		store = in.mutating.GetStore()
	}
	obj, ok, err := store.GetByKey(key.name)
	if err != nil || !ok {
		return err
	}
	want := in.bundle()
	if len(want) == 0 {
		return nil
	}
	if _, stale := staleWebhooks(obj, want); len(stale) == 0 {
		return nil
	}
	if want, err = in.live(ctx); err != nil || len(want) == 0 {
		return err
	}
	rv, stale := staleWebhooks(obj, want)
	if len(stale) == 0 {
		return nil
	}
	patch, err := bundlePatch(rv, stale, want)
	if err != nil {
		return err
	}
	api := in.client.AdmissionregistrationV1()
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	if key.mutating {
		_, err = api.MutatingWebhookConfigurations().Patch(ctx, key.name, types.StrategicMergePatchType, patch, opts)
	} else {
		_, err = api.ValidatingWebhookConfigurations().Patch(ctx, key.name, types.StrategicMergePatchType, patch, opts)
	}
	in.patches.Add(1)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patch caBundle: %w (compat mode may patch only the webhook configurations it is granted by name: add %s to the Helm value grafanaCompatWebhookConfigurations)", err, key.name)
	case err != nil:
		// A Conflict means the configuration changed since the informer saw
		// it; the change is on its way as an event, and the retry uses it.
		return fmt.Errorf("patch caBundle: %w", err)
	}
	in.log.Info("CA bundle injected", "config", key.String(), "webhooks", stale)
	return nil
}

// staleWebhooks returns the resourceVersion of a webhook configuration and the
// names of its webhooks whose caBundle is not bundle.
func staleWebhooks(obj any, bundle []byte) (resourceVersion string, stale []string) {
	switch c := obj.(type) {
	case *admissionv1.ValidatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
				stale = append(stale, w.Name)
			}
		}
		return c.ResourceVersion, stale
	case *admissionv1.MutatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
				stale = append(stale, w.Name)
			}
		}
		return c.ResourceVersion, stale
	}
	return "", nil
}

// bundlePatch is a strategic merge patch that sets caBundle of the named
// webhooks (merged by name) and nothing else, and applies only to the
// resourceVersion it was computed from.
func bundlePatch(resourceVersion string, webhooks []string, bundle []byte) ([]byte, error) {
	type clientConfig struct {
		CABundle []byte `json:"caBundle"`
	}
	type webhook struct {
		Name         string       `json:"name"`
		ClientConfig clientConfig `json:"clientConfig"`
	}
	p := struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Webhooks []webhook `json:"webhooks"`
	}{}
	p.Metadata.ResourceVersion = resourceVersion
	for _, name := range webhooks {
		p.Webhooks = append(p.Webhooks, webhook{Name: name, ClientConfig: clientConfig{CABundle: bundle}})
	}
	return json.Marshal(p)
}

func meta(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, errors.New("not an object")
	}
	return m, nil
}

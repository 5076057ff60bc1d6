package httptls

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Objects reads the Secrets and ConfigMaps that tls blocks name, from a
// watch of each object read, and live on a miss.
//
// Why one watch per object, not a cache of all Secrets: the operator is
// granted get on Secrets in the namespaces an installer opts in
// (rbac.analysisSecretNamespaces), possibly confined to some names with
// resourceNames; a namespace-wide informer would hold every Secret of those
// namespaces in memory and need list on all of them. A list and watch
// narrowed by the field selector metadata.name=<name> holds only what a tls
// block names, and RBAC authorizes it against resourceNames as a get (the
// kubelet reads the Secrets of its pods the same way). The names are learnt
// from the reads themselves rather than from the specs, so every caller
// (checks, hooks, pod endpoints, webhooks) is covered without a list of
// where tls blocks live, and a name no longer read stops being watched
// after DefaultIdle.
//
// A read whose object is not watched yet, or whose watch has not synced,
// goes to the API server (live), exactly as before, and starts the watch
// for the next read: the first read of a block costs a GET, a LIST and a
// WATCH; every later one, none. A rotated Secret reaches the store with its
// watch event, milliseconds after the write, so the next call uses it. When
// the watch is refused (a Role granting get but not list and watch, as
// before this cache), the object is read live at every call, as before, and
// the watch is tried again after DefaultIdle.
//
// Objects is a manager.Runnable that runs on every replica: the webhooks
// read tls blocks on followers too. Until it is started, every read is live.
type Objects struct {
	live      client.Reader
	clientset kubernetes.Interface
	idle      time.Duration
	now       func() time.Time

	mu      sync.Mutex
	ctx     context.Context // set by Start; nil before
	watches map[objectKey]*objectWatch
}

type objectKey struct {
	kind            string // "Secret" or "ConfigMap"
	namespace, name string
}

type objectWatch struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	started  time.Time
	lastRead time.Time
	// refused is set when the API server refuses the list or watch: reads
	// go live until the entry expires and a new watch is tried.
	refused bool
}

// NewObjects reads through clientset's watches, and through live (the
// manager's API reader) on a miss. idle 0 is DefaultIdle.
func NewObjects(clientset kubernetes.Interface, live client.Reader, idle time.Duration) *Objects {
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Objects{live: live, clientset: clientset, idle: idle, now: time.Now, watches: map[objectKey]*objectWatch{}}
}

// NewObjectsFor is the Objects of mgr, added to it so that it runs while it
// does.
func NewObjectsFor(mgr ctrl.Manager) (*Objects, error) {
	clientset, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("tls objects: %w", err)
	}
	o := NewObjects(clientset, mgr.GetAPIReader(), 0)
	if err := mgr.Add(o); err != nil {
		return nil, fmt.Errorf("add the tls objects' watches: %w", err)
	}
	return o, nil
}

var (
	_ client.Reader                  = &Objects{}
	_ manager.LeaderElectionRunnable = &Objects{}
)

// NeedLeaderElection is false: the webhooks of every replica read tls
// blocks.
func (o *Objects) NeedLeaderElection() bool { return false }

// Start runs the watches until ctx ends, stopping each one idle for longer
// than the idle time.
func (o *Objects) Start(ctx context.Context) error {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	ticker := time.NewTicker(max(o.idle/4, time.Second))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			o.mu.Lock()
			for key, w := range o.watches {
				w.stop()
				delete(o.watches, key)
			}
			o.ctx = nil
			o.mu.Unlock()
			return nil
		case <-ticker.C:
			o.Expire()
		}
	}
}

// Expire stops the watches not read for the idle time, and forgets the
// refusals older than it (so a grant given since is tried again).
func (o *Objects) Expire() {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	for key, w := range o.watches {
		if now.Sub(w.lastRead) > o.idle || w.refused && now.Sub(w.started) > o.idle {
			w.stop()
			delete(o.watches, key)
		}
	}
}

// Watched is how many objects are watched, refused ones included.
func (o *Objects) Watched() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.watches)
}

// Get reads a Secret or a ConfigMap from its watch once synced, live
// otherwise; any other kind live.
func (o *Objects) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var kind string
	switch obj.(type) {
	case *corev1.Secret:
		kind = "Secret"
	case *corev1.ConfigMap:
		kind = "ConfigMap"
	default:
		return o.live.Get(ctx, key, obj, opts...)
	}
	if len(opts) > 0 {
		return o.live.Get(ctx, key, obj, opts...)
	}
	w := o.watch(objectKey{kind: kind, namespace: key.Namespace, name: key.Name})
	if w == nil || !w.informer.HasSynced() {
		return o.live.Get(ctx, key, obj)
	}
	item, exists, err := w.informer.GetStore().GetByKey(key.Namespace + "/" + key.Name)
	if err != nil {
		return o.live.Get(ctx, key, obj)
	}
	if !exists {
		// The watch has synced and holds no such object: it does not exist
		// (a deletion or a creation arrives as an event).
		return apierrors.NewNotFound(schema.GroupResource{Resource: resourceOf(kind)}, key.Name)
	}
	switch stored := item.(type) {
	case *corev1.Secret:
		stored.DeepCopyInto(obj.(*corev1.Secret))
	case *corev1.ConfigMap:
		stored.DeepCopyInto(obj.(*corev1.ConfigMap))
	}
	return nil
}

// List is live: tls blocks name objects, they never list them.
func (o *Objects) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return o.live.List(ctx, list, opts...)
}

// watch returns the usable watch of key, starting one when none runs; nil
// before Start, or while the watch is refused.
func (o *Objects) watch(key objectKey) *objectWatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx == nil {
		return nil
	}
	now := o.now()
	w := o.watches[key]
	if w == nil {
		w = o.start(key, now)
		o.watches[key] = w
	}
	w.lastRead = now
	if w.refused {
		return nil
	}
	return w
}

// start runs a list and watch of the one object key names. Called with
// o.mu held.
func (o *Objects) start(key objectKey, now time.Time) *objectWatch {
	ctx, cancel := context.WithCancel(o.ctx)
	var example client.Object = &corev1.ConfigMap{}
	if key.kind == "Secret" {
		example = &corev1.Secret{}
	}
	lw := cache.NewListWatchFromClient(o.clientset.CoreV1().RESTClient(), resourceOf(key.kind), key.namespace,
		fields.OneTermEqualSelector("metadata.name", key.name))
	informer := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{})
	w := &objectWatch{informer: informer, stop: cancel, started: now}
	// Only the content counts: the managed fields would double what is kept.
	_ = informer.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(client.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			o.mu.Lock()
			w.refused = true
			o.mu.Unlock()
			cancel()
			// Not an error: the reads work, at a request each. Once per
			// object and idle time.
			ctrl.Log.WithName("httptls").Info("the operator may get but not watch this object of a tls block: it reads it from the API server at every call; grant list and watch on it (config/rbac/analysis_secrets_role.yaml)",
				"kind", key.kind, "namespace", key.namespace, "name", key.name)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	go informer.RunWithContext(ctx)
	return w
}

func resourceOf(kind string) string {
	if kind == "Secret" {
		return "secrets"
	}
	return "configmaps"
}

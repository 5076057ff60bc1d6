// Package controllertest is the controller tier's harness: each reconciler
// package's tests run their reconciler against a real API server (etcd and
// kube-apiserver only, no controllers, no kubelets), where the test plays the
// StatefulSet controller and the kubelet so that it decides exactly when each
// pod is created, becomes Ready or goes away, and can make the operator's view
// of pods lag.
package controllertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
)

var (
	sharedOnce sync.Once
	sharedCP   *controlplane.ControlPlane
	sharedErr  error
)

// Main runs a package's tests, then stops the API server they shared, if one
// started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if sharedCP != nil {
		if err := sharedCP.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}
	os.Exit(code)
}

// APIServer starts etcd and kube-apiserver with the CRDs once per test binary;
// each test works in its own namespace.
func APIServer(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	sharedOnce.Do(func() {
		sharedCP, sharedErr = controlplane.Start(context.Background(), controlplane.Options{
			APIServerOnly: true,
			CRDDirs:       []string{controlplane.CRDBasesDir},
			Scheme:        Scheme(),
		})
	})
	if sharedErr != nil {
		if errors.Is(sharedErr, controlplane.ErrAssetsMissing) && os.Getenv(controlplane.SkipEnv) == "1" {
			t.Skipf("skipping: %v", sharedErr)
		}
		t.Fatalf("%v", sharedErr)
	}
	return sharedCP
}

// Scheme holds the built-in kinds and Echelon's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Env is one test's namespace, admin client and manager.
type Env struct {
	T     *testing.T
	Ctx   context.Context
	Admin client.Client
	NS    string
	// Manager has Echelon's cache indexes; the test registers its
	// reconcilers, then calls Start.
	Manager ctrl.Manager

	cancel context.CancelFunc
}

// Options shape the manager under test.
type Options struct {
	// PodLag delays every pod event reaching the cache by this long: a slow
	// watch, as after a handover or under load.
	PodLag time.Duration
}

// New makes a namespace and a manager scoped to it, with the operator's
// cache options and indexes. The manager starts with Start.
func New(t *testing.T, opts Options) *Env {
	t.Helper()
	cp := APIServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	ns, err := cp.CreateNamespace(ctx, "ctrl")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cacheOpts := lookup.CacheOptions([]string{ns})
	if opts.PodLag > 0 {
		cacheOpts.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			if _, ok := obj.(*corev1.Pod); ok {
				lw = laggingListerWatcher{ListerWatcher: lw, lag: opts.PodLag}
			}
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
	}
	mgr, err := ctrl.NewManager(cp.Config(), ctrl.Options{
		Scheme:                 Scheme(),
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test builds its own manager with a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := lookup.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		cancel()
		t.Fatal(err)
	}
	return &Env{T: t, Ctx: ctx, Admin: cp.Client(), NS: ns, Manager: mgr, cancel: cancel}
}

// Start warms the caches, starts the manager until the test ends, and waits
// for the caches to sync.
func (e *Env) Start() {
	e.T.Helper()
	if err := lookup.WarmCaches(e.Ctx, e.Manager.GetCache()); err != nil {
		e.T.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Manager.Start(e.Ctx) }()
	e.T.Cleanup(func() {
		e.cancel()
		if err := <-done; err != nil {
			e.T.Errorf("manager: %v", err)
		}
	})
	if !e.Manager.GetCache().WaitForCacheSync(e.Ctx) {
		e.T.Fatal("caches did not sync")
	}
}

// Eventually polls cond until it holds or the timeout passes.
func (e *Env) Eventually(timeout time.Duration, what string, cond func() (bool, error)) {
	e.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			e.T.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- Objects -----------------------------------------------------------------

// StatefulSet creates an OnDelete StatefulSet and reports, as its controller
// would, that it observed its spec with update revision rev.
func (e *Env) StatefulSet(name string, replicas int32, rev string) *appsv1.StatefulSet {
	e.T.Helper()
	sts := builders.MakeStatefulSet(e.NS, name).Replicas(replicas).OnDelete().Image("app:" + rev).Obj()
	if err := e.Admin.Create(e.Ctx, sts); err != nil {
		e.T.Fatal(err)
	}
	e.SetRevisions(name, rev, rev)
	return e.GetSTS(name)
}

// SetRevisions writes the StatefulSet's status as its controller would after
// observing a template whose revision is update.
func (e *Env) SetRevisions(name, current, update string) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.GetSTS(name)
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.CurrentRevision = current
		sts.Status.UpdateRevision = update
		return e.Admin.Status().Update(e.Ctx, sts)
	}); err != nil {
		e.T.Fatal(err)
	}
}

func (e *Env) GetSTS(name string) *appsv1.StatefulSet {
	e.T.Helper()
	sts := &appsv1.StatefulSet{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: name}, sts); err != nil {
		e.T.Fatal(err)
	}
	return sts
}

// Group creates a RolloutGroup of the named members.
func (e *Env) Group(name string, maxUnavailable int32, members ...string) *v1alpha1.RolloutGroup {
	e.T.Helper()
	rg := builders.MakeRolloutGroup(e.NS, name).MaxUnavailable(maxUnavailable).Members(members...).Obj()
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		e.T.Fatal(err)
	}
	return rg
}

func (e *Env) GetGroup(name string) *v1alpha1.RolloutGroup {
	e.T.Helper()
	rg := &v1alpha1.RolloutGroup{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: name}, rg); err != nil {
		e.T.Fatal(err)
	}
	return rg
}

// PodSpec says how the test's stand-in kubelet treats a pod.
type PodSpec struct {
	// Bound pods have a node: deleting one leaves it terminating (no kubelet
	// confirms it) until the test removes it. Unbound pods go at once.
	Bound bool
	// NotReady leaves the pod Running but not Ready.
	NotReady bool
	// IP is the pod's IP, if any.
	IP string
}

// Pod creates the StatefulSet's pod at ordinal on revision rev, Running and
// (unless spec says not) Ready, as its controller and a kubelet would.
func (e *Env) Pod(sts *appsv1.StatefulSet, ordinal int, rev string, spec PodSpec) *corev1.Pod {
	e.T.Helper()
	b := builders.MakePod(e.NS, sts.Name, ordinal).ControlledBy(sts).Container("app", "app:"+rev).Ready(time.Now())
	if spec.IP != "" {
		b.IP(spec.IP)
	}
	if rev != "" {
		b.Revision(rev)
	}
	if spec.Bound {
		b.NodeName("node-that-no-kubelet-runs")
	}
	if spec.NotReady {
		b.NotReady()
	}
	pod := b.Obj()
	status := pod.Status
	if err := e.Admin.Create(e.Ctx, pod); err != nil {
		e.T.Fatal(err)
	}
	// The API server drops status on create: write it as the kubelet would.
	pod.Status = status
	if err := e.Admin.Status().Update(e.Ctx, pod); err != nil {
		e.T.Fatal(err)
	}
	return pod
}

// RecreatePod deletes the StatefulSet's pod at ordinal, waits until it is
// gone, and creates it again as Pod does: same name, another UID (an
// eviction, a node drain).
func (e *Env) RecreatePod(sts *appsv1.StatefulSet, ordinal int, rev string, spec PodSpec) *corev1.Pod {
	e.T.Helper()
	old := &corev1.Pod{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: fmt.Sprintf("%s-%d", sts.Name, ordinal)}, old); err != nil {
		e.T.Fatal(err)
	}
	if err := e.Admin.Delete(e.Ctx, old, client.GracePeriodSeconds(0)); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(10*time.Second, old.Name+" gone", func() (bool, error) {
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return e.Pod(sts, ordinal, rev, spec)
}

// Pods creates the StatefulSet's pods [0, n) on rev.
func (e *Env) Pods(sts *appsv1.StatefulSet, n int, rev string, spec PodSpec) {
	e.T.Helper()
	for i := range n {
		e.Pod(sts, i, rev, spec)
	}
}

// Terminating counts the StatefulSet's pods that have a deletionTimestamp.
func (e *Env) Terminating(sts string) int {
	e.T.Helper()
	var list corev1.PodList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": sts}); err != nil {
		e.T.Fatal(err)
	}
	n := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			n++
		}
	}
	return n
}

// --- Playing the StatefulSet controller and the kubelet -------------------------

// PlayStatefulSetController recreates each deleted pod of the StatefulSets on
// their update revision and makes it Ready after readyAfter, and keeps each
// StatefulSet's status.replicas and readyReplicas current, until the test ends:
// what kube-controller-manager and a kubelet do, with the timing in the test's
// hands. The status updates reach the operator through its StatefulSet watch,
// which no test slows down.
func (e *Env) PlayStatefulSetController(timing KubeletTiming, names ...string) {
	e.T.Helper()
	wc, err := client.NewWithWatch(APIServer(e.T).Config(), client.Options{Scheme: Scheme()})
	if err != nil {
		e.T.Fatal(err)
	}
	w, err := wc.Watch(e.Ctx, &corev1.PodList{}, client.InNamespace(e.NS))
	if err != nil {
		e.T.Fatal(err)
	}
	finishing := map[types.UID]bool{}
	owned := map[string]bool{}
	for _, n := range names {
		owned[n] = true
	}
	done := make(chan struct{})
	e.T.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !owned[lookup.OwnerStatefulSet(pod)] {
				continue
			}
			switch {
			case ev.Type == watch.Deleted:
				if err := e.recreate(pod, timing.ReadyAfter); err != nil && e.Ctx.Err() == nil {
					e.T.Errorf("recreate %s: %v", pod.Name, err)
				}
			case pod.DeletionTimestamp != nil && !finishing[pod.UID]:
				finishing[pod.UID] = true
				go e.finishTermination(pod, timing.TerminateAfter)
			}
			if err := e.CountPods(lookup.OwnerStatefulSet(pod)); err != nil && e.Ctx.Err() == nil {
				e.T.Errorf("count pods of %s: %v", lookup.OwnerStatefulSet(pod), err)
			}
		}
	}()
}

// KubeletTiming is how fast the stand-in kubelet acts.
type KubeletTiming struct {
	// ReadyAfter is how long a recreated pod takes to become Ready.
	ReadyAfter time.Duration
	// TerminateAfter is how long a deleted pod bound to a node stays
	// Terminating before the kubelet confirms it is gone.
	TerminateAfter time.Duration
}

// finishTermination removes a terminating pod after d, as its kubelet would
// once the containers stopped.
func (e *Env) finishTermination(pod *corev1.Pod, d time.Duration) {
	select {
	case <-time.After(d):
	case <-e.Ctx.Done():
		return
	}
	err := e.Admin.Delete(e.Ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if err != nil && e.Ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		e.T.Errorf("finish termination of %s: %v", pod.Name, err)
	}
}

// CountPods writes status.replicas and readyReplicas of a StatefulSet from its
// pods, as its controller does.
func (e *Env) CountPods(name string) error {
	var list corev1.PodList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": name}); err != nil {
		return err
	}
	var replicas, ready int32
	for i := range list.Items {
		replicas++
		if kube.PodReady(&list.Items[i]) && list.Items[i].DeletionTimestamp == nil {
			ready++
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: name}, sts); err != nil {
			return err
		}
		if sts.Status.Replicas == replicas && sts.Status.ReadyReplicas == ready {
			return nil
		}
		sts.Status.Replicas, sts.Status.ReadyReplicas = replicas, ready
		return e.Admin.Status().Update(e.Ctx, sts)
	})
}

func (e *Env) recreate(gone *corev1.Pod, readyAfter time.Duration) error {
	sts := &appsv1.StatefulSet{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: lookup.OwnerStatefulSet(gone)}, sts); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: gone.Name, Namespace: e.NS, Labels: map[string]string{}, OwnerReferences: gone.OwnerReferences},
		Spec: corev1.PodSpec{NodeName: gone.Spec.NodeName,
			Containers: []corev1.Container{{Name: "app", Image: "app:" + sts.Status.UpdateRevision}}},
	}
	for k, v := range gone.Labels {
		pod.Labels[k] = v
	}
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = sts.Status.UpdateRevision
	if err := e.Admin.Create(e.Ctx, pod); err != nil {
		return err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
	}}
	if err := e.Admin.Status().Update(e.Ctx, pod); err != nil {
		return err
	}
	go func() {
		select {
		case <-time.After(readyAfter):
		case <-e.Ctx.Done():
			return
		}
		pod.Status.Conditions[0] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
		if err := e.Admin.Status().Update(e.Ctx, pod); err != nil && e.Ctx.Err() == nil && !apierrors.IsNotFound(err) {
			e.T.Errorf("make %s Ready: %v", pod.Name, err)
		}
	}()
	return nil
}

// laggingListerWatcher delays every watch event by lag, in order.
type laggingListerWatcher struct {
	toolscache.ListerWatcher
	lag time.Duration
}

func (l laggingListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	// The informer calls Watch on a ListerWatcher without a context, so
	// that is the method to delay.
	w, err := l.ListerWatcher.Watch(opts) //nolint:staticcheck // see above
	if err != nil {
		return nil, err
	}
	lw := &laggingWatch{inner: w, out: make(chan watch.Event), done: make(chan struct{})}
	go lw.relay(l.lag)
	return lw, nil
}

type laggingWatch struct {
	inner watch.Interface
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
}

// relay stamps each event as it arrives and hands it on lag later, so that a
// burst arrives as a burst, lag late.
func (l *laggingWatch) relay(lag time.Duration) {
	type stamped struct {
		ev watch.Event
		at time.Time
	}
	pending := make(chan stamped, 4096)
	go func() {
		defer close(pending)
		for ev := range l.inner.ResultChan() {
			select {
			case pending <- stamped{ev, time.Now()}:
			case <-l.done:
				return
			}
		}
	}()
	defer close(l.out)
	for s := range pending {
		select {
		case <-time.After(time.Until(s.at.Add(lag))):
		case <-l.done:
			return
		}
		select {
		case l.out <- s.ev:
		case <-l.done:
			return
		}
	}
}

func (l *laggingWatch) Stop() {
	l.once.Do(func() {
		close(l.done)
		l.inner.Stop()
	})
}

func (l *laggingWatch) ResultChan() <-chan watch.Event { return l.out }

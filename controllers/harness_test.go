package controllers

// The controller tier: the reconciler against a real API server (etcd and
// kube-apiserver only, no controllers, no kubelets), where the test plays the
// StatefulSet controller and the kubelet so that it decides exactly when each pod
// is created, becomes Ready or goes away, and can make the operator's view of
// pods lag or freeze.

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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	"github.com/echelon-operator/echelon/test/controlplane"
)

var (
	sharedOnce sync.Once
	sharedCP   *controlplane.ControlPlane
	sharedErr  error
)

// TestMain stops the API server the controller tests share, if one started.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCP != nil {
		if err := sharedCP.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}
	os.Exit(code)
}

// apiServer starts etcd and kube-apiserver with the CRDs once per test binary;
// each test works in its own namespace.
func apiServer(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	sharedOnce.Do(func() {
		sharedCP, sharedErr = controlplane.Start(context.Background(), controlplane.Options{
			APIServerOnly: true,
			CRDDirs:       []string{controlplane.CRDBasesDir},
			Scheme:        testScheme(),
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

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// env is one test's namespace, admin client and reconciler.
type env struct {
	t     *testing.T
	ctx   context.Context
	admin client.Client
	ns    string
	r     *RolloutGroupReconciler
	// view sits between the reconciler and the cache for pod reads, so a test
	// can freeze or delay what the reconciler sees.
	view *podView
	// liveReads counts the reconciler's reads that bypass the cache.
	liveReads *countingReader
	// liveReader is the user of the reconciler's live reads with
	// envOptions.liveReadsAsOperator, nil otherwise.
	liveReader *controlplane.User
}

// envOptions shape the reconciler under test.
type envOptions struct {
	// eventDriven registers the controller with its watches, as the operator
	// does; otherwise the test calls Reconcile itself.
	eventDriven bool
	// podLag delays every pod event reaching the cache by this long: a slow
	// watch, as after a handover or under load.
	podLag time.Duration
	// wrapClient wraps the reconciler's client, e.g. to act before a deletion.
	wrapClient func(client.Client) client.Client
	// liveReadsAsOperator makes the reads that bypass the cache (Secrets,
	// ControllerRevisions...) as a user bound to the generated RBAC only, as
	// the operator runs, instead of as admin: a read the RBAC refuses fails.
	liveReadsAsOperator bool
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	cp := apiServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	ns, err := cp.CreateNamespace(ctx, "ctrl")
	if err != nil {
		t.Fatal(err)
	}
	cacheOpts := lookup.CacheOptions([]string{ns})
	if opts.podLag > 0 {
		cacheOpts.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			if _, ok := obj.(*corev1.Pod); ok {
				lw = laggingListerWatcher{ListerWatcher: lw, lag: opts.podLag}
			}
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
	}
	mgr, err := ctrl.NewManager(cp.Config(), ctrl.Options{
		Scheme:                 testScheme(),
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test builds its own manager with a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := lookup.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	r := newRolloutGroupReconciler(mgr)
	e := &env{t: t, ctx: ctx, admin: cp.Client(), ns: ns, r: r}
	e.view = &podView{Client: r.Client}
	r.Client = e.view
	if opts.wrapClient != nil {
		r.Client = opts.wrapClient(r.Client)
	}
	if opts.liveReadsAsOperator {
		if e.liveReader, err = cp.NewOperatorUser(ctx, "echelon-"+ns); err != nil {
			t.Fatal(err)
		}
		if r.apiReader, err = client.New(e.liveReader.Config, client.Options{Scheme: testScheme()}); err != nil {
			t.Fatal(err)
		}
	}
	e.liveReads = &countingReader{Reader: r.apiReader}
	r.apiReader = e.liveReads
	if opts.eventDriven {
		if err := r.setupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	if err := lookup.WarmCaches(ctx, mgr.GetCache()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	return e
}

// eventually polls cond until it holds or the timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() (bool, error)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			e.t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- Objects -----------------------------------------------------------------

// statefulSet creates an OnDelete StatefulSet and reports, as its controller
// would, that it observed its spec with update revision rev.
func (e *env) statefulSet(name string, replicas int32, rev string) *appsv1.StatefulSet {
	e.t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To(replicas),
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:    name,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:" + rev}}},
			},
		},
	}
	if err := e.admin.Create(e.ctx, sts); err != nil {
		e.t.Fatal(err)
	}
	e.setRevisions(name, rev, rev)
	return e.getSTS(name)
}

// setRevisions writes the StatefulSet's status as its controller would after
// observing a template whose revision is update.
func (e *env) setRevisions(name, current, update string) {
	e.t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.getSTS(name)
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.CurrentRevision = current
		sts.Status.UpdateRevision = update
		return e.admin.Status().Update(e.ctx, sts)
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) getSTS(name string) *appsv1.StatefulSet {
	e.t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, sts); err != nil {
		e.t.Fatal(err)
	}
	return sts
}

// group creates a RolloutGroup of the named members.
func (e *env) group(name string, maxUnavailable int32, members ...string) *v1alpha1.RolloutGroup {
	e.t.Helper()
	rg := &v1alpha1.RolloutGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       v1alpha1.RolloutGroupSpec{MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable))},
	}
	for _, m := range members {
		rg.Spec.StatefulSets = append(rg.Spec.StatefulSets, v1alpha1.RolloutMember{Name: m})
	}
	if err := e.admin.Create(e.ctx, rg); err != nil {
		e.t.Fatal(err)
	}
	return rg
}

func (e *env) getGroup(name string) *v1alpha1.RolloutGroup {
	e.t.Helper()
	rg := &v1alpha1.RolloutGroup{}
	if err := e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, rg); err != nil {
		e.t.Fatal(err)
	}
	return rg
}

// podSpec says how the test's stand-in kubelet treats a pod.
type podSpec struct {
	// bound pods have a node: deleting one leaves it terminating (no kubelet
	// confirms it) until the test removes it. Unbound pods go at once.
	bound bool
	// notReady leaves the pod Running but not Ready.
	notReady bool
	// ip is the pod's IP, if any.
	ip string
}

// pod creates the StatefulSet's pod at ordinal on revision rev, Running and
// (unless spec says not) Ready, as its controller and a kubelet would.
func (e *env) pod(sts *appsv1.StatefulSet, ordinal int, rev string, spec podSpec) *corev1.Pod {
	e.t.Helper()
	name := fmt.Sprintf("%s-%d", sts.Name, ordinal)
	labels := map[string]string{appsv1.StatefulSetPodNameLabel: name}
	for k, v := range sts.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	if rev != "" {
		labels[appsv1.ControllerRevisionHashLabelKey] = rev
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: e.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:" + rev}}},
	}
	if spec.bound {
		pod.Spec.NodeName = "node-that-no-kubelet-runs"
	}
	if err := e.admin.Create(e.ctx, pod); err != nil {
		e.t.Fatal(err)
	}
	ready := corev1.ConditionTrue
	if spec.notReady {
		ready = corev1.ConditionFalse
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: spec.ip, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()},
	}}
	if spec.ip != "" {
		pod.Status.PodIPs = []corev1.PodIP{{IP: spec.ip}}
	}
	if err := e.admin.Status().Update(e.ctx, pod); err != nil {
		e.t.Fatal(err)
	}
	return pod
}

// pods creates the StatefulSet's pods [0, n) on rev.
func (e *env) pods(sts *appsv1.StatefulSet, n int, rev string, spec podSpec) {
	e.t.Helper()
	for i := range n {
		e.pod(sts, i, rev, spec)
	}
}

// terminating counts the StatefulSet's pods that have a deletionTimestamp.
func (e *env) terminating(sts string) int {
	e.t.Helper()
	var list corev1.PodList
	if err := e.admin.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{"app": sts}); err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			n++
		}
	}
	return n
}

func (e *env) reconcile(group string) ctrl.Result {
	e.t.Helper()
	res, err := e.r.Reconcile(e.ctx, reconcileRequest(e, group))
	if err != nil {
		e.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// --- The operator's view of pods ------------------------------------------------

// podView serves the reconciler's cached pod reads. Frozen, it answers with a
// snapshot taken earlier, as a cache that has not seen what happened since
// would. Other reads pass through.
type podView struct {
	client.Client

	mu     sync.Mutex
	frozen []corev1.Pod
}

// freeze makes every later pod read answer with the pods the cache holds now,
// in every namespace.
func (v *podView) freeze(ctx context.Context) error {
	var all corev1.PodList
	if err := v.Client.List(ctx, &all); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.frozen = all.Items
	return nil
}

func (v *podView) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	podList, ok := list.(*corev1.PodList)
	v.mu.Lock()
	frozen := v.frozen
	v.mu.Unlock()
	if !ok || frozen == nil {
		return v.Client.List(ctx, list, opts...)
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	podList.Items = nil
	for _, p := range frozen {
		if lo.Namespace != "" && p.Namespace != lo.Namespace {
			continue
		}
		if lo.FieldSelector != nil && !lo.FieldSelector.Matches(fields.Set{lookup.IndexPodOwner: lookup.OwnerStatefulSet(&p)}) {
			continue
		}
		podList.Items = append(podList.Items, *p.DeepCopy())
	}
	return nil
}

// laggingListerWatcher delays every watch event by lag, in order.
type laggingListerWatcher struct {
	toolscache.ListerWatcher
	lag time.Duration
}

func (l laggingListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.ListerWatcher.Watch(opts)
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

// countingReader counts reads that bypass the cache.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	lists int
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Reader.List(ctx, list, opts...)
}

func (c *countingReader) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

// --- Playing the StatefulSet controller and the kubelet -------------------------

// playStatefulSetController recreates each deleted pod of the StatefulSets on
// their update revision and makes it Ready after readyAfter, and keeps each
// StatefulSet's status.replicas and readyReplicas current, until the test ends:
// what kube-controller-manager and a kubelet do, with the timing in the test's
// hands. The status updates reach the operator through its StatefulSet watch,
// which no test slows down.
func (e *env) playStatefulSetController(timing kubeletTiming, names ...string) {
	e.t.Helper()
	wc, err := client.NewWithWatch(apiServer(e.t).Config(), client.Options{Scheme: testScheme()})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := wc.Watch(e.ctx, &corev1.PodList{}, client.InNamespace(e.ns))
	if err != nil {
		e.t.Fatal(err)
	}
	finishing := map[types.UID]bool{}
	owned := map[string]bool{}
	for _, n := range names {
		owned[n] = true
	}
	done := make(chan struct{})
	e.t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !owned[lookup.OwnerStatefulSet(pod)] {
				continue
			}
			switch {
			case ev.Type == watch.Deleted:
				if err := e.recreate(pod, timing.readyAfter); err != nil && e.ctx.Err() == nil {
					e.t.Errorf("recreate %s: %v", pod.Name, err)
				}
			case pod.DeletionTimestamp != nil && !finishing[pod.UID]:
				finishing[pod.UID] = true
				go e.finishTermination(pod, timing.terminateAfter)
			}
			if err := e.countPods(lookup.OwnerStatefulSet(pod)); err != nil && e.ctx.Err() == nil {
				e.t.Errorf("count pods of %s: %v", lookup.OwnerStatefulSet(pod), err)
			}
		}
	}()
}

// kubeletTiming is how fast the stand-in kubelet acts.
type kubeletTiming struct {
	// readyAfter is how long a recreated pod takes to become Ready.
	readyAfter time.Duration
	// terminateAfter is how long a deleted pod bound to a node stays
	// terminating before the kubelet confirms it is gone.
	terminateAfter time.Duration
}

// finishTermination removes a terminating pod after d, as its kubelet would
// once the containers stopped.
func (e *env) finishTermination(pod *corev1.Pod, d time.Duration) {
	select {
	case <-time.After(d):
	case <-e.ctx.Done():
		return
	}
	err := e.admin.Delete(e.ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if err != nil && e.ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		e.t.Errorf("finish termination of %s: %v", pod.Name, err)
	}
}

// countPods writes status.replicas and readyReplicas of a StatefulSet from its
// pods, as its controller does.
func (e *env) countPods(name string) error {
	var list corev1.PodList
	if err := e.admin.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{"app": name}); err != nil {
		return err
	}
	var replicas, ready int32
	for i := range list.Items {
		replicas++
		if kube.PodReadyCondition(&list.Items[i]) == corev1.ConditionTrue && list.Items[i].DeletionTimestamp == nil {
			ready++
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, sts); err != nil {
			return err
		}
		if sts.Status.Replicas == replicas && sts.Status.ReadyReplicas == ready {
			return nil
		}
		sts.Status.Replicas, sts.Status.ReadyReplicas = replicas, ready
		return e.admin.Status().Update(e.ctx, sts)
	})
}

func (e *env) recreate(gone *corev1.Pod, readyAfter time.Duration) error {
	sts := &appsv1.StatefulSet{}
	if err := e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: lookup.OwnerStatefulSet(gone)}, sts); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: gone.Name, Namespace: e.ns, Labels: map[string]string{}, OwnerReferences: gone.OwnerReferences},
		Spec: corev1.PodSpec{NodeName: gone.Spec.NodeName,
			Containers: []corev1.Container{{Name: "app", Image: "app:" + sts.Status.UpdateRevision}}},
	}
	for k, v := range gone.Labels {
		pod.Labels[k] = v
	}
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = sts.Status.UpdateRevision
	if err := e.admin.Create(e.ctx, pod); err != nil {
		return err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
	}}
	if err := e.admin.Status().Update(e.ctx, pod); err != nil {
		return err
	}
	go func() {
		select {
		case <-time.After(readyAfter):
		case <-e.ctx.Done():
			return
		}
		pod.Status.Conditions[0] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
		if err := e.admin.Status().Update(e.ctx, pod); err != nil && e.ctx.Err() == nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("make %s Ready: %v", pod.Name, err)
		}
	}()
	return nil
}

func reconcileRequest(e *env, group string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: group}}
}

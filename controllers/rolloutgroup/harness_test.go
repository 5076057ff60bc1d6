package rolloutgroup

// The controller tier of the RolloutGroup reconciler, on controllertest's
// harness: the test plays the StatefulSet controller and the kubelet, and can
// freeze or delay the reconciler's view of pods.

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/test/controlplane"
)

func TestMain(m *testing.M) { controllertest.Main(m) }

// env is one test's namespace, admin client and reconciler.
type env struct {
	*controllertest.Env
	r *Reconciler
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
	base := controllertest.New(t, controllertest.Options{PodLag: opts.podLag})
	r := New(base.Manager)
	e := &env{Env: base, r: r}
	e.view = &podView{Client: r.Client}
	r.Client = e.view
	if opts.wrapClient != nil {
		r.Client = opts.wrapClient(r.Client)
	}
	if opts.liveReadsAsOperator {
		var err error
		if e.liveReader, err = controllertest.APIServer(t).NewOperatorUser(e.Ctx, "echelon-"+e.NS); err != nil {
			t.Fatal(err)
		}
		if r.apiReader, err = client.New(e.liveReader.Config, client.Options{Scheme: controllertest.Scheme()}); err != nil {
			t.Fatal(err)
		}
		r.tlsObjects = r.apiReader
	}
	e.liveReads = &countingReader{Reader: r.apiReader}
	r.apiReader = e.liveReads
	if opts.eventDriven {
		if err := r.SetupWithManager(base.Manager); err != nil {
			t.Fatal(err)
		}
	}
	e.Start()
	return e
}

func (e *env) reconcile(group string) ctrl.Result {
	e.T.Helper()
	res, err := e.r.Reconcile(e.Ctx, reconcileRequest(e, group))
	if err != nil {
		e.T.Fatalf("Reconcile: %v", err)
	}
	return res
}

func reconcileRequest(e *env, group string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.NS, Name: group}}
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

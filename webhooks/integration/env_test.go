package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers"
	"github.com/echelon-operator/echelon/internal/egress/egresstest"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/webhooks"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// webhookManifests are the generated webhook configurations, relative to the
// repository root.
const webhookManifests = "config/webhook/manifests.yaml"

// testNamespaceLabel selects the namespaces the test's webhook configurations
// apply to: the API server sends the webhooks nothing from other namespaces.
const testNamespaceLabel = "echelon.dev/webhooks-test"

var (
	sharedOnce sync.Once
	shared     *env
	sharedErr  error
)

// TestMain stops the control plane the tests share, if one started.
func TestMain(m *testing.M) {
	// The fake pods listen on loopback, which the egress guard refuses by
	// default.
	egresstest.AllowLoopback()
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// env is the control plane, the operator's manager serving the webhooks as
// the operator's user, and the clients of the admin and of that user.
type env struct {
	cp       *controlplane.ControlPlane
	admin    client.Client
	operator client.Client
	// cache is the operator's view, which the webhooks judge on;
	// informers is the cache itself, for what needs its informers.
	cache     client.Reader
	informers cache.Cache
	identity  webhooks.Identity
	stop      func()
}

// setup starts what the tests share, once per test binary.
func setup(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		if errors.Is(sharedErr, controlplane.ErrAssetsMissing) && os.Getenv(controlplane.SkipEnv) == "1" {
			t.Skipf("skipping: %v", sharedErr)
		}
		t.Fatalf("%v", sharedErr)
	}
	return shared
}

func start() (*env, error) {
	// The manager's logs are not shown; without a logger, controller-runtime
	// prints a warning with a stack once a controller's queue logs.
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	cp, err := controlplane.Start(ctx, controlplane.Options{APIServerOnly: true, CRDDirs: []string{controlplane.CRDBasesDir}, Scheme: operator.NewScheme()})
	if err != nil {
		cancel()
		return nil, err
	}
	e := &env{cp: cp, admin: cp.Client()}
	var stopManager func()
	e.stop = func() {
		if stopManager != nil {
			stopManager()
		}
		cancel()
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}
	fail := func(err error) (*env, error) {
		e.stop()
		return nil, err
	}
	user, err := cp.NewOperatorUser(ctx, "echelon-webhooks")
	if err != nil {
		return fail(err)
	}
	if e.operator, err = client.New(user.Config, client.Options{Scheme: operator.NewScheme()}); err != nil {
		return fail(err)
	}
	mgr, err := ctrl.NewManager(user.Config, ctrl.Options{
		Scheme:                 operator.NewScheme(),
		Cache:                  lookup.CacheOptions(nil),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fail(err)
	}
	e.cache = mgr.GetClient()
	e.informers = mgr.GetCache()
	if err := controllers.Setup(mgr, podcall.Addressing{PodAddressIP: true}, nil); err != nil {
		return fail(err)
	}
	if err := lookup.WarmCaches(ctx, mgr.GetCache()); err != nil {
		return fail(err)
	}
	if e.identity, err = webhooks.LearnIdentity(ctx, mgr.GetClient()); err != nil {
		return fail(err)
	}
	if e.identity.Username != user.Name {
		return fail(fmt.Errorf("the operator learned it is %q, want %q", e.identity.Username, user.Name))
	}
	cert, err := webhookstest.NewCertificate()
	if err != nil {
		return fail(err)
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	health, err := webhooks.Setup(mgr, webhooks.Config{Host: "127.0.0.1", Port: port, Certificates: cert,
		Identity: e.identity, Addressing: podcall.Addressing{PodAddressIP: true}, KubeAPIQPS: 1000, KubeAPIBurst: 2000})
	if err != nil {
		return fail(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	stopManager = func() {
		stopMgr()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fail(errors.New("caches did not sync"))
	}
	var healthErr error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		healthErr = health(nil)
		return healthErr == nil, nil
	}); err != nil {
		return fail(fmt.Errorf("webhook server not healthy: %w", errors.Join(err, healthErr)))
	}
	if err := e.installWebhookConfigurations(ctx, fmt.Sprintf("https://127.0.0.1:%d", port), cert.CAPEM); err != nil {
		return fail(err)
	}
	return e, nil
}

// installWebhookConfigurations applies the generated configurations with
// their clientConfig pointing at base by URL, trusting caPEM, for the test
// namespaces only.
func (e *env) installWebhookConfigurations(ctx context.Context, base string, caPEM []byte) error {
	data, err := os.ReadFile(filepath.Join(repoRoot(), webhookManifests))
	if err != nil {
		return err
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{testNamespaceLabel: "true"}}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		cc.URL = ptr.To(base + ptr.Deref(cc.Service.Path, ""))
		cc.Service = nil
		cc.CABundle = caPEM
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	installed := 0
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("read %s: %w", webhookManifests, err)
		}
		if len(raw.Raw) == 0 {
			continue
		}
		obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if err != nil {
			return fmt.Errorf("decode %s: %w", webhookManifests, err)
		}
		switch c := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			c.Name = "echelon-webhooks-test"
			for i := range c.Webhooks {
				point(&c.Webhooks[i].ClientConfig)
				c.Webhooks[i].NamespaceSelector = selector
				// A call that fails must fail the test, not pass unjudged.
				c.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			c.Name = "echelon-webhooks-test"
			for i := range c.Webhooks {
				point(&c.Webhooks[i].ClientConfig)
				c.Webhooks[i].NamespaceSelector = selector
			}
		default:
			return fmt.Errorf("%s holds a %T", webhookManifests, obj)
		}
		if err := e.admin.Create(ctx, obj.(client.Object)); err != nil {
			return fmt.Errorf("create webhook configuration: %w", err)
		}
		installed++
	}
	if installed != 2 {
		return fmt.Errorf("%s holds %d configurations, want a validating and a mutating one", webhookManifests, installed)
	}
	return nil
}

// begin starts a test: the shared set-up, a Gomega, and a fresh namespace
// whose writes the webhooks judge.
func begin(t *testing.T) (*env, *WithT, string) {
	e := setup(t)
	ns := e.namespace(t)
	e.waitForWebhooks(t, ns)
	return e, NewWithT(t), ns
}

// namespace is a fresh namespace the webhooks apply to. The API server reads
// webhook configurations through an informer; the first write to be judged
// is awaited here, so that no test races it.
func (e *env) namespace(t *testing.T) string {
	t.Helper()
	ns := e.cp.NewNamespace(t)
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, testNamespaceLabel))
	if err := e.admin.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, patch); err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitForWebhooks returns once a write in ns is judged by the webhooks: a
// ScalingPolicy naming a target already claimed is refused.
func (e *env) waitForWebhooks(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	first := builders.MakeScalingPolicy(ns, "probe-1").Target(v1alpha1.TargetKindStatefulSet, "probe").Obj()
	if err := e.admin.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() error {
		second := builders.MakeScalingPolicy(ns, "probe-2").Target(v1alpha1.TargetKindStatefulSet, "probe").Obj()
		err := e.admin.Create(ctx, second)
		if err == nil {
			_ = e.admin.Delete(ctx, second)
			return errors.New("not judged yet")
		}
		if !strings.Contains(err.Error(), "validate.echelon.dev") {
			return err
		}
		return nil
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	if err := e.admin.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
}

// waitForCache returns once the operator's cache holds the spec of objs as
// it is now (their status may have moved on).
func (e *env) waitForCache(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		NewWithT(t).Eventually(func() (int64, error) {
			cached := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
			err := e.cache.Get(context.Background(), client.ObjectKeyFromObject(obj), cached)
			return cached.GetGeneration(), err
		}, 10*time.Second, 20*time.Millisecond).Should(BeNumerically(">=", obj.GetGeneration()))
	}
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels),
		},
	}
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}}},
	}
}

// preparingStatefulSet creates the StatefulSet ingester of 5 Running pods,
// served by a PodServer on loopback net net8, and its ScalingPolicy
// ingester-scaling that prepares its downscales, and waits until the
// operator's cache holds them.
func (e *env) preparingStatefulSet(t *testing.T, ns string, net8 int) (*appsv1.StatefulSet, *v1alpha1.ScalingPolicy, *webhookstest.PodServer) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pods := webhookstest.NewPodServer(t, net8, "ingester", 0, 1, 2, 3, 4)
	sts := builders.MakeStatefulSet(ns, "ingester").Label("app", "ingester").Replicas(5).Obj()
	prep := builders.MakeScalingPolicy(ns, "ingester-scaling").Target(v1alpha1.TargetKindStatefulSet, sts.Name).Prepare("/ingester/prepare-shutdown", pods.Port, 2*time.Second).Obj()
	g.Expect(e.admin.Create(ctx, sts)).To(Succeed())
	e.createServedPods(t, sts, pods)
	g.Expect(e.admin.Create(ctx, prep)).To(Succeed())
	e.waitForCache(t, prep, sts)
	g.Eventually(func() (int, error) {
		var list corev1.PodList
		err := e.cache.List(ctx, &list, client.InNamespace(ns))
		return len(list.Items), err
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(5))
	return sts, prep, pods
}

// createServedPods creates the pods of sts that pods serves, each Running
// on the IP it answers on.
func (e *env) createServedPods(t *testing.T, sts *appsv1.StatefulSet, pods *webhookstest.PodServer) {
	t.Helper()
	for name, ip := range pods.IPs() {
		ord, ok := podname.Ordinal(sts.Name, name)
		if !ok {
			t.Fatalf("pod %s is not of StatefulSet %s", name, sts.Name)
		}
		e.createPod(t, builders.MakePod(sts.Namespace, sts.Name, ord).FromTemplate(sts.Spec.Template).IP(ip).Obj())
	}
}

// createPod creates pod and then writes its status as built, as a kubelet
// would report it: the API server drops the status of a create.
func (e *env) createPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	status := pod.Status
	if err := e.admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = status
	if err := e.admin.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("no go.mod above " + dir)
		}
		dir = parent
	}
}

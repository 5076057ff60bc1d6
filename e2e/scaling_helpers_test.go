package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The test kinds with and without a scale subresource (testdata/scale-source-crds.yaml)
// and the ClusterRole a user grants the operator to follow them.
const (
	scaleSourceCRDs = "e2e/testdata/scale-source-crds.yaml"
	scaleSourceRBAC = "e2e/testdata/scale-source-rbac.yaml"
	scaleSourceAPI  = "scaling.e2e.echelon.dev/v1"
)

var (
	replicaTemplateKind   = schema.GroupVersionKind{Group: "scaling.e2e.echelon.dev", Version: "v1", Kind: "ReplicaTemplate"}
	scalelessTemplateKind = schema.GroupVersionKind{Group: "scaling.e2e.echelon.dev", Version: "v1", Kind: "ScalelessTemplate"}
)

// createPolicy creates a ScalingPolicy named after its target, with its spec
// edited by mutate.
func createPolicy(ctx context.Context, ns, target string, mutate func(*v1alpha1.ScalingPolicySpec)) *v1alpha1.ScalingPolicy {
	GinkgoHelper()
	sp := builders.MakeScalingPolicy(ns, target).Target("", target).Obj()
	if mutate != nil {
		mutate(&sp.Spec)
	}
	Expect(k8s.Create(ctx, sp)).To(Succeed())
	return sp
}

// followLeader makes a policy follow leader's spec.replicas, downscaling no
// sooner than delay after another zone of the target's RolloutGroup.
func followLeader(leader string, delay time.Duration) func(*v1alpha1.ScalingPolicySpec) {
	return func(s *v1alpha1.ScalingPolicySpec) {
		s.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: leader}}
		if delay > 0 {
			s.MinTimeBetweenZoneDownscales = &metav1.Duration{Duration: delay}
		}
	}
}

// followingZones is a three-zone group of replicas pods each whose zone-b and
// zone-c follow zone-a with the zone delay, and a recorder of their replicas.
func followingZones(ctx context.Context, replicas int32, delay time.Duration) (*zoneGroup, *replicasRecorder) {
	GinkgoHelper()
	g := newZoneGroup(ctx, replicas, nil)
	rec := recordReplicas(ctx, g.ns)
	for _, z := range []string{zoneB, zoneC} {
		createPolicy(ctx, g.ns, z, followLeader(zoneA, delay))
	}
	return g, rec
}

// selfScaled makes a policy its own source, at replicas.
func selfScaled(replicas int32) func(*v1alpha1.ScalingPolicySpec) {
	return func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = &replicas }
}

// only is the group narrowed to some zones, e.g. to wait for the pods of the
// zones a spec changed.
func (g *zoneGroup) only(zones ...string) *zoneGroup {
	narrowed := *g
	narrowed.zones = zones
	return &narrowed
}

// waitPolicy waits until the policy has acted on its current generation and
// reports phase with reason on its Ready condition, and returns it.
func waitPolicy(ctx context.Context, ns, name string, phase v1alpha1.ScalingPhase, reason string, timeout time.Duration) *v1alpha1.ScalingPolicy {
	GinkgoHelper()
	var sp *v1alpha1.ScalingPolicy
	Eventually(func(gm Gomega) {
		sp = &v1alpha1.ScalingPolicy{}
		gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sp)).To(Succeed())
		gm.Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation), "policy %s", name)
		gm.Expect(sp.Status.Phase).To(Equal(phase), "policy %s: %s", name, sp.Status.Message)
		c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
		gm.Expect(c).NotTo(BeNil(), "policy %s has a Ready condition", name)
		gm.Expect(c.Reason).To(Equal(reason), "policy %s: %s", name, sp.Status.Message)
		gm.Expect(c.ObservedGeneration).To(Equal(sp.Generation))
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	return sp
}

// waitStable waits until each policy reports its target at the desired replicas.
func waitStable(ctx context.Context, ns string, names ...string) {
	GinkgoHelper()
	for _, name := range names {
		waitPolicy(ctx, ns, name, v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonAtDesiredReplicas, time.Minute)
	}
}

// patchPolicy merge-patches a policy.
func patchPolicy(ctx context.Context, ns, name, patch string) {
	GinkgoHelper()
	sp := &v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(k8s.Patch(ctx, sp, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

func getStatefulSet(ctx context.Context, ns, name string) *appsv1.StatefulSet {
	GinkgoHelper()
	sts := &appsv1.StatefulSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	return sts
}

// waitReplicas waits until the StatefulSet's spec.replicas is n.
func waitReplicas(ctx context.Context, ns, name string, n int32, timeout time.Duration) {
	GinkgoHelper()
	Eventually(func() int32 { return *getStatefulSet(ctx, ns, name).Spec.Replicas }).
		WithContext(ctx).WithTimeout(timeout).Should(Equal(n), "spec.replicas of %s", name)
}

// policyEvents lists the Events recorded on a policy, as "<type> <reason>: <message>".
func policyEvents(ctx context.Context, ns, name string) []string {
	GinkgoHelper()
	var out []string
	for _, e := range settledEvents(ctx, ns, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "ScalingPolicy" && e.InvolvedObject.Name == name
	}) {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return out
}

// replicasChange is a change of a StatefulSet's spec.replicas, as a watch
// delivered it, with the time it arrived.
type replicasChange struct {
	At          time.Time
	StatefulSet string
	From, To    int32
}

// replicasRecorder watches the StatefulSets of a namespace and records every
// change of their spec.replicas when it arrives: the timing of scales as the
// StatefulSets themselves saw them, not as a policy's status reports them.
type replicasRecorder struct {
	mu      sync.Mutex
	last    map[string]int32
	changes []replicasChange
}

// recordReplicas starts a replicasRecorder on ns and stops it when the spec ends.
func recordReplicas(ctx context.Context, ns string) *replicasRecorder {
	GinkgoHelper()
	r := &replicasRecorder{last: map[string]int32{}}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().StatefulSets().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.observe(o, time.Now()) },
		UpdateFunc: func(_, o any) { r.observe(o, time.Now()) },
	})
	Expect(err).NotTo(HaveOccurred())
	factory.Start(ctx.Done())
	DeferCleanup(func() {
		cancel()
		factory.Shutdown()
	})
	Expect(cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)).To(BeTrue())
	return r
}

func (r *replicasRecorder) observe(o any, at time.Time) {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return
	}
	n := int32(1)
	if sts.Spec.Replicas != nil {
		n = *sts.Spec.Replicas
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, seen := r.last[sts.Name]; seen && last != n {
		r.changes = append(r.changes, replicasChange{At: at, StatefulSet: sts.Name, From: last, To: n})
	}
	r.last[sts.Name] = n
}

// of returns the recorded changes of one StatefulSet, oldest first.
func (r *replicasRecorder) of(name string) []replicasChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []replicasChange
	for _, c := range r.changes {
		if c.StatefulSet == name {
			out = append(out, c)
		}
	}
	return out
}

// waitChange waits until the StatefulSet's spec.replicas has changed to n and
// returns the first such change.
func (r *replicasRecorder) waitChange(ctx context.Context, name string, n int32, timeout time.Duration) replicasChange {
	GinkgoHelper()
	var found replicasChange
	Eventually(func() bool {
		for _, c := range r.of(name) {
			if c.To == n {
				found = c
				return true
			}
		}
		return false
	}).WithContext(ctx).WithTimeout(timeout).Should(BeTrue(), "%s scaled to %d; changes seen: %v", name, n, r.of(name))
	return found
}

// installScaleSources installs the test kinds (idempotently: parallel specs
// may both do it), waits until the API server serves them, and binds the
// operator user to the ClusterRole a user grants for them.
func installScaleSources(ctx context.Context) {
	GinkgoHelper()
	root, err := controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, scaleSourceCRDs))
	Expect(err).NotTo(HaveOccurred())
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		crd := &unstructured.Unstructured{}
		if err := decoder.Decode(&crd.Object); errors.Is(err, io.EOF) {
			break
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		if err := k8s.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred(), "create CRD %s", crd.GetName())
		}
	}
	for _, gvk := range []schema.GroupVersionKind{replicaTemplateKind, scalelessTemplateKind} {
		Eventually(func() error {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			return k8s.List(ctx, list, client.InNamespace("default"))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the API server serves %s", gvk.Kind)
	}
	Expect(cp.BindRBAC(ctx, operatorUser.Name, scaleSourceRBAC)).To(Succeed())
}

// createSource creates an object of a test kind with spec.replicas.
func createSource(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, replicas int64) *unstructured.Unstructured {
	GinkgoHelper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ns)
	obj.SetName(name)
	Expect(unstructured.SetNestedField(obj.Object, replicas, "spec", "replicas")).To(Succeed())
	Expect(k8s.Create(ctx, obj)).To(Succeed())
	return obj
}

// getSource reads an object of a test kind.
func getSource(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	GinkgoHelper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)).To(Succeed())
	return obj
}

// kubectl runs the control plane's kubectl as the administrator and returns
// its output.
func kubectl(ctx context.Context, args ...string) string {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, cp.Assets().Kubectl, append([]string{"--kubeconfig=" + cp.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The specs that drain nodes run beside others on one control plane, so they
// never drain the shared fake nodes: each gets its own, which only its pods
// may use (a taint they alone tolerate) and which only they are pinned to (a
// node selector per zone).
const (
	// nodePoolLabel names a spec's zone on its nodes and in its pods'
	// nodeSelector: <namespace>-<zone>.
	nodePoolLabel = "e2e.echelon.dev/pool"
	// specTaintKey keeps other specs' pods off a spec's nodes.
	specTaintKey = "e2e.echelon.dev/spec"
)

// specNodes are the fake nodes of one spec: per zone, one node the zone's
// pods start on and spares, cordoned until the spec opens them, where the
// pods a drain evicts come back.
type specNodes struct {
	ns string
	// byZone lists each zone's nodes, the first one the pods start on.
	byZone map[string][]string
}

// newSpecNodes creates perZone kwok nodes for each zone (StatefulSet) and
// waits until kwok has made them Ready. When the spec ends it deletes the
// namespace's StatefulSets, waits for their pods to go (kwok finishes a pod's
// deletion only while its node exists), then the nodes. Call it before
// starting the operator, so that this runs after the operator has stopped.
func newSpecNodes(ctx context.Context, ns string, zones []string, perZone int) *specNodes {
	GinkgoHelper()
	n := &specNodes{ns: ns, byZone: map[string][]string{}}
	var all []string
	for zi, zone := range zones {
		for i := range perZone {
			name := fmt.Sprintf("%s-%c%d", ns, 'a'+zi, i)
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Annotations: map[string]string{controlplane.FakeNodeAnnotation: "fake"},
					Labels: map[string]string{
						corev1.LabelHostname:     name,
						corev1.LabelOSStable:     "linux",
						corev1.LabelArchStable:   "amd64",
						corev1.LabelTopologyZone: fmt.Sprintf("zone-%c", 'a'+zi),
						nodePoolLabel:            n.pool(zone),
						"type":                   "kwok",
					},
				},
				Spec: corev1.NodeSpec{
					Unschedulable: i > 0,
					Taints:        []corev1.Taint{{Key: specTaintKey, Value: ns, Effect: corev1.TaintEffectNoSchedule}},
				},
			}
			Expect(k8s.Create(ctx, node)).To(Succeed())
			n.byZone[zone] = append(n.byZone[zone], name)
			all = append(all, name)
		}
	}
	DeferCleanup(n.remove, all)
	Eventually(func(gm Gomega) {
		for _, name := range all {
			node := &corev1.Node{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
			gm.Expect(nodeReady(node)).To(BeTrue(), "kwok made node %s Ready", node.Name)
			for _, t := range node.Spec.Taints {
				gm.Expect(t.Key).NotTo(Equal(corev1.TaintNodeNotReady), "node %s still tainted not-ready", node.Name)
			}
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return n
}

// pool is the node-pool label value of zone.
func (n *specNodes) pool(zone string) string { return n.ns + "-" + zone }

// first is the node zone's pods start on.
func (n *specNodes) first(zone string) string { return n.byZone[zone][0] }

// pin makes a zone's StatefulSet run on the zone's nodes only; pass it to
// createStatefulSets.
func (n *specNodes) pin(sts *appsv1.StatefulSet) {
	if _, ok := n.byZone[sts.Name]; !ok {
		return
	}
	spec := &sts.Spec.Template.Spec
	spec.NodeSelector = map[string]string{nodePoolLabel: n.pool(sts.Name)}
	spec.Tolerations = append(spec.Tolerations,
		corev1.Toleration{Key: specTaintKey, Operator: corev1.TolerationOpEqual, Value: n.ns, Effect: corev1.TaintEffectNoSchedule})
}

// openSpares uncordons every zone's spare nodes, where the pods a drain
// evicts come back.
func (n *specNodes) openSpares(ctx context.Context) {
	GinkgoHelper()
	for _, nodes := range n.byZone {
		for _, name := range nodes[1:] {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			Expect(k8s.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`)))).To(Succeed())
		}
	}
}

// podsOn lists the names of the namespace's pods bound to node.
func (n *specNodes) podsOn(ctx context.Context, node string) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(n.ns))).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			out = append(out, p.Name)
		}
	}
	return out
}

// remove deletes the spec's StatefulSets, waits for their pods to go, and
// deletes the nodes. It runs at the end of the spec.
func (n *specNodes) remove(ctx SpecContext, nodes []string) {
	var sets appsv1.StatefulSetList
	if err := k8s.List(ctx, &sets, client.InNamespace(n.ns)); err == nil {
		for i := range sets.Items {
			_ = k8s.Delete(ctx, &sets.Items[i])
		}
	}
	// Bounded: a pod left over is garbage-collected with its node, and a
	// slow cleanup must not fail the spec.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(n.ns)); err != nil || len(pods.Items) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range nodes {
		if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreNotFound(err) != nil {
			fmt.Fprintf(GinkgoWriter, "delete node %s: %v\n", name, err)
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// drain is a `kubectl drain` running in the background (framework.Drain),
// killed when the spec ends.
type drain struct {
	*framework.Drain
	node string
}

// startDrain starts `kubectl drain node` with the flags a drain of a
// StatefulSet node needs and a timeout; it is killed when the spec ends.
func startDrain(ctx context.Context, node string, timeout time.Duration) *drain {
	GinkgoHelper()
	d, err := framework.StartDrain(ctx, cp.Assets().Kubectl, cp.Kubeconfig(), node, timeout)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(d.Kill)
	return &drain{Drain: d, node: node}
}

// startDrains starts a drain of each node at the same moment.
func startDrains(ctx context.Context, timeout time.Duration, nodes ...string) []*drain {
	GinkgoHelper()
	out := make([]*drain, len(nodes))
	for i, node := range nodes {
		out[i] = startDrain(ctx, node, timeout)
	}
	return out
}

// output is what the drain printed so far.
func (d *drain) output() string { return d.Output() }

// wait waits until kubectl exits and expects it to have drained the node;
// it returns how long the drain took.
func (d *drain) wait(ctx context.Context, timeout time.Duration) time.Duration {
	GinkgoHelper()
	took, err := d.Wait(ctx, timeout)
	if err != nil {
		Fail(err.Error())
	}
	return took
}

// refusals returns the lines in which kubectl reports an eviction refused
// with 429 and retried: "error when evicting pods/... (will retry after 5s): ...".
func (d *drain) refusals() []string { return d.Refusals() }

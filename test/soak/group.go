package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	// versionAnnotation is the template annotation each release changes.
	versionAnnotation = "echelon.dev/soak-version"
	groupName         = "soak"
	// crashLoopDeadline is the progressDeadline of a CrashLoopRollback
	// script: how long the crash loop holds the rollout before the operator
	// rolls it back.
	crashLoopDeadline = "5s"
	// pollInterval paces the waits on the API server.
	pollInterval = 200 * time.Millisecond
	// minReadySeconds paces the rollouts, so that steps land mid-rollout.
	minReadySeconds = 1
)

var kwokToleration = corev1.Toleration{Key: controlplane.FakeNodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// group is one namespace with three zones (OnDelete, or in every other
// group RollingUpdate zones whose partitions the group holds) and a
// RolloutGroup over them, and what the soak knows of it: the version its
// pods run (stable),
// the last version released, each zone's replicas.
type group struct {
	c        client.Client
	ns       string
	zones    []string
	replicas map[string]int32
	stable   string
	released int
	mon      *framework.Monitor
	promAddr string
	// ev evicts the group's pods for Evict steps; nil without evictions.
	ev *evictions
	// rolledBack is when the group's last rollback started, so that a
	// rollback that ended before a release is not taken for its outcome.
	rolledBack metav1.Time
}

func newGroup(ctx context.Context, cp *controlplane.ControlPlane, c client.Client, index int, replicas int32) (*group, error) {
	ns, err := cp.CreateNamespace(ctx, fmt.Sprintf("soak-%d", index))
	if err != nil {
		return nil, err
	}
	g := &group{c: c, ns: ns, replicas: map[string]int32{}, stable: "v0"}
	for _, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		name := "ingester-" + zone
		g.zones = append(g.zones, name)
		g.replicas[name] = replicas
		b := builders.MakeStatefulSet(ns, name).Replicas(replicas).OnDelete().Parallel().
			TemplateAnnotation(versionAnnotation, g.stable).Image("example.com/ingester:1.0").Toleration(kwokToleration)
		if index%2 == 1 {
			// Every other group rolls RollingUpdate members by their
			// partitions: the soak's flips and reverts then land between
			// and inside their batches, as a helm upgrade would.
			b.RollingUpdate().Partition(replicas)
		}
		sts := b.Obj()
		if err := c.Create(ctx, sts); err != nil {
			return nil, fmt.Errorf("create StatefulSet %s/%s: %w", ns, name, err)
		}
	}
	return g, nil
}

func (g *group) createRolloutGroup(ctx context.Context) error {
	rg := builders.MakeRolloutGroup(g.ns, groupName).Members(g.zones...).MaxUnavailable(1).MinReadySeconds(minReadySeconds).Obj()
	return g.c.Create(ctx, rg)
}

// waitSettled waits until every pod runs the stable version, Ready.
func (g *group) waitSettled(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() error { return g.podsOn(ctx, g.stable) })
}

func (g *group) podsOn(ctx context.Context, version string) error {
	var errs []error
	for _, z := range g.zones {
		var pods corev1.PodList
		if err := g.c.List(ctx, &pods, client.InNamespace(g.ns), client.MatchingLabels{"app": z}); err != nil {
			return err
		}
		errs = append(errs, podsOn(pods.Items, z, g.replicas[z], version))
	}
	return errors.Join(errs...)
}

func (g *group) get(ctx context.Context) (*v1alpha1.RolloutGroup, error) {
	rg := &v1alpha1.RolloutGroup{}
	return rg, g.c.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: groupName}, rg)
}

// phaseIs checks that the group reports phase for its current spec and for
// the StatefulSets' current update revisions, so that a phase left over from
// before a template change does not count.
func (g *group) phaseIs(ctx context.Context, phase v1alpha1.RolloutPhase) error {
	rg, err := g.get(ctx)
	if err != nil {
		return err
	}
	if rg.Status.ObservedGeneration != rg.Generation || rg.Status.Phase != phase {
		return fmt.Errorf("phase %s (generation %d observed %d), want %s: %s", rg.Status.Phase, rg.Generation, rg.Status.ObservedGeneration, phase, rg.Status.Message)
	}
	for _, m := range rg.Status.StatefulSets {
		sts := &appsv1.StatefulSet{}
		if err := g.c.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: m.Name}, sts); err != nil {
			return err
		}
		if sts.Status.ObservedGeneration != sts.Generation || m.UpdateRevision != sts.Status.UpdateRevision {
			return fmt.Errorf("%s: status for revision %s, StatefulSet on %s", m.Name, m.UpdateRevision, sts.Status.UpdateRevision)
		}
	}
	return nil
}

func (g *group) waitComplete(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() error { return g.phaseIs(ctx, v1alpha1.PhaseComplete) })
}

// patchTemplates merge-patches the pod template annotations of every zone.
func (g *group) patchTemplates(ctx context.Context, version string, crashLoop bool) error {
	crash := "null"
	if crashLoop {
		crash = `"true"`
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q,%q:%s}}}}}`,
		versionAnnotation, version, controlplane.CrashLoopAnnotation, crash)
	for _, z := range g.zones {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: z}}
		if err := g.c.Patch(ctx, sts, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return fmt.Errorf("patch the template of %s: %w", z, err)
		}
	}
	return nil
}

// patchSpec merge-patches the RolloutGroup's spec.
func (g *group) patchSpec(ctx context.Context, spec string) error {
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: groupName}}
	return g.c.Patch(ctx, rg, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`)))
}

// scale sets a zone's replicas, within 1 and 8, and tells the monitor from
// which moment of its watch on: pod events from before the write (an
// eviction admitted just before) are judged with the replicas of their time.
func (g *group) scale(ctx context.Context, zone string, delta int) error {
	n := min(8, max(1, g.replicas[zone]+int32(delta)))
	g.replicas[zone] = n
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: zone}}
	if err := g.c.Patch(ctx, sts, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))); err != nil {
		return err
	}
	g.mon.SetReplicasAt(zone, int(n), sts.ResourceVersion)
	return nil
}

// crashLooping reports whether a pod of the group is crash-looping: the bad
// release holds the rollout.
func (g *group) crashLooping(ctx context.Context) (bool, error) {
	var pods corev1.PodList
	if err := g.c.List(ctx, &pods, client.InNamespace(g.ns)); err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		if _, bad := p.Annotations[controlplane.CrashLoopAnnotation]; bad && p.DeletionTimestamp == nil &&
			p.Status.Phase == corev1.PodRunning && !podReady(&p) {
			return true, nil
		}
	}
	return false, nil
}

// poll calls check until it returns nil, and returns its last error when
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

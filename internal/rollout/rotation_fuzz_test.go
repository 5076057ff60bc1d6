package rollout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
)

// FuzzDecideRotation builds random groups as FuzzDecide does, then asks for
// restarts (spec.restartAt in the past or the future, pods of random ages,
// pods annotated echelon.dev/rotate), and checks every plan that deletes a
// pod that needs no new revision against the guarantees of a rollout, with
// the oracle's own reading of the pods: one member, every other member
// whole, at most maxUnavailable not available, nothing while paused, held,
// unsettled, blocked, within batchInterval or refused by the budget, and
// nothing while any pod of the group still needs a new revision. Where
// nothing holds the group back, the first member with pods to restart gets
// its batch.
func FuzzDecideRotation(f *testing.F) {
	f.Add([]byte{})
	// Few random groups are whole with every pod on its update revision, the
	// state a rotation needs: many seeds give the oracle enough batches.
	fuzzinput.AddRandomSeeds(f, 3, 4, 4000, 16, 200)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		g := generateGroup(b)
		r := addRotation(b, &g)
		plan := Decide(g.in)
		if err := g.checkRotation(r, plan); err != nil {
			t.Fatalf("%v\n%s\nrotation: restartAt=%v templated=%v\nplan: current=%q rotation=%v complete=%v blocked=%+v delete=%v reason=%s message=%q",
				err, g.describe(), r.restartAt, sets.List(r.templated), plan.Current, plan.Rotation, plan.Complete, plan.Blocked,
				podNames(plan.Delete), plan.Reason, plan.Message)
		}
	})
}

// fuzzRotation is what addRotation asked for, for the oracle.
type fuzzRotation struct {
	restartAt time.Time
	// templated are the members whose pod template carries echelon.dev/rotate.
	templated sets.Set[string]
}

// addRotation draws the rotation: most groups have every pod on the update
// revision (so that a rotation can run), spec.restartAt is unset, past or to
// come, pods are created before or after it, and some are annotated.
func addRotation(b *fuzzinput.Bytes, g *fuzzGroup) fuzzRotation {
	r := fuzzRotation{templated: sets.New[string]()}
	r.restartAt = []time.Time{{}, testNow.Add(-time.Minute), testNow.Add(-time.Minute), testNow.Add(time.Minute)}[b.Intn(4)]
	g.in.RestartAt = r.restartAt
	allUpdated := !b.Rare(4)
	for _, m := range g.in.Members {
		if m.StatefulSet != nil && !b.Rare(4) {
			m.StatefulSet.Status.CurrentRevision = m.StatefulSet.Status.UpdateRevision
		}
		if m.StatefulSet != nil && b.Rare(16) {
			m.StatefulSet.Spec.Template.Annotations = map[string]string{v1alpha1.AnnotationRotate: "x"}
			r.templated.Insert(m.Name)
		}
		for _, p := range m.Pods {
			if allUpdated && m.StatefulSet != nil && p.Labels != nil {
				p.Labels["controller-revision-hash"] = m.StatefulSet.Status.UpdateRevision
			}
			p.CreationTimestamp.Time = testNow.Add(-time.Duration(b.Intn(180)) * time.Second)
			if b.Rare(8) {
				p.Annotations = map[string]string{v1alpha1.AnnotationRotate: "node-1"}
			}
		}
	}
	return r
}

// restart reports whether the oracle finds that pod p of member must be restarted.
func (r fuzzRotation) restart(member string, p *corev1.Pod) bool {
	if _, ok := p.Annotations[v1alpha1.AnnotationRotate]; ok && !r.templated.Has(member) {
		return true
	}
	return !r.restartAt.IsZero() && !testNow.Before(r.restartAt) && p.CreationTimestamp.Time.Before(r.restartAt)
}

func (g fuzzGroup) checkRotation(r fuzzRotation, plan Plan) error {
	if reason := func() string { _, reason := g.firstBlocker(); return reason }(); reason != "" || !g.settled() {
		if plan.Rotation && len(plan.Delete) > 0 {
			return fmt.Errorf("blocked (%q) or unsettled group restarts %v", reason, podNames(plan.Delete))
		}
		return nil
	}
	views := make([]memberView, len(g.in.Members))
	for i := range views {
		views[i] = g.view(i)
	}
	// A pod of the group that still needs a new revision, terminating or not.
	outdated := false
	for i, v := range views {
		for _, p := range g.in.Members[i].Pods {
			if slices.ContainsFunc(v.wanted, func(o int) bool { return p.Name == fmt.Sprintf("%s-%d", v.name, o) }) && podRevision(p) != v.updateRev {
				outdated = true
			}
		}
	}
	toRestart := func(v memberView) []*corev1.Pod {
		var out []*corev1.Pod
		for _, o := range v.wanted {
			if p := v.live[o]; p != nil && r.restart(v.name, p) {
				out = append(out, p)
			}
		}
		return out
	}
	anyRestart := slices.ContainsFunc(views, func(v memberView) bool { return len(toRestart(v)) > 0 })
	disrupted := 0
	for _, v := range views {
		if g.disrupted(v) {
			disrupted++
		}
	}
	switch {
	case plan.Rotation && outdated:
		return fmt.Errorf("rotating while a pod of the group needs a new revision")
	case plan.Rotation && !anyRestart:
		return fmt.Errorf("rotating with no pod to restart")
	case !plan.Rotation && !outdated && anyRestart && disrupted <= 1:
		return fmt.Errorf("pods to restart and none needing a new revision, but no rotation")
	case !plan.Rotation:
		return nil
	}
	if plan.Complete {
		return fmt.Errorf("a rotation plan is Complete")
	}
	if len(plan.Delete) > 0 {
		if err := g.checkRotationBatch(r, plan, views); err != nil {
			return err
		}
	}

	// Progress: with nothing holding the group back, the first member in list
	// order with pods to restart gets min(its pods to restart, maxUnavailable).
	if disrupted > 0 {
		return nil
	}
	if g.in.Paused || g.in.Hold != nil || g.gateDue(views) != "" || g.batchWait() > 0 || g.in.RollingBack {
		if len(plan.Delete) > 0 {
			return fmt.Errorf("paused, held, gated, rolling back or within batchInterval, restarts %v", podNames(plan.Delete))
		}
		return nil
	}
	for i, v := range views {
		pods := toRestart(v)
		if len(pods) == 0 {
			continue
		}
		if plan.Current != v.name {
			return fmt.Errorf("Current = %q, want %s, the first member with pods to restart", plan.Current, v.name)
		}
		sts := g.in.Members[i].StatefulSet
		want := min(len(pods), v.maxUnav)
		var err error
		if stop, _ := g.intentsStop(v.name); (IsPartitioned(sts) && sts.Status.CurrentRevision != sts.Status.UpdateRevision) || stop {
			want = 0
		} else if want, err = g.budgetAllows(plan, v.name, want); err != nil {
			return err
		}
		if len(plan.Delete) != want {
			return fmt.Errorf("%s: restarts %v, want %d pods (maxUnavailable %d)", v.name, podNames(plan.Delete), want, v.maxUnav)
		}
		return nil
	}
	return nil
}

// checkRotationBatch checks a rotation's batch against the guarantees.
func (g fuzzGroup) checkRotationBatch(r fuzzRotation, plan Plan, views []memberView) error {
	switch {
	case g.in.Paused:
		return fmt.Errorf("paused group restarts %v", podNames(plan.Delete))
	case g.in.Hold != nil || g.gateDue(views) != "":
		return fmt.Errorf("held or gated group restarts %v", podNames(plan.Delete))
	case g.batchWait() > 0:
		return fmt.Errorf("restarts %v %v before batchInterval ends", podNames(plan.Delete), g.batchWait())
	case plan.CurrentPartitioned():
		return fmt.Errorf("a rotation's batch is released by a partition")
	}
	for _, c := range plan.PartitionChanges() {
		if c.Release {
			return fmt.Errorf("a rotation lowers a partition: %+v", c)
		}
	}
	if err := g.checkBudget(plan); err != nil {
		return err
	}
	i := slices.IndexFunc(views, func(v memberView) bool { return v.name == plan.Current })
	if i < 0 {
		return fmt.Errorf("restarts %v but Current %q is no member", podNames(plan.Delete), plan.Current)
	}
	cur := views[i]
	if sts := g.in.Members[i].StatefulSet; IsPartitioned(sts) && sts.Status.CurrentRevision != sts.Status.UpdateRevision {
		return fmt.Errorf("restarts %v of RollingUpdate %s whose currentRevision %q is not its update revision", podNames(plan.Delete), cur.name, sts.Status.CurrentRevision)
	}
	deleted := sets.New(plan.Delete...)
	if deleted.Len() != len(plan.Delete) {
		return fmt.Errorf("a pod is restarted twice: %v", podNames(plan.Delete))
	}
	for _, p := range plan.Delete {
		switch {
		case !cur.pods.Has(p):
			return fmt.Errorf("restarts %s, which is not a pod of Current %s", p.Name, cur.name)
		case g.terminating(p):
			return fmt.Errorf("restarts %s, which is already terminating", p.Name)
		case ordinalOf(cur.live, p) < 0:
			return fmt.Errorf("restarts %s, which is not a wanted ordinal", p.Name)
		case !r.restart(cur.name, p):
			return fmt.Errorf("restarts %s, which needs no restart (created %v, annotations %v)", p.Name, p.CreationTimestamp, p.Annotations)
		}
	}
	for _, v := range views {
		if v.name != cur.name && g.disrupted(v) {
			return fmt.Errorf("restarts pods of %s while %s uses availability", cur.name, v.name)
		}
	}
	before, after := g.unavailable(cur, nil)+cur.leaving, g.unavailable(cur, deleted)+cur.leaving
	if after > max(cur.maxUnav, before) {
		return fmt.Errorf("%s: %d unavailable or leaving after restarting (%d before), maxUnavailable %d", cur.name, after, before, cur.maxUnav)
	}
	return nil
}

package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/cli/render"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// view is what `get` reads and draws. --watch reads it again after every
// change its watches see, and draws it again as time passes.
type view interface {
	// read reads the object and what its drawing shows beside it.
	read(ctx context.Context, s *session) error
	draw(w io.Writer, now time.Time, st render.Style) error
	// object is the resource itself, for -o yaml and -o json.
	object() client.Object
	// watches are the lists whose changes change the drawing.
	watches() []watched
}

func newGetCommand(o *options) *cobra.Command {
	printFlags := genericclioptions.NewPrintFlags("").WithTypeSetter(scheme())
	var watch bool
	cmd := &cobra.Command{
		Use:   "get (rg|sp|dd) NAME",
		Short: "Show a RolloutGroup as a tree of members and pods, a ScalingPolicy or a DelayedDownscale",
		Example: `  kubectl echelon get rg ingester
  kubectl echelon get rg ingester --watch
  kubectl echelon get sp ingester-zone-b
  kubectl echelon get dd ingester-zone-a -o yaml`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: o.completeTarget,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, key, s, err := o.target(args)
			if err != nil {
				return err
			}
			v := newView(k, key)
			if err := v.read(cmd.Context(), s); err != nil {
				return err
			}
			if format := *printFlags.OutputFormat; format != "" {
				if watch {
					return fmt.Errorf("--watch draws the tree; it does not take -o %s", format)
				}
				p, err := printFlags.ToPrinter()
				if err != nil {
					return err
				}
				return p.PrintObj(v.object(), o.streams.Out)
			}
			if watch {
				return o.watch(cmd.Context(), s, v)
			}
			return v.draw(o.streams.Out, o.now(), o.style())
		},
	}
	printFlags.AddFlags(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Keep the view on screen and redraw it on every change (Ctrl-C ends it).")
	return cmd
}

func newView(k kind, key types.NamespacedName) view {
	switch k {
	case kindScalingPolicy:
		return &scalingPolicyView{key: key}
	case kindDelayedDownscale:
		return &delayedView{key: key}
	}
	return &rolloutGroupView{key: key}
}

// getObject reads one object, explaining a failure in one line.
func getObject(ctx context.Context, s *session, what string, key types.NamespacedName, obj client.Object) error {
	if err := s.client.Get(ctx, key, obj); err != nil {
		return explain(err, s.host, fmt.Sprintf("get %s %q in namespace %q", what, key.Name, key.Namespace))
	}
	return nil
}

// rolloutGroupView is a RolloutGroup with its members' StatefulSets and pods.
type rolloutGroupView struct {
	key  types.NamespacedName
	rg   *v1alpha1.RolloutGroup
	sets map[string]*appsv1.StatefulSet
	pods map[string][]*corev1.Pod
	// shared is the ZoneDisruptionBudget the group shares, when it exists.
	shared *v1alpha1.ZoneDisruptionBudget
}

func (v *rolloutGroupView) read(ctx context.Context, s *session) error {
	rg := &v1alpha1.RolloutGroup{}
	if err := getObject(ctx, s, "RolloutGroup", v.key, rg); err != nil {
		return err
	}
	sets := map[string]*appsv1.StatefulSet{}
	pods := map[string][]*corev1.Pod{}
	what := fmt.Sprintf("read the members of RolloutGroup %q in namespace %q", rg.Name, rg.Namespace)
	members, _, err := lookup.ResolveMembers(ctx, s.client, rg)
	if err != nil {
		return explain(err, s.host, what)
	}
	for _, m := range members {
		if m.StatefulSet == nil {
			continue
		}
		sets[m.Name] = m.StatefulSet
		if pods[m.Name], err = (lookup.ListedReads{}).PodsOf(ctx, s.client, m.StatefulSet); err != nil {
			return explain(err, s.host, what)
		}
	}
	v.shared = nil
	if rg.Spec.SharedDisruptionBudget != "" {
		zdb := &v1alpha1.ZoneDisruptionBudget{}
		err := s.client.Get(ctx, types.NamespacedName{Namespace: rg.Namespace, Name: rg.Spec.SharedDisruptionBudget}, zdb)
		switch {
		case err == nil:
			v.shared = zdb
		case !apierrors.IsNotFound(err):
			return explain(err, s.host, what)
		}
	}
	v.rg, v.sets, v.pods = rg, sets, pods
	return nil
}

func (v *rolloutGroupView) draw(w io.Writer, now time.Time, st render.Style) error {
	return render.RolloutGroup(w, render.RolloutGroupView{Group: v.rg, StatefulSets: v.sets, Pods: v.pods, Shared: v.shared, Now: now}, st)
}

func (v *rolloutGroupView) object() client.Object { return v.rg }

func (v *rolloutGroupView) watches() []watched {
	return []watched{
		{list: &v1alpha1.RolloutGroupList{}, opts: byName(v.key)},
		{list: &appsv1.StatefulSetList{}, opts: []client.ListOption{client.InNamespace(v.key.Namespace)}},
		{list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace(v.key.Namespace)}},
		{list: &v1alpha1.ZoneDisruptionBudgetList{}, opts: []client.ListOption{client.InNamespace(v.key.Namespace)}},
	}
}

// scalingPolicyView is a ScalingPolicy with its target StatefulSet.
type scalingPolicyView struct {
	key    types.NamespacedName
	sp     *v1alpha1.ScalingPolicy
	target *appsv1.StatefulSet
}

func (v *scalingPolicyView) read(ctx context.Context, s *session) error {
	sp := &v1alpha1.ScalingPolicy{}
	if err := getObject(ctx, s, "ScalingPolicy", v.key, sp); err != nil {
		return err
	}
	var target *appsv1.StatefulSet
	if sp.Spec.TargetRef.IsStatefulSet() {
		target = &appsv1.StatefulSet{}
		err := s.client.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.TargetRef.Name}, target)
		switch {
		case apierrors.IsNotFound(err):
			target = nil
		case err != nil:
			return explain(err, s.host, fmt.Sprintf("get the target StatefulSet %q of ScalingPolicy %q", sp.Spec.TargetRef.Name, sp.Name))
		}
	}
	v.sp, v.target = sp, target
	return nil
}

func (v *scalingPolicyView) draw(w io.Writer, now time.Time, st render.Style) error {
	return render.ScalingPolicy(w, render.ScalingPolicyView{Policy: v.sp, Target: v.target, Now: now}, st)
}

func (v *scalingPolicyView) object() client.Object { return v.sp }

func (v *scalingPolicyView) watches() []watched {
	return []watched{
		{list: &v1alpha1.ScalingPolicyList{}, opts: byName(v.key)},
		{list: &appsv1.StatefulSetList{}, opts: []client.ListOption{client.InNamespace(v.key.Namespace)}},
	}
}

// delayedView is a DelayedDownscale: its status holds all it shows.
type delayedView struct {
	key types.NamespacedName
	dd  *v1alpha1.DelayedDownscale
}

func (v *delayedView) read(ctx context.Context, s *session) error {
	dd := &v1alpha1.DelayedDownscale{}
	if err := getObject(ctx, s, "DelayedDownscale", v.key, dd); err != nil {
		return err
	}
	v.dd = dd
	return nil
}

func (v *delayedView) draw(w io.Writer, now time.Time, st render.Style) error {
	return render.DelayedDownscale(w, render.DelayedDownscaleView{Delayed: v.dd, Now: now}, st)
}

func (v *delayedView) object() client.Object { return v.dd }

func (v *delayedView) watches() []watched {
	return []watched{{list: &v1alpha1.DelayedDownscaleList{}, opts: byName(v.key)}}
}

// byName selects one object of a list by name, for a watch.
func byName(key types.NamespacedName) []client.ListOption {
	return []client.ListOption{client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name}}
}

package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// completeTarget completes `get` and `plan`: a kind first, then the names
// of that kind in the namespace.
func (o *options) completeTarget(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return []string{"rg", "sp", "dd"}, cobra.ShellCompDirectiveNoFileComp
	}
	k, ok := kindNames[strings.ToLower(args[0])]
	if !ok || len(args) > 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.names(cmd.Context(), k, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeGroup completes the controls' one argument: a RolloutGroup.
func (o *options) completeGroup(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.names(cmd.Context(), kindRolloutGroup, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// names lists the objects of kind k in the namespace whose names start with
// prefix; none when the cluster cannot be asked.
func (o *options) names(ctx context.Context, k kind, prefix string) []string {
	s, err := o.session()
	if err != nil {
		return nil
	}
	var list client.ObjectList
	switch k {
	case kindScalingPolicy:
		list = &v1alpha1.ScalingPolicyList{}
	case kindDelayedDownscale:
		list = &v1alpha1.DelayedDownscaleList{}
	default:
		list = &v1alpha1.RolloutGroupList{}
	}
	if err := s.client.List(ctx, list, client.InNamespace(s.namespace)); err != nil {
		return nil
	}
	var names []string
	switch l := list.(type) {
	case *v1alpha1.ScalingPolicyList:
		for _, i := range l.Items {
			names = append(names, i.Name)
		}
	case *v1alpha1.DelayedDownscaleList:
		for _, i := range l.Items {
			names = append(names, i.Name)
		}
	case *v1alpha1.RolloutGroupList:
		for _, i := range l.Items {
			names = append(names, i.Name)
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, prefix) })
	slices.Sort(names)
	return names
}

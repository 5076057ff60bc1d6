package budget

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// A budget shared by several groups lives in one ZoneDisruptionBudget: its
// status.disruption is the one record that every group naming it in
// spec.sharedDisruptionBudget, and every eviction of a pod it selects,
// decides on and writes with an optimistic lock. One write orders them all,
// as one group's record orders its rollouts, downscales and evictions; the
// view they decide on holds every participant's StatefulSets, each in the
// failure domain spec.zoneFrom gives it.

// SharedKey is the ZoneDisruptionBudget whose record rg's disruptions are
// recorded in, and whether there is one: spec.sharedDisruptionBudget.
func SharedKey(rg *v1alpha1.RolloutGroup) (types.NamespacedName, bool) {
	name := rg.Spec.SharedDisruptionBudget
	return types.NamespacedName{Namespace: rg.Namespace, Name: name}, name != ""
}

// NewZDB makes an empty ZoneDisruptionBudget, the holder of a shared record.
func NewZDB() *v1alpha1.ZoneDisruptionBudget { return &v1alpha1.ZoneDisruptionBudget{} }

// DomainFunc is the function giving a StatefulSet's failure domain as zdb's
// spec.zoneFrom says: "" when it finds none (the StatefulSet is a domain of
// its own). An invalid nameRegex is an error naming the field.
func DomainFunc(zdb *v1alpha1.ZoneDisruptionBudget) (func(*appsv1.StatefulSet) string, error) {
	from := zdb.Spec.ZoneFrom
	switch {
	case from == nil:
		return func(*appsv1.StatefulSet) string { return "" }, nil
	case from.Label != "":
		return func(sts *appsv1.StatefulSet) string { return sts.Labels[from.Label] }, nil
	}
	re, err := regexp.Compile(from.NameRegex)
	if err != nil {
		return nil, fmt.Errorf("spec.zoneFrom.nameRegex: %w", err)
	}
	return func(sts *appsv1.StatefulSet) string {
		m := re.FindStringSubmatch(sts.Name)
		switch {
		case len(m) > 1:
			return m[1]
		case len(m) == 1:
			return m[0]
		}
		return ""
	}, nil
}

// Requester is the group that asks a shared budget, with what it has read.
type Requester struct {
	// Group is the group asking; nil for an eviction of a pod the budget
	// selects itself.
	Group *v1alpha1.RolloutGroup
	// Members are the group's members with their pods as read live after
	// the record; nil to read them from the reader.
	Members []rollout.Member
	// Deleting holds pod UIDs the group's process deleted that its
	// members' pods may not show yet.
	Deleting func(types.UID) bool
}

// SharedView reads from r every group that shares zdb (their members and
// pods) and the StatefulSets of the pods zdb selects itself, and builds the
// one view a request of reason by req is decided on: every StatefulSet a
// zone in its failure domain, with its own group's budget for reason (the
// requester's decides); zdb's intents; the requester's crossZoneDelay and
// open rollout. skip leaves out a StatefulSet of zdb's own pods that some
// other budget judges (a RolloutGroup not sharing zdb claims it). A
// partition-aware budget is judged zone-wise here: a shared budget orders
// whole zones.
func SharedView(ctx context.Context, r client.Reader, zdb *v1alpha1.ZoneDisruptionBudget, reason v1alpha1.DisruptionReason, now time.Time,
	req Requester, skip func(context.Context, *appsv1.StatefulSet) (bool, error)) (disruption.View, error) {
	domainOf, err := DomainFunc(zdb)
	if err != nil {
		return disruption.View{}, err
	}
	groups, err := sharingGroups(ctx, r, zdb, req.Group)
	if err != nil {
		return disruption.View{}, err
	}
	v := disruption.View{Now: now, Intents: disruption.IntentsOf(zdb.Status.Disruption)}
	claimed := map[string]bool{}
	for _, g := range groups {
		asking := req.Group != nil && g.Name == req.Group.Name
		members, deleting := req.Members, req.Deleting
		if !asking || members == nil {
			if members, _, err = lookup.ResolveMembers(ctx, r, g); err != nil {
				return disruption.View{}, fmt.Errorf("RolloutGroup %s: %w", g.Name, err)
			}
			for i := range members {
				if members[i].StatefulSet != nil {
					if members[i].Pods, err = livePods(ctx, r, &members[i]); err != nil {
						return disruption.View{}, err
					}
				}
			}
		}
		if !asking {
			deleting = nil
		}
		gv, err := ViewOf(zoneWise(g), members, reason, now, deleting)
		if err != nil {
			return disruption.View{}, fmt.Errorf("RolloutGroup %s: %w", g.Name, err)
		}
		if asking {
			v.CrossZoneDelay, v.RolloutOpen = gv.CrossZoneDelay, gv.RolloutOpen
		}
		domains := map[string]string{}
		for _, m := range members {
			if m.StatefulSet != nil {
				domains[m.StatefulSet.Name] = domainOf(m.StatefulSet)
			}
		}
		for _, z := range gv.Zones {
			if claimed[z.Name] {
				continue // claimed by two groups: judged once, by the first by name
			}
			claimed[z.Name] = true
			z.Domain, z.Group = domains[z.Name], g.Name
			v.Zones = append(v.Zones, z)
		}
	}
	own, err := zdbZones(ctx, r, func(string) client.Reader { return r }, zdb, func(ctx context.Context, sts *appsv1.StatefulSet) (bool, error) {
		if claimed[sts.Name] {
			return true, nil
		}
		if skip == nil {
			return false, nil
		}
		return skip(ctx, sts)
	})
	if err != nil {
		return disruption.View{}, err
	}
	zv, err := ViewOfZDB(zdb, own, now)
	if err != nil {
		return disruption.View{}, err
	}
	if req.Group == nil {
		v.CrossZoneDelay = zv.CrossZoneDelay
	}
	domains := map[string]string{}
	for _, z := range own {
		domains[z.StatefulSet.Name] = domainOf(z.StatefulSet)
	}
	for _, z := range zv.Zones {
		z.Domain = domains[z.Name]
		v.Zones = append(v.Zones, z)
	}
	return v, nil
}

// sharingGroups lists from r the RolloutGroups that name zdb in
// spec.sharedDisruptionBudget, by name, with asking (as its caller holds
// it) in place of its own listing, or added when the list does not show it
// sharing yet.
func sharingGroups(ctx context.Context, r client.Reader, zdb *v1alpha1.ZoneDisruptionBudget, asking *v1alpha1.RolloutGroup) ([]*v1alpha1.RolloutGroup, error) {
	var list v1alpha1.RolloutGroupList
	if err := r.List(ctx, &list, client.InNamespace(zdb.Namespace)); err != nil {
		return nil, fmt.Errorf("live read of the RolloutGroups sharing ZoneDisruptionBudget %s: %w", zdb.Name, err)
	}
	var groups []*v1alpha1.RolloutGroup
	for i := range list.Items {
		g := &list.Items[i]
		if g.Spec.SharedDisruptionBudget == zdb.Name && (asking == nil || g.Name != asking.Name) {
			groups = append(groups, g)
		}
	}
	if asking != nil {
		groups = append(groups, asking)
	}
	slices.SortFunc(groups, func(a, b *v1alpha1.RolloutGroup) int { return strings.Compare(a.Name, b.Name) })
	return groups, nil
}

// zoneWise is rg without a partition regex: a shared budget orders whole
// zones (the API refuses the two together; this covers objects stored
// before that rule).
func zoneWise(rg *v1alpha1.RolloutGroup) *v1alpha1.RolloutGroup {
	if b := rg.Spec.DisruptionBudget; b == nil || b.PodNamePartitionRegex == "" {
		return rg
	}
	out := rg.DeepCopy()
	out.Spec.DisruptionBudget.PodNamePartitionRegex = ""
	return out
}

// AcquireShared is Acquire on the ZoneDisruptionBudget rg shares (SharedKey),
// deciding with decide. A budget that does not exist refuses: the group
// named it to be ordered with others, and deciding alone would break that.
func AcquireShared(ctx context.Context, c client.Client, live client.Reader, rg *v1alpha1.RolloutGroup, decide Decider[*v1alpha1.ZoneDisruptionBudget], dryRun bool, requester string) (disruption.Verdict, error) {
	key, _ := SharedKey(rg)
	v, err := Acquire(ctx, c, live, key, NewZDB, decide, dryRun, requester)
	if apierrors.IsNotFound(err) {
		return MissingShared(rg), nil
	}
	return v, err
}

// MissingShared is the refusal of every disruption of rg's pods while the
// ZoneDisruptionBudget it shares does not exist.
func MissingShared(rg *v1alpha1.RolloutGroup) disruption.Verdict {
	return disruption.Verdict{Code: disruption.CodeSharedBudgetNotFound,
		Message: fmt.Sprintf("ZoneDisruptionBudget %s, which RolloutGroup %s shares (spec.sharedDisruptionBudget), does not exist; no pod of the group is taken until it does",
			rg.Spec.SharedDisruptionBudget, rg.Name),
		RetryAfter: missingSharedRecheck}
}

// missingSharedRecheck is how soon a decision refused for a missing shared
// budget is worth asking again: a budget being created with its groups.
const missingSharedRecheck = 10 * time.Second

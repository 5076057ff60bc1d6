package budget

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// A decision first taken on the cache (a refusal there is final) is
// confirmed on a view that reads live only what the cache may not show
// yet and the decision counts on: the pods of the requesting zone (its own
// budget) and of every zone with a recorded intent (whether a recorded pod
// is still there untouched, which only a view read after the record
// tells). The members, their StatefulSets and the pods of the other zones
// come from the cache: a disruption nobody recorded (a pod failing, a pod
// deleted by hand) is not ordered by the budget whatever is read, and a
// view lagging a zone that is becoming whole again only refuses longer.

// liveZones are the zones whose pods a confirming view reads live: zone,
// and every zone with an intent in the record.
func liveZones(h *v1alpha1.DisruptionHold, zone string) map[string]bool {
	out := map[string]bool{zone: true}
	for _, in := range disruption.IntentsOf(h) {
		out[in.Zone] = true
	}
	return out
}

// ConfirmGroupView is the view GroupView builds, for a request of reason
// in zone, with only the pods of the zones that matter (liveZones) read
// from live; the members and the other zones' pods come from cache. rg is
// the group as read live.
func ConfirmGroupView(ctx context.Context, cache, live client.Reader, rg *v1alpha1.RolloutGroup, reason v1alpha1.DisruptionReason, zone string, now time.Time) (disruption.View, error) {
	members, _, err := lookup.ResolveMembers(ctx, cache, rg)
	if err != nil {
		return disruption.View{}, err
	}
	fresh := liveZones(rg.Status.Disruption, zone)
	for i := range members {
		m := &members[i]
		if m.StatefulSet == nil {
			continue
		}
		r := cache
		if fresh[m.Name] {
			r = live
		}
		if m.Pods, err = statefulSetPods(ctx, r, m.StatefulSet); err != nil {
			return disruption.View{}, err
		}
	}
	return ViewOf(rg, members, reason, now, nil)
}

// ConfirmZDBView is the view ZDBView builds for an eviction in zone, with
// only the pods of the zones that matter (liveZones) read from live; which
// pods the budget selects, their StatefulSets and the other zones' pods
// come from cache. zdb is the budget as read live.
func ConfirmZDBView(ctx context.Context, cache, live client.Reader, zdb *v1alpha1.ZoneDisruptionBudget, zone string, now time.Time,
	skip func(context.Context, *appsv1.StatefulSet) (bool, error)) (disruption.View, error) {
	fresh := liveZones(zdb.Status.Disruption, zone)
	zones, err := zdbZones(ctx, cache, func(name string) client.Reader {
		if fresh[name] {
			return live
		}
		return cache
	}, zdb, skip)
	if err != nil {
		return disruption.View{}, err
	}
	return ViewOfZDB(zdb, zones, now)
}

package disruption

import (
	"testing"
	"time"
)

// sharedService is a view of two groups sharing one budget, ingesters and
// store-gateways, each with StatefulSets in failure domains a, b and c
// (ing-zone-a, sg-zone-a, ...), changed by change when given.
func sharedService(change func(zones map[string]*zoneWrapper)) View {
	zones := map[string]*zoneWrapper{}
	var order []string
	for _, g := range []string{"ing", "sg"} {
		for _, d := range []string{"zone-a", "zone-b", "zone-c"} {
			w := makeZone(g+"-"+d, 3)
			w.z.Domain, w.z.Group = d, g
			zones[w.z.Name] = w
			order = append(order, w.z.Name)
		}
	}
	if change != nil {
		change(zones)
	}
	v := View{Now: testNow}
	for _, name := range order {
		v.Zones = append(v.Zones, zones[name].Obj())
	}
	return v
}

// TestDecideSharedBudget: StatefulSets of one failure domain go down
// together, each within its own maxUnavailable; two domains never do
// (issue 29, item 6: ingesters of zone a and store-gateways of zone b down
// together break the read path).
func TestDecideSharedBudget(t *testing.T) {
	ingABusy := func(z map[string]*zoneWrapper) { z["ing-zone-a"].Terminating(0) }
	runDecideCases(t, []decideCase{
		{name: "another group's StatefulSet of the same domain disrupted: allowed", view: sharedService(ingABusy),
			req: evict("sg-zone-a-0"), want: granted(evict("sg-zone-a-0"))},
		{name: "another group's StatefulSet of another domain disrupted: refused", view: sharedService(ingABusy),
			req: evict("sg-zone-b-0"), want: denied(CodeOtherZoneDisrupted, 0), message: []string{"ing-zone-a", "1 terminating"}},
		{name: "another group's pending intent in another domain: refused", view: withIntents(sharedService(nil), intentOf("ing-zone-a", rollout, time.Second, "ing-zone-a-0")),
			req: roll("sg-zone-b", "sg-zone-b-0"), want: denied(CodeHeldByOtherZone, 44*time.Second), message: []string{"ing-zone-a"}},
		{name: "another group's pending intent in the same domain: allowed, the intent kept", view: withIntents(sharedService(nil), intentOf("ing-zone-a", rollout, time.Second, "ing-zone-a-0")),
			req: roll("sg-zone-a", "sg-zone-a-0"), want: granted(roll("sg-zone-a", "sg-zone-a-0"), intentOf("ing-zone-a", rollout, time.Second, "ing-zone-a-0"))},
		{name: "each StatefulSet keeps its own budget in a shared domain", view: sharedService(func(z map[string]*zoneWrapper) { z["sg-zone-a"].NotAvailable(1) }),
			req: evict("sg-zone-a-0"), want: denied(CodeZoneBudget, 0), message: []string{"sg-zone-a has 1 of 3"}},
		{name: "a rollout of one group does not stop a downscale of another in the same domain", view: withIntents(sharedService(nil), intentOf("ing-zone-a", rollout, time.Second, "ing-zone-a-0")),
			req: shrink("sg-zone-a", "sg-zone-a-2"), want: granted(shrink("sg-zone-a", "sg-zone-a-2"), intentOf("ing-zone-a", rollout, time.Second, "ing-zone-a-0"))},
		{name: "a rollout of a group stops its own downscale in every zone", view: withIntents(sharedService(nil), intentOf("ing-zone-a", rollout, time.Second, "ing-zone-a-0")),
			req: shrink("ing-zone-a", "ing-zone-a-2"), want: denied(CodeHeldByOtherZone, 44*time.Second), message: []string{"rollout of zone ing-zone-a"}},
		{name: "crossZoneDelay counts another domain only", view: func() View {
			v := sharedService(func(z map[string]*zoneWrapper) {
				z["ing-zone-a"].AvailableSince(0, testNow.Add(-time.Second))
				z["ing-zone-b"].AvailableSince(0, testNow.Add(-time.Second))
			})
			v.CrossZoneDelay = time.Minute
			return v
		}(), req: evict("sg-zone-a-0"), want: denied(CodeCrossZoneDelay, 59*time.Second), message: []string{"ing-zone-b"}},
	})
}

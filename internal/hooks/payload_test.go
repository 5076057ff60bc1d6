package hooks

import (
	"encoding/json"
	"testing"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// The payloads' JSON is what hook endpoints parse: the field names are the
// documented ones (docs/hooks-and-http-gates.md), and rolloutId appears only
// when the group sets spec.rolloutId.
func TestPayloadJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"removal with a rollout id", RemovalPayload{Reason: v1alpha1.RemovalEviction, Pod: "ingester-zone-a-3", Namespace: "mimir", Group: "ingester",
			Member: "ingester-zone-a", Revision: "r5", RolloutID: "deploy-7"},
			`{"reason":"eviction","pod":"ingester-zone-a-3","namespace":"mimir","group":"ingester","member":"ingester-zone-a","revision":"r5","rolloutId":"deploy-7"}`},
		{"removal without", RemovalPayload{Reason: v1alpha1.RemovalDownscale, Pod: "p-1", Namespace: "ns", Member: "p"},
			`{"reason":"downscale","pod":"p-1","namespace":"ns","member":"p"}`},
		{"member hook with a rollout id", MemberPayload{Hook: "beforeMember", Namespace: "mimir", Group: "ingester", Member: "ingester-zone-a", Revision: "r5", RolloutID: "deploy-7"},
			`{"hook":"beforeMember","namespace":"mimir","group":"ingester","member":"ingester-zone-a","revision":"r5","rolloutId":"deploy-7"}`},
		{"member hook without", MemberPayload{Hook: "afterMember", Namespace: "mimir", Group: "ingester", Member: "ingester-zone-a", Revision: "r5"},
			`{"hook":"afterMember","namespace":"mimir","group":"ingester","member":"ingester-zone-a","revision":"r5"}`},
	} {
		got, err := json.Marshal(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

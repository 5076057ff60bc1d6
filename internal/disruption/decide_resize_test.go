package disruption

import (
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

const resize = v1alpha1.DisruptionResize

// hold is zone's resize hold, decided at decided, as Decide records it.
func hold(zone string, decided time.Time) Intent {
	return Intent{Zone: zone, Reason: resize, Holder: "RolloutGroup g (volume resize)", Decided: decided, Expires: decided.Add(ResizeHoldWindow)}
}

func TestDecideResizeHold(t *testing.T) {
	zones := func() []Zone { return []Zone{makeZone("a", 3).Obj(), makeZone("b", 3).Obj(), makeZone("c", 3).Obj()} }
	tests := []struct {
		name    string
		intents []Intent
		rollout string
		req     Request
		code    string
	}{
		{name: "a resize hold is allowed on a whole group", req: Request{Zone: "a", Reason: resize}},
		{name: "an eviction of another zone waits for the hold", intents: []Intent{hold("a", testNow)},
			req: Request{Zone: "b", Reason: eviction, Pods: []string{"b-0"}}, code: CodeZoneResizing},
		{name: "a rollout of the held zone waits too", intents: []Intent{hold("a", testNow)},
			req: Request{Zone: "a", Reason: rollout, Pods: []string{"a-0"}}, code: CodeZoneResizing},
		{name: "a downscale of another zone waits", intents: []Intent{hold("a", testNow)},
			req: Request{Zone: "c", Reason: downscale, Pods: []string{"c-2"}}, code: CodeZoneResizing},
		{name: "an eviction in the held zone is judged on its budget", intents: []Intent{hold("a", testNow)},
			req: Request{Zone: "a", Reason: eviction, Pods: []string{"a-0"}}},
		{name: "a second zone's resize waits", intents: []Intent{hold("a", testNow)},
			req: Request{Zone: "b", Reason: resize}, code: CodeZoneResizing},
		{name: "the held zone's restart is allowed within its budget", intents: []Intent{hold("a", testNow)},
			req: Request{Zone: "a", Reason: resize, Pods: []string{"a-1"}}},
		{name: "an expired hold holds nothing", intents: []Intent{hold("a", testNow.Add(-ResizeHoldWindow))},
			req: Request{Zone: "b", Reason: eviction, Pods: []string{"b-0"}}},
		{name: "a resize waits for an open rollout", rollout: "b", req: Request{Zone: "a", Reason: resize}, code: CodeRolloutInProgress},
		{name: "a resize waits for a rollout's intent", intents: []Intent{{Zone: "b", Reason: rollout, Decided: testNow, Expires: testNow.Add(time.Minute),
			Pods: []IntentPod{{Name: "b-0", UID: uidOf("b-0")}}}}, req: Request{Zone: "a", Reason: resize}, code: CodeHeldByOtherZone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := View{Now: testNow, Zones: zones(), Intents: tt.intents, RolloutOpen: tt.rollout}
			got := Decide(v, tt.req)
			if tt.code == "" && !got.Allowed {
				t.Fatalf("denied %s: %s", got.Code, got.Message)
			}
			if tt.code != "" && (got.Allowed || got.Code != tt.code) {
				t.Fatalf("got allowed=%v code %q (%s), want %s", got.Allowed, got.Code, got.Message, tt.code)
			}
		})
	}
}

func TestDecideRenewsAHold(t *testing.T) {
	v := View{Now: testNow.Add(time.Minute), Zones: []Zone{makeZone("a", 3).Obj(), makeZone("b", 3).Obj()}, Intents: []Intent{hold("a", testNow)}}
	got := Decide(v, Request{Zone: "a", Reason: resize, Holder: "RolloutGroup g (volume resize)"})
	if !got.Allowed {
		t.Fatalf("denied: %s", got.Message)
	}
	if len(got.Record) != 1 || !got.Record[0].Expires.Equal(testNow.Add(time.Minute+ResizeHoldWindow)) {
		t.Fatalf("record = %+v, want the one hold renewed", got.Record)
	}
}

func TestDecideHoldMovesToTheNextZoneOnlyWhenTheLastIsWhole(t *testing.T) {
	h := hold("a", testNow)
	v := View{Now: testNow.Add(time.Second), Zones: []Zone{makeZone("a", 3).NotAvailable(1).Obj(), makeZone("b", 3).Obj()}, Intents: []Intent{h}}
	if got := Decide(v, Request{Zone: "b", Reason: resize, Holder: h.Holder}); got.Allowed || got.Code != CodeOtherZoneDisrupted {
		t.Fatalf("got allowed=%v %s, want the move to wait for zone a", got.Allowed, got.Code)
	}
	v.Zones[0] = makeZone("a", 3).Obj()
	got := Decide(v, Request{Zone: "b", Reason: resize, Holder: h.Holder})
	if !got.Allowed || len(got.Record) != 1 || got.Record[0].Zone != "b" {
		t.Fatalf("got allowed=%v record %+v, want the hold moved to b", got.Allowed, got.Record)
	}
}

func TestDecideRenewsAHoldWhileARolloutWaits(t *testing.T) {
	h := hold("a", testNow)
	v := View{Now: testNow.Add(time.Minute), Zones: []Zone{makeZone("a", 3).Obj(), makeZone("b", 3).Obj()}, Intents: []Intent{h}, RolloutOpen: "b"}
	if got := Decide(v, Request{Zone: "a", Reason: resize, Holder: h.Holder}); !got.Allowed {
		t.Fatalf("renewal denied: %s", got.Message)
	}
	if got := Decide(v, Request{Zone: "b", Reason: rollout, Pods: []string{"b-0"}}); got.Allowed || got.Code != CodeZoneResizing {
		t.Fatalf("rollout: allowed=%v %s, want it to wait for the resize", got.Allowed, got.Code)
	}
	// The resize goes on to its next zone and its restarts while the rollout waits.
	if got := Decide(v, Request{Zone: "b", Reason: resize, Holder: h.Holder}); !got.Allowed {
		t.Fatalf("move to zone b denied: %s", got.Message)
	}
	if got := Decide(v, Request{Zone: "a", Reason: resize, Holder: h.Holder, Pods: []string{"a-0"}}); !got.Allowed {
		t.Fatalf("restart in zone a denied: %s", got.Message)
	}
	// A resize holding nothing waits for the open rollout.
	if got := Decide(v, Request{Zone: "a", Reason: resize, Holder: "RolloutGroup other (volume resize)"}); got.Allowed || got.Code != CodeRolloutInProgress {
		t.Fatalf("a new resize: allowed=%v %s, want it to wait for the rollout", got.Allowed, got.Code)
	}
}
